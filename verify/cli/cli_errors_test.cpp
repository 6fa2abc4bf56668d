// Bad input to the what-if commands, through the real dptwin executable: each
// case checks the exact error text on stderr and the exit code (2: bad flags or
// input, nothing run). Also: every command's --help has an example and the exit
// codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "verify/support/cli_run.hpp"
#include "verify/support/scenario_text.hpp"

namespace dpt::test {
namespace {

namespace fs = std::filesystem;

const std::string kSweep = kGoodScenario + "sweep:\n  devices: [1, 2]\n";
// A shard file of a two-shard sweep (only shard 0/2), as dptwin sweep --shard writes it.
const std::string kShard0 =
    R"({"schema": "dptwin.sweep/1", "scenario": {"name": "s", "file": "s.yaml", "question": "", "digest": "00000000000000aa",)"
    R"( "target": null}, "total_points": 2, "shard": {"index": 0, "count": 2}, "points": []})";

struct CliCase {
  const char* name;
  std::vector<std::string> args;
  std::map<std::string, std::string> files;  // written into the case's directory first
  int exit_code;
  std::string err;  // exact stderr
};

class CliError : public ::testing::TestWithParam<CliCase> {};

// An empty scratch folder cli_errors/NAME under the build tree.
fs::path fresh_case_dir(const std::string& name) {
  const fs::path dir = fs::path(DPT_BINARY_DIR) / "cli_errors" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST_P(CliError, ExactMessageAndExitCode) {
  const CliCase& c = GetParam();
  const fs::path dir = fresh_case_dir(c.name);
  for (const auto& [name, text] : c.files) std::ofstream(dir / name) << text;
  const CliResult r = run_dptwin(c.args, dir);
  EXPECT_EQ(r.err, c.err);
  EXPECT_EQ(r.exit_code, c.exit_code);
  EXPECT_EQ(r.out, "");  // nothing was run, nothing printed
}

// `dptwin predict` with a good configuration as flags, some replaced or added.
std::vector<std::string> predict_with(const std::vector<std::pair<std::string, std::string>>& changes) {
  std::vector<std::pair<std::string, std::string>> flags = {{"--hardware", "dgx-a100"}, {"--model", "resnet50"},
                                                            {"--strategy", "ddp"},       {"--devices", "8"},
                                                            {"--batch-per-device", "32"}};
  // A named pair, not a structured binding: clang before 16 cannot capture a binding in a lambda.
  for (const auto& change : changes) {
    auto it = std::find_if(flags.begin(), flags.end(), [&](const auto& f) { return f.first == change.first; });
    if (it != flags.end()) it->second = change.second;
    else flags.push_back(change);
  }
  std::vector<std::string> args = {"predict"};
  for (const auto& [flag, value] : flags) {
    args.push_back(flag);
    args.push_back(value);
  }
  return args;
}

const std::string kHelp = "Run with --help for more information.\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, CliError,
    ::testing::Values(
        CliCase{"UnknownFlag", {"predict", "--bogus"}, {}, 2, "The following argument was not expected: --bogus\n" + kHelp},
        CliCase{"FlagOfTheWrongType", {"predict", "--devices", "eight"}, {}, 2,
                "Could not convert: --devices = eight\n" + kHelp},
        CliCase{"MissingScenarioFile", {"predict", "missing.yaml"}, {}, 2,
                "scenario: File does not exist: missing.yaml\n" + kHelp},
        // An empty value is refused by the flag's name, not taken as "not given" (CLI11's
        // default for optional values, which would run the file's or the default value).
        CliCase{"EmptyIntegerFlag", predict_with({{"--devices", ""}}), {}, 2,
                "--devices: empty value (give one, or leave the flag out)\n" + kHelp},
        CliCase{"EmptyFlagWithEquals", {"sweep", "s.yaml", "--jobs="}, {{"s.yaml", kSweep}}, 2,
                "--jobs: 1 required INT missing\n" + kHelp},
        CliCase{"EmptyTextFlag", predict_with({{"--hardware", ""}}), {}, 2,
                "--hardware: empty value (give one, or leave the flag out)\n" + kHelp},
        CliCase{"PredictWithNothing", {"predict"}, {}, 2,
                "dptwin predict: error: give a scenario file, or --hardware, --model, --strategy and --batch or "
                "--batch-per-device\n"},
        // Some flags given: the error names the missing ones only.
        CliCase{"PredictWithoutABatch",
                {"predict", "--hardware", "dgx-a100", "--model", "resnet50", "--strategy", "ddp"}, {}, 2,
                "dptwin predict: error: without a scenario file, predict also needs --batch or --batch-per-device (the "
                "flags name the whole configuration)\n"},
        // A hardware path relative to the working directory is named as given (it read
        // "././missing.yaml").
        CliCase{"PredictHardwarePathAsGiven",
                {"predict", "--hardware", "./missing.yaml", "--model", "resnet50", "--strategy", "ddp", "--batch", "8"},
                {}, 2, "dptwin predict: error: --hardware: hardware file ./missing.yaml does not exist\n"},
        CliCase{"UnknownKeyInFile", {"predict", "bad.yaml"}, {{"bad.yaml", kGoodScenario + "devcies: 8\n"}}, 2,
                "dptwin predict: error: bad.yaml:7: devcies: unknown key; did you mean 'devices'? (allowed: accumulate, batch, batch_per_device, "
                "bucket_cap_mb, checkpoint, comm_hook, devices, dtype, global_batch, gpus, hardware, inputs, memory_format, model, "
                "name, nodes, optimizer, optimizer_impl, overrides, plan, precision, question, schema_version, strategy, sweep, target)\n"},
        CliCase{"WrongTypeInFile", {"predict", "bad.yaml"}, {{"bad.yaml", kGoodScenario + "nodes: [1]\n"}}, 2,
                "dptwin predict: error: bad.yaml:7: nodes: expected an integer, got '<not a scalar>'\n"},
        CliCase{"MoreGpusThanTheHardwareHas", predict_with({{"--devices", "16"}}), {}, 2,
                "dptwin predict: error: --devices: 16 GPUs per node, but dgx-a100 has 8\n"},
        CliCase{"BatchZero", predict_with({{"--batch-per-device", "0"}}), {}, 2,
                "dptwin predict: error: --batch-per-device: must be positive, got 0\n"},
        CliCase{"UnknownInputs", predict_with({{"--inputs", "gpu"}}), {}, 2,
                "dptwin predict: error: --inputs: unknown inputs 'gpu' (expected host: each step copies its batch, or "
                "device: the batch stays on the GPUs)\n"},
        CliCase{"ZeroBandwidthOverride", predict_with({{"--override", "nvswitch.link_bandwidth=0 GB/s"}}), {}, 2,
                "dptwin predict: error: --override nvswitch.link_bandwidth: 0 GB/s is outside 1 MB/s .. 10 TB/s\n"},
        CliCase{"OverrideWithoutValue", predict_with({{"--override", "gpu.memory"}}), {}, 2,
                "dptwin predict: error: --override gpu.memory: expected PATH=VALUE, e.g. --override 'gpu.memory=40 "
                "GiB'\n"},
        // Out of memory before the step: a result (exit 1, as the twin's own out of memory),
        // not bad input; the message still names the flag.
        CliCase{"ModelDoesNotFit", predict_with({{"--model", "llama-2-7b"}, {"--optimizer", "adamw"}}), {}, 1,
                "dptwin predict: out of memory: --model: llama-2-7b does not fit: parameters, gradients and adamw "
                "state need 100.41 GiB per GPU at f32, A100-SXM4-80GB has 80.00 GiB\n"},
        CliCase{"UnknownStrategy", predict_with({{"--strategy", "fsdp"}}), {}, 2,
                "dptwin predict: error: --strategy: unknown strategy 'fsdp' (allowed: single, dp, ddp)\n"},
        CliCase{"UnknownHardwareFile", predict_with({{"--hardware", "./nope.yaml"}}), {}, 2,
                "dptwin predict: error: --hardware: hardware file ./nope.yaml does not exist\n"},
        CliCase{"BadModelFile", predict_with({{"--model", "m.yaml"}}),
                {{"m.yaml", "schema_version: 1\nname: m\nsample: x\ninput_features: 0\n"}}, 2,
                "dptwin predict: error: --model: m.yaml:4: input_features: 0 is outside 1 .. 1000000000000\n"},
        CliCase{"PredictOnASweep", {"predict", "s.yaml"}, {{"s.yaml", kSweep}}, 2,
                "dptwin predict: error: s.yaml: sweep: predict runs one configuration, this scenario sweeps devices "
                "(run it with dptwin sweep, or fix the axes with flags)\n"},
        CliCase{"SweepWithoutScenario", {"sweep"}, {}, 2, "scenario is required\n" + kHelp},
        CliCase{"SweepJobsZero", {"sweep", "s.yaml", "--jobs", "0"}, {{"s.yaml", kSweep}}, 2,
                "dptwin sweep: error: --jobs 0: must be at least 1\n"},
        CliCase{"SweepBadShard", {"sweep", "s.yaml", "--shard", "3/2"}, {{"s.yaml", kSweep}}, 2,
                "dptwin sweep: error: --shard 3/2: expected I/N with 0 <= I < N, e.g. --shard 0/4 (Slurm: "
                "--array=0-<N-1> and --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT; an --array from 1 needs "
                "$((SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN)) as I)\n"},
        CliCase{"MergeNotJson", {"merge", "a.json"}, {{"a.json", "not json"}}, 2,
                "dptwin merge: error: sweep result a.json: not JSON: [json.exception.parse_error.101] parse error at "
                "line 1, column 2: syntax error while parsing value - invalid literal; last read: 'no'\n"},
        CliCase{"MergeMissingShard", {"merge", "a.json"}, {{"a.json", kShard0}}, 2,
                "dptwin merge: error: merge: shard 1/2 missing\n"},
        CliCase{"ReportOnAShard", {"report", "a.json"}, {{"a.json", kShard0}}, 2,
                "dptwin report: error: a.json: shard 0/2 holds only part of the sweep; dptwin merge the shards first\n"},
        CliCase{"ReportJobsZero", {"report", "--jobs", "0"}, {}, 2, "dptwin report: error: --jobs 0: must be at least 1\n"},
        CliCase{"PlanWithoutTarget", {"plan", "--model", "resnet50", "--hardware", "dgx-a100"}, {}, 2,
                "dptwin plan: error: give one target: --target-samples-per-s N, --target-tokens-per-s N, --samples N "
                "--within-hours H, or --tokens N --within-hours H\n"},
        CliCase{"PlanBadPrice",
                {"plan", "--model", "resnet50", "--target-samples-per-s", "100", "--hardware", "dgx-a100:cheap"}, {}, 2,
                "dptwin plan: error: --hardware dgx-a100:cheap: expected NAME or NAME:PRICE_PER_GPU_HOUR, e.g. "
                "dgx-a100:2.40\n"},
        CliCase{"PlanNegativeTarget",
                {"plan", "--model", "resnet50", "--target-samples-per-s", "-5", "--hardware", "dgx-a100"}, {}, 2,
                "dptwin plan: error: --target-samples-per-s -5: must be positive\n"},
        CliCase{"PlanFileWithoutPlanSection", {"plan", "p.yaml"}, {{"p.yaml", kGoodScenario}}, 2,
                "dptwin plan: error: p.yaml: plan: missing key (dptwin plan needs a plan section)\n"},
        CliCase{"CompareOneInput", {"compare", "a.yaml"}, {{"a.yaml", kGoodScenario}}, 2,
                "dptwin compare: error: compare: give at least two inputs\n"},
        // It said CLI11's "shell is required", naming neither shell.
        CliCase{"CompletionWithoutShell", {"completion"}, {}, 2,
                "dptwin completion: error: completion: give the shell: dptwin completion bash, or zsh\n"},
        CliCase{"BenchSimWithoutHardware", {"bench", "--backend", "sim"}, {}, 2,
                "dptwin bench: error: --hardware is required with --backend sim\n"},
        CliCase{"BenchUnknownBackend", {"bench", "--backend", "gpu"}, {}, 2,
                "dptwin bench: error: --backend gpu: unknown backend (allowed: sim, host, cuda)\n"},
        CliCase{"BenchMaxBelowMin", {"bench", "--hardware", "dgx-a100", "-b", "1M", "-e", "1K"}, {}, 2,
                "dptwin bench: error: -e 1K is below -b 1M\n"},
        CliCase{"BenchFactorOne", {"bench", "--hardware", "dgx-a100", "-f", "1"}, {}, 2,
                "dptwin bench: error: -f: factor must be >= 2, got 1\n"},
        CliCase{"BenchBadSizeSuffix", {"bench", "--hardware", "dgx-a100", "-b", "1X"}, {}, 2,
                "dptwin bench: error: -b: unknown size suffix 'X' in '1X' (K, M, G = 1024^k)\n"},
        CliCase{"BenchNoIterations", {"bench", "--hardware", "dgx-a100", "-n", "0"}, {}, 2,
                "dptwin bench: error: -n: iterations must be >= 1, got 0\n"},
        CliCase{"BenchUnknownType", {"bench", "--hardware", "dgx-a100", "-d", "float8"}, {}, 2,
                "dptwin bench: error: -d: unknown type 'float8' (float, double, half, bfloat16, int8, int32, int64)\n"},
        CliCase{"BenchUnknownOp", {"bench", "--hardware", "dgx-a100", "--op", "allgather2"}, {}, 2,
                "dptwin bench: error: --op allgather2: the sim backend sweeps one collective: all_reduce, all_gather, "
                "reduce_scatter or broadcast (host and cuda also take reduce, a comma-separated list, or all)\n"},
        // It said "Value 0 not in range 0.000000 to 1797693134862315...", a range 0 is in.
        CliCase{"VerifyNoDevices", {"verify", "--devices", "0"}, {}, 2,
                "dptwin verify: error: --devices must be at least 1, got 0\n"},
        CliCase{"BenchSimReduce", {"bench", "--hardware", "dgx-a100", "--op", "reduce"}, {}, 2,
                "dptwin bench: error: --op reduce: the sim backend sweeps nccl-tests' all_reduce, all_gather, "
                "reduce_scatter and broadcast (host and cuda also run reduce)\n"},
        CliCase{"BenchTooManyDevices", {"bench", "--hardware", "dgx-a100", "--devices", "9"}, {}, 2,
                "dptwin bench: error: --devices 9 is not in 1..8 (GPUs of dgx-a100)\n"},
        CliCase{"BenchNodesZero", {"bench", "--hardware", "dgx-h100-cluster", "--nodes", "0"}, {}, 2,
                "dptwin bench: error: --nodes 0: must be in 1..4096\n"},
        CliCase{"BenchNodesWithoutNetwork", {"bench", "--hardware", "l40s-4x-pcie4", "--nodes", "2"}, {}, 2,
                "dptwin bench: error: --nodes 2: hardware l40s-4x-pcie4 has no network section, so it cannot have 2 "
                "nodes\n"},
        CliCase{"BenchUnknownAlgorithm", {"bench", "--hardware", "dgx-a100", "--algo", "butterfly"}, {}, 2,
                "dptwin bench: error: --algo: unknown collective algorithm 'butterfly' (allowed: ring, tree, nvls, nvls_tree)\n"},
        CliCase{"BenchNvlsTreeOnOneNode", {"bench", "--hardware", "dgx-h100", "--algo", "nvls_tree"}, {}, 2,
                "dptwin bench: error: --algo nvls_tree: algorithm nvls_tree cannot run all_reduce here: nvls_tree "
                "needs ranks on at least 2 nodes whose NVSwitch reduces in-switch, with at least 2 GPUs per node that "
                "have a NIC of their own (hardware dgx-h100)\n"},
        CliCase{"BenchNvlsTreeWithoutInSwitchReduction",
                {"bench", "--hardware", "dgx-a100-cluster", "--algo", "NVLSTree"}, {}, 2,
                "dptwin bench: error: --algo NVLSTree: algorithm nvls_tree cannot run all_reduce here: nvls_tree "
                "needs ranks on at least 2 nodes whose NVSwitch reduces in-switch, with at least 2 GPUs per node that "
                "have a NIC of their own (hardware dgx-a100-cluster)\n"},
        CliCase{"BenchTreeOnOneNode", {"bench", "--hardware", "dgx-a100", "--algo", "tree"}, {}, 2,
                "dptwin bench: error: --algo tree: algorithm tree cannot run all_reduce here: tree needs ranks on at "
                "least 2 nodes\n"},
        CliCase{"CompareBadStepReport", {"compare", "a.json", "b.json"},
                {{"a.json", R"({"schema": "dptwin.step_report/0"})"}, {"b.json", "{}"}}, 2,
                "dptwin compare: error: step report a.json: key 'schema' is 'dptwin.step_report/0'; this dptwin reads "
                "'dptwin.step_report/1'\n"}),
    [](const ::testing::TestParamInfo<CliCase>& param_info) { return std::string(param_info.param.name); });

// Invariant: calibrate's output never replaces one of its inputs (the hardware file it
// calibrates, whose sources and comments the calibrated file does not keep, or a
// measurement): exit 2 naming --out and the input, both files left byte for byte.
TEST(CliCalibrate, OutputNeverReplacesAnInput) {
  const fs::path dir = fresh_case_dir("calibrate_inputs");
  fs::copy_file(fs::path(DPT_SOURCE_DIR) / "scenarios" / "hardware" / "dgx-a100.yaml", dir / "hw.yaml");
  fs::copy_file(fs::path(DPT_SOURCE_DIR) / "verify" / "data" / "nccl-tests" / "dgx-a100-8gpu-all_reduce-v2.log",
                dir / "a.log");
  const auto bytes = [&](const char* name) {
    std::ifstream in(dir / name, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string hw = bytes("hw.yaml"), log = bytes("a.log");
  const CliResult onto_hw = run_dptwin({"calibrate", "--from", "a.log", "--hardware", "hw.yaml", "-o", "hw.yaml"}, dir);
  EXPECT_EQ(onto_hw.exit_code, 2) << onto_hw.err;
  EXPECT_NE(onto_hw.err.find("--out hw.yaml: is the hardware file it calibrates"), std::string::npos) << onto_hw.err;
  const CliResult onto_log = run_dptwin({"calibrate", "--from", "a.log", "--hardware", "hw.yaml", "-o", "a.log"}, dir);
  EXPECT_EQ(onto_log.exit_code, 2) << onto_log.err;
  EXPECT_NE(onto_log.err.find("--out a.log: is the measurement it calibrates from"), std::string::npos) << onto_log.err;
  EXPECT_EQ(bytes("hw.yaml"), hw);
  EXPECT_EQ(bytes("a.log"), log);
  // Another file is fine.
  EXPECT_EQ(run_dptwin({"calibrate", "--from", "a.log", "--hardware", "hw.yaml", "-o", "fitted.yaml"}, dir).exit_code, 0);
}

// A dptwin document of another kind names what it is and which command reads it (a step
// report given to report read "key 'accumulate' is not a known key"; to calibrate, "a bench
// of --backend sim is the twin's own prediction").
TEST(CliInputs, ADocumentOfAnotherKindSaysWhatItIs) {
  const fs::path dir = fresh_case_dir("document_kinds");
  ASSERT_EQ(run_dptwin({"predict", "--hardware", "dgx-a100", "--model", "mlp:4-8-2", "--strategy", "single",
                        "--batch-per-device", "4", "--out", "sr.json"},
                       dir)
                .exit_code,
            0);
  const CliResult report = run_dptwin({"report", "sr.json", "--report", "rep"}, dir);
  EXPECT_EQ(report.exit_code, 2);
  EXPECT_NE(report.err.find("sr.json: schema 'dptwin.step_report/1' is a step report (predict --out or --json): "
                            "compare reads it, not a sweep result"),
            std::string::npos)
      << report.err;
  const CliResult calibrate = run_dptwin({"calibrate", "--from", "sr.json", "--hardware", "dgx-a100"}, dir);
  EXPECT_EQ(calibrate.exit_code, 2);
  EXPECT_NE(calibrate.err.find("schema 'dptwin.step_report/1' is a step report (predict --out or --json): compare "
                               "reads it, not a bench result"),
            std::string::npos)
      << calibrate.err;
  // train --json output has no schema: it is named by its "command".
  const CliResult train = run_dptwin({"train", "--model", "mlp:4-8-2", "--steps", "1", "--json"}, dir);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  std::ofstream(dir / "train.json") << train.out;
  const CliResult merge = run_dptwin({"report", "train.json", "--report", "rep2"}, dir);
  EXPECT_EQ(merge.exit_code, 2);
  EXPECT_NE(merge.err.find("train.json: this is `dptwin train --json` output (a training run's losses), not a sweep "
                           "result"),
            std::string::npos)
      << merge.err;
}

// An error that echoes a huge bad value is cut in its middle: a 100,000-character strategy
// printed 100 KB to stderr. The head still names the file, line and key.
TEST(CliInputs, AHugeBadValueIsNotEchoedWhole) {
  const fs::path dir = fresh_case_dir("huge_value");
  std::string text = kGoodScenario;
  const size_t at = text.find("strategy: ddp");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("strategy: ddp").size(), "strategy: " + std::string(100000, 'x'));
  std::ofstream(dir / "s.yaml") << text;
  const CliResult r = run_dptwin({"predict", "s.yaml"}, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_LT(r.err.size(), 4000u) << r.err.size();
  EXPECT_NE(r.err.find("s.yaml:"), std::string::npos) << r.err.substr(0, 300);
  EXPECT_NE(r.err.find("strategy"), std::string::npos) << r.err.substr(0, 300);
  EXPECT_NE(r.err.find("bytes of the message left out"), std::string::npos) << r.err.substr(0, 300);
}

TEST(CliHelp, EveryWhatIfCommandHasAnExampleAndItsExitCodes) {
  for (const char* cmd : {"predict", "sweep", "merge", "report", "plan", "compare", "bench"}) {
    const CliResult r = run_dptwin({cmd, "--help"}, fs::path(DPT_BINARY_DIR) / "cli_errors" / "help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("Example"), std::string::npos) << cmd;
    EXPECT_NE(r.out.find("dptwin " + std::string(cmd) + " "), std::string::npos) << cmd;
    // As the README states them: out of memory is 1, not 3.
    EXPECT_NE(r.out.find("Exit codes: 0 success; 1 a check or target failed, or the model does not fit (out of "
                         "memory); 2 bad flags or input (nothing run); 3 the run failed"),
              std::string::npos)
        << cmd;
    EXPECT_NE(r.out.find("--json"), std::string::npos) << cmd;
  }
}

}  // namespace
}  // namespace dpt::test
