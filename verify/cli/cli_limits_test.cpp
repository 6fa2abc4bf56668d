// Hostile and careless command lines, each exactly as it was found to crash, hang,
// wrap or answer with a library's internal message. Invariant of every case: the
// executable ends within the time limit with exit 2, prints nothing on stdout, and
// its error names the flag (or file and key) and the limit it broke. The limit is
// an alarm(2) the child inherits: a hang comes back as a SIGALRM death (exit 142),
// an abort as 134, never as a passing test.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "verify/support/cli_run.hpp"
#include "verify/support/scenario_text.hpp"
#include "verify/support/test_files.hpp"

namespace dpt::test {
namespace {

namespace fs = std::filesystem;

fs::path case_dir(const std::string& name) { return test::fresh_test_dir(fs::path("cli_limits") / name); }

struct LimitCase {
  const char* name;
  std::vector<std::string> args;
  std::map<std::string, std::string> files;  // written into the case's directory first
  std::string err;   // the whole stderr, or its beginning when `also` is given
  std::string also;  // when the rest varies (this machine's free memory, the library): a part of it
};

class CliLimit : public ::testing::TestWithParam<LimitCase> {};

TEST_P(CliLimit, ExitTwoNamingTheFlagAndTheLimit) {
  const LimitCase& c = GetParam();
  const fs::path dir = case_dir(c.name);
  for (const auto& [name, text] : c.files) {
    if (text == "<dir>") fs::create_directories(dir / name);
    else if (text == "<fifo>") ASSERT_EQ(::mkfifo((dir / name).c_str(), 0600), 0) << name;
    else if (text == "<loop>") fs::create_symlink(name, dir / name);  // a link to itself
    else std::ofstream(dir / name) << text;
  }
  const CliResult r = run_dptwin(c.args, dir, 60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  if (!c.also.empty()) {
    EXPECT_EQ(r.err.substr(0, c.err.size()), c.err);
    EXPECT_NE(r.err.find(c.also), std::string::npos) << r.err;
  } else {
    EXPECT_EQ(r.err, c.err);
  }
  EXPECT_EQ(r.out, "");
}

// 64 axes of two values each: 2^64 points, which wrapped to 0 in a size_t product.
std::string sweep_of_64_axes() {
  std::string s = kGoodScenario + "sweep:\n";
  for (int i = 0; i < 64; ++i) s += fmt::format("  overrides.gpu.x{}: [1, 2]\n", i);
  return s;
}

// A sweep result with `count` shards and the given points (JSON objects).
std::string shard_json(const std::string& total, const std::string& index, const std::string& count,
                       const std::string& points) {
  return R"({"schema": "dptwin.sweep/1", "scenario": {"name": "s", "file": "s.yaml", "question": "", "digest": "aa",)"
         R"( "target": null}, "total_points": )" + total + R"(, "shard": {"index": )" + index + R"(, "count": )" + count +
         R"(}, "points": [)" + points + "]}";
}
std::string skipped_point(int index) {
  return fmt::format(R"({{"index": {}, "axes": [], "hardware": "h", "gpu_name": "g", "model": "m", "strategy": "ddp",)"
                     R"( "devices": 1, "nodes": 1, "batch_global": 1, "batch_per_device": 1, "dtype": "f32",)"
                     R"( "bucket_cap_mb": 25, "optimizer": "sgd", "status": "skipped", "reason": "r", "wall_s": 0,)"
                     R"( "report": null}})",
                     index);
}

const std::string kSimBench = "desktop-2gpu-pcie-p2p";

INSTANTIATE_TEST_SUITE_P(
    Cases, CliLimit,
    ::testing::Values(
        // split lists every index: bounded before the lists are built (was SIGABRT, bad_alloc).
        LimitCase{"SplitHugeShuffledBatch", {"split", "--batch", "100000000", "--devices", "2", "--strategy", "ddp",
                                             "--shuffle", "--json"}, {},
                  "dptwin split: error: --batch 100000000: must be in 0..16777216 (split lists every index)\n"},
        LimitCase{"SplitBillionBatch", {"split", "--batch", "1000000000", "--devices", "2"}, {},
                  "dptwin split: error: --batch 1000000000: must be in 0..16777216 (split lists every index)\n"},
        LimitCase{"SplitTwoBillionDevices", {"split", "--batch", "8", "--devices", "2000000000"}, {},
                  "dptwin split: error: --devices 2000000000: must be in 1..65536\n"},
        LimitCase{"SplitNegativeSeed", {"split", "--batch", "8", "--devices", "2", "--strategy", "ddp", "--seed", "-1"},
                  {}, "dptwin split: error: --seed must not be negative, got -1\n"},
        // train: refused before allocating, with the bytes needed and available.
        // 9e12 weights and their gradients, 4 bytes each: 7.2e13 bytes, 65.5 TiB (the rest adds
        // under 0.1 %, past the figures compared).
        LimitCase{"TrainModelTooLarge", {"train", "--model", "mlp:3000000-3000000"}, {},
                  "dptwin train: error: --model mlp:3000000-3000000 with --batch 32 on 1 device(s): parameters, "
                  "gradients, optimizer state, activations and data need 65.5 TiB (7.2",
                  " available\n"},
        // 1e16 weights in one Linear: beyond a tensor's bound (2^32 x 2^32 wrapped to 0 before).
        LimitCase{"TrainModelBeyondATensor", {"train", "--model", "mlp:100000000-100000000"}, {},
                  "dptwin train: error: --model: model spec 'mlp:100000000-100000000': Linear(100000000, 100000000) "
                  "has 1e+16 weights, more than a tensor may hold here (1e+13)\n",
                  ""},
        LimitCase{"TrainInfiniteLr", {"train", "--model", "mlp:4-2", "--lr", "inf"}, {},
                  "dptwin train: error: --lr inf: must be a finite number in 0..1000000\n"},
        LimitCase{"TrainInfiniteMomentum", {"train", "--model", "mlp:4-2", "--momentum", "inf"}, {},
                  "dptwin train: error: --momentum inf: must be a finite number in 0..1 (a momentum above 1 makes the "
                  "buffer grow)\n"},
        LimitCase{"TrainInfiniteWeightDecay", {"train", "--model", "mlp:4-2", "--weight-decay", "inf"}, {},
                  "dptwin train: error: --weight-decay inf: must be a finite number in 0..1000000\n"},
        LimitCase{"TrainNegativeSeed", {"train", "--model", "mlp:4-2", "--seed", "-1"}, {},
                  "dptwin train: error: --seed must not be negative, got -1\n"},
        LimitCase{"TrainTinyBucket", {"train", "--model", "mlp:4-2", "--strategy", "ddp", "--bucket-cap-mb", "1e-30"}, {},
                  "dptwin train: error: --bucket-cap-mb 1e-30: must be a finite number in 9.5367431640625e-07..1048576 "
                  "(a bucket holds at least one byte and at most 1 TiB)\n"},
        LimitCase{"TrainDataParallelOn40000Devices", {"train", "--model", "mlp:4-2", "--strategy", "dp", "--devices",
                                                      "40000"}, {},
                  "dptwin train: error: --devices 40000: must be in 1..1024 (host devices are worker threads)\n"},
        LimitCase{"TrainDdpOn100000Devices", {"train", "--model", "mlp:4-2", "--strategy", "ddp", "--devices",
                                              "100000"}, {},
                  "dptwin train: error: --devices 100000: must be in 1..1024 (host devices are worker threads)\n"},
        // bench on the host: memory and time bounds before any buffer exists.
        LimitCase{"BenchHostCopyBytes64G", {"bench", "--backend", "host", "--copy-bytes", "64G"}, {},
                  "dptwin bench: error: --copy-bytes 64G on 2 host devices: the copies' buffers need 384.00 GiB "
                  "(4.123e+11 bytes), this machine has ",
                  " available\n"},
        LimitCase{"BenchHostMaxBytes64G", {"bench", "--backend", "host", "-e", "64G"}, {},
                  "dptwin bench: error: -e 64G on 2 host devices: every rank's input and output buffers need 256.00 GiB "
                  "(2.749e+11 bytes), this machine has ",
                  " available\n"},
        LimitCase{"BenchHostGemmMillion", {"bench", "--backend", "host", "--gemm-size", "1000000"}, {},
                  "dptwin bench: error: --gemm-size 1000000: must be in 1..65536\n"},
        LimitCase{"BenchHostIntMaxIterations", {"bench", "--backend", "host", "-n", "2147483647"}, {},
                  "dptwin bench: error: -n 2147483647: at most 100000 timed iterations per size\n"},
        LimitCase{"BenchHost100000Devices", {"bench", "--backend", "host", "--devices", "100000"}, {},
                  "dptwin bench: error: --devices 100000: must be in 1..1024 (host devices are worker threads)\n"},
        LimitCase{"BenchHostIgnoresHardware", {"bench", "--backend", "host", "--hardware", "dgx-a100"}, {},
                  "dptwin bench: error: --hardware applies to --backend sim only (--backend host measures this "
                  "machine)\n"},
        LimitCase{"BenchHostIgnoresAlgo", {"bench", "--backend", "host", "--algo", "ring"}, {},
                  "dptwin bench: error: --algo applies to --backend sim only (--backend host measures this machine)\n"},
        LimitCase{"BenchGlooHasNoNcclP2pDisable", {"bench", "--hardware", "host-cpu-gloo", "--nccl-p2p-disable"}, {},
                  "dptwin bench: error: --nccl-p2p-disable: hardware host-cpu-gloo's collectives are gloo's (its gloo "
                  "section), not NCCL's; NCCL_P2P_DISABLE does not apply\n"},
        LimitCase{"BenchHostIgnoresNcclP2pDisable", {"bench", "--backend", "host", "--nccl-p2p-disable"}, {},
                  "dptwin bench: error: --nccl-p2p-disable applies to --backend sim only (--backend host measures "
                  "this machine)\n"},
        LimitCase{"BenchSimIgnoresGemmSize", {"bench", "--hardware", "dgx-a100", "--gemm-size", "64"}, {},
                  "dptwin bench: error: --gemm-size applies to --backend host or cuda (the twin has no "
                  "microbenchmarks)\n"},
        // bench on the twin: these three ran until killed.
        LimitCase{"BenchSimHalfByte", {"bench", "--backend", "sim", "--hardware", kSimBench, "-b", "0.5", "-e", "8"}, {},
                  "dptwin bench: error: -b 0.5: 0.5 bytes is not a whole number of bytes\n"},
        LimitCase{"BenchSimExabytesFactorMillion", {"bench", "--backend", "sim", "--hardware", kSimBench, "-b", "4G",
                                                    "-e", "8000000000G", "-f", "1000000"}, {},
                  "dptwin bench: error: -e 8000000000G: must be at most 1 PiB (1125899906842624 bytes)\n"},
        LimitCase{"BenchSimExabytesOneIteration", {"bench", "--backend", "sim", "--hardware", kSimBench, "-b", "1G",
                                                   "-e", "8589934591G", "-f", "2", "-n", "1", "-w", "0"}, {},
                  "dptwin bench: error: -e 8589934591G: must be at most 1 PiB (1125899906842624 bytes)\n"},
        LimitCase{"BenchSimBeyondGpuMemory", {"bench", "--backend", "sim", "--hardware", kSimBench, "-b", "1G", "-e",
                                              "1024G", "-n", "1", "-w", "0"}, {},
                  "dptwin bench: error: -e 1024G: 1099511627776 B of all_reduce needs 2199023255552 bytes of send and "
                  "receive buffers on a GPU, more than its memory (RTX-A6000-48GB has 51041533952 bytes)\n"},
        LimitCase{"BenchSimTooManyCollectives", {"bench", "--backend", "sim", "--hardware", kSimBench, "-b", "8", "-e",
                                                 "128M", "-n", "100000", "-w", "0"}, {},
                  "dptwin bench: error: -n 100000 -w 0: 25 sizes x 100000 iterations = 2500000 collectives to "
                  "simulate, at most 100000\n"},
        // what-if flags: the YAML file's rules, the YAML file's messages.
        LimitCase{"PredictGpusAndNodes", {"predict", "--hardware", "dgx-a100-cluster", "--model", "resnet50",
                                          "--strategy", "ddp", "--batch-per-device", "32", "--gpus", "64", "--nodes", "2"},
                  {}, "dptwin predict: error: --gpus 64 --nodes 2: give --gpus (total) or --devices and --nodes, not both\n"},
        LimitCase{"PredictGpusAndDevices", {"predict", "--hardware", "dgx-a100-cluster", "--model", "resnet50",
                                            "--strategy", "ddp", "--batch-per-device", "32", "--gpus", "64", "--devices",
                                            "8"},
                  {}, "dptwin predict: error: --gpus 64 --devices 8: give --gpus (total) or --devices and --nodes, not "
                      "both\n"},
        LimitCase{"PredictTinyBucketFlag", {"predict", "s.yaml", "--bucket-cap-mb", "1e-30"}, {{"s.yaml", kGoodScenario}},
                  "dptwin predict: error: --bucket-cap-mb: 1e-30 MiB is outside 9.5367431640625e-07 .. 1048576 MiB "
                  "(1 byte .. 1 TiB)\n"},
        LimitCase{"PredictTinyBucketKey", {"predict", "s.yaml"}, {{"s.yaml", kGoodScenario + "bucket_cap_mb: 1e-30\n"}},
                  "dptwin predict: error: s.yaml:7: bucket_cap_mb: 1e-30 MiB is outside 9.5367431640625e-07 .. 1048576 "
                  "MiB (1 byte .. 1 TiB)\n"},
        LimitCase{"PredictMillionsOfDevicesFlag", {"predict", "s.yaml", "--devices", "2000000"}, {{"s.yaml", kGoodScenario}},
                  "dptwin predict: error: --devices: must be at most 1000000, got 2000000\n"},
        LimitCase{"PredictReportIntoAFile", {"predict", "s.yaml", "--report", "taken"}, {{"s.yaml", kGoodScenario}, {"taken", "x"}},
                  "dptwin predict: error: --report taken: not a directory\n"},
        // sweep: point counts, shard numbers and output paths.
        LimitCase{"SweepOf64TwoValueAxes", {"sweep", "s.yaml"}, {{"s.yaml", sweep_of_64_axes()}},
                  "dptwin sweep: error: s.yaml: sweep: the 64 axes make more than 10000000 points (at most 10000000 per "
                  "sweep)\n"},
        LimitCase{"SweepShardCountWraps", {"sweep", "s.yaml", "--shard", "3/4294967299"},
                  {{"s.yaml", kGoodScenario + "sweep:\n  devices: [1, 2]\n"}},
                  "dptwin sweep: error: --shard 3/4294967299: at most 10000000 shards\n"},
        LimitCase{"SweepModelNameTooLongForAFile", {"sweep", "s.yaml"},
                  {{"s.yaml", kGoodScenario + "sweep:\n  model: [resnet50, " + std::string(300, 'm') + "]\n"}},
                  "dptwin sweep: error: s.yaml:8: sweep.model[1]: unknown model '" + std::string(300, 'm') +
                      "' (library: ",
                  "; or a path to a .yaml file, or mlp:IN-H-...-OUT, transformer:"},
        LimitCase{"SweepTraceDirIsAFile", {"sweep", "s.yaml", "--trace-dir", "taken"},
                  {{"s.yaml", kGoodScenario + "sweep:\n  devices: [1, 2]\n"}, {"taken", "x"}},
                  "dptwin sweep: error: --trace-dir taken: not a directory\n"},
        LimitCase{"SweepOutBelowAFile", {"sweep", "s.yaml", "-o", "taken/r.json"},
                  {{"s.yaml", kGoodScenario + "sweep:\n  devices: [1, 2]\n"}, {"taken", "x"}},
                  "dptwin sweep: error: -o taken/r.json: taken is not a directory\n"},
        LimitCase{"SweepOutIsADirectory", {"sweep", "s.yaml", "-o", "d"},
                  {{"s.yaml", kGoodScenario + "sweep:\n  devices: [1, 2]\n"}, {"d", "<dir>"}},
                  "dptwin sweep: error: -o d: is a directory, expected a file name\n"},
        // merge: counts that wrapped, points given twice.
        LimitCase{"MergeShardCountWraps", {"merge", "a.json"},
                  {{"a.json", shard_json("2", "0", "4294967299", "")}},
                  "dptwin merge: error: sweep result a.json shard: key 'count' 4294967299 is not in 1..10000000\n"},
        LimitCase{"MergePointListedTwice", {"merge", "a.json"},
                  {{"a.json", shard_json("2", "0", "1",
                                         skipped_point(0) + ", " + skipped_point(1) + ", " + skipped_point(1))}},
                  "dptwin merge: error: merge: point 1 is listed twice (in shard 0/1)\n"},
        // verify: a self-test must be able to fail on the backend it runs on.
        LimitCase{"VerifySimRingStep", {"verify", "--backend", "sim", "--hardware", "dgx-a100", "--inject-bug",
                                        "ring-step"}, {},
                  "dptwin verify: error: --inject-bug ring-step: the bug is planted in the host backend's ring "
                  "all-reduce; --backend sim runs other collectives, so the self-test would prove nothing (use "
                  "--backend host, or drop-chunk or skip-divide)\n"},
        LimitCase{"VerifyBugWithPerformanceOnly", {"verify", "--inject-bug", "drop-chunk", "--only", "performance"}, {},
                  "dptwin verify: error: --inject-bug drop-chunk --only performance: the bug is planted in the "
                  "collectives the correctness properties run; the performance checks never see it, so the self-test "
                  "would pass and prove nothing (drop --only, or use --only correctness)\n"},
        LimitCase{"VerifySimOn40000Devices", {"verify", "--backend", "sim", "--hardware", "dgx-a100", "--devices",
                                              "40000"}, {},
                  "dptwin verify: error: --devices 40000: hardware 'dgx-a100' has 8 GPUs\n"},
        LimitCase{"VerifyHostOn40000Devices", {"verify", "--devices", "40000"}, {},
                  "dptwin verify: error: --devices 40000: must be in 1..1024 (host devices are worker threads)\n"},
        LimitCase{"VerifyNegativeSeed", {"verify", "--seed", "-1"}, {},
                  "dptwin verify: error: --seed -1: must not be negative\n"},
        // Input files that are FIFOs: opening one for reading waited for a writer forever.
        LimitCase{"TrainInitIsAFifo", {"train", "--model", "mlp:4-4-2", "--steps", "1", "--init", "f"},
                  {{"f", "<fifo>"}}, "dptwin train: error: ", "f: is a FIFO, socket or device, not a regular file"},
        LimitCase{"TrainDataIsAFifo", {"train", "--model", "mlp:4-4-2", "--steps", "1", "--data", "f"},
                  {{"f", "<fifo>"}}, "dptwin train: error: ", "f: is a FIFO, socket or device, not a regular file"},
        LimitCase{"PredictScenarioIsAFifo", {"predict", "f"}, {{"f", "<fifo>"}}, "dptwin predict: error: ",
                  "f: is a FIFO, socket or device, not a regular file"},
        LimitCase{"PredictHardwareIsAFifo", {"predict", "--hardware", "./f", "--model", "mlp:8-8-8", "--strategy",
                                             "ddp", "--devices", "2", "--batch", "4"},
                  {{"f", "<fifo>"}}, "dptwin predict: error: ", "f: is a FIFO, socket or device, not a regular file"},
        LimitCase{"SweepScenarioIsAFifo", {"sweep", "f"}, {{"f", "<fifo>"}}, "dptwin sweep: error: ",
                  "f: is a FIFO, socket or device, not a regular file"},
        LimitCase{"ReportInputIsAFifo", {"report", "f"}, {{"f", "<fifo>"}}, "dptwin report: error: ",
                  "f: is a FIFO, socket or device, not a regular file"},
        LimitCase{"MergeShardIsAFifo", {"merge", "f"}, {{"f", "<fifo>"}}, "dptwin merge: error: ",
                  "f: is a FIFO, socket or device, not a regular file"},
        // A hardware path that is a symbolic-link loop, or a name too long for the file system:
        // std::filesystem's internal error text with exit 3 before.
        LimitCase{"PlanHardwareIsALinkLoop", {"plan", "--model", "resnet50", "--target-samples-per-s", "1000",
                                              "--hardware", "./loop.yaml:2.40"},
                  {{"loop.yaml", "<loop>"}},
                  "dptwin plan: error: hardware file './loop.yaml' cannot be read: Too many levels of symbolic links\n"},
        LimitCase{"VerifyHardwareIsALinkLoop", {"verify", "--backend", "sim", "--hardware", "./loop.yaml"},
                  {{"loop.yaml", "<loop>"}},
                  "dptwin verify: error: hardware file './loop.yaml' cannot be read: Too many levels of symbolic "
                  "links\n"},
        LimitCase{"VerifyHardwareNameTooLong", {"verify", "--backend", "sim", "--hardware",
                                                "./" + std::string(300, 'n') + ".yaml"}, {},
                  "dptwin verify: error: hardware file './" + std::string(300, 'n') +
                      ".yaml' cannot be read: File name too long\n"},
        // Names that were refused without the flag they came from, and a report folder that is
        // a link loop (exit 3, as if the run had failed).
        LimitCase{"TrainUnknownCommHook", {"train", "--model", "mlp:4-4-2", "--strategy", "ddp", "--devices", "2",
                                           "--comm-hook", "1e"}, {},
                  "dptwin train: error: --comm-hook: unknown comm hook '1e' (choices: none, fp16_compress, "
                  "bf16_compress, powersgd, powersgd:R (R in 1..1024))\n"},
        LimitCase{"PlanUnknownDtype", {"plan", "--model", "resnet50", "--target-samples-per-s", "1000",
                                       "--hardware", "dgx-a100:2.40", "--dtype", "x"}, {},
                  "dptwin plan: error: --dtype: unknown dtype 'x' (expected f32, f64, i64, i32, bf16 or f16)\n"},
        LimitCase{"LessonOnlyUnknownClaim", {"lesson", "--only", "nope"}, {},
                  "dptwin lesson: error: --only nope: no claim file ", "nope.yaml (the names are the file stems"},
        LimitCase{"PredictReportIsALinkLoop", {"predict", "--hardware", "desktop-2gpu-pcie-p2p", "--model",
                                               "mlp:8-8-8", "--strategy", "ddp", "--devices", "2", "--batch", "4",
                                               "--report", "loop"},
                  {{"loop", "<loop>"}}, "dptwin predict: error: --report loop: a symbolic-link loop\n"},
        // An output name past NAME_MAX (255 bytes) failed at the write, after the run, with exit 3.
        LimitCase{"MergeOutNameTooLong", {"merge", "a.json", "-o", std::string(300, 'n') + ".json"},
                  {{"a.json", shard_json("2", "0", "1", skipped_point(0) + ", " + skipped_point(1))}},
                  "dptwin merge: error: -o " + std::string(300, 'n') +
                      ".json: the file name is too long for the file system\n"},
        // Output paths that failed only at the write, after the run, with exit 3 (the hostile
        // sweep's KNOWN_OPEN list): now refused before the run, naming the flag.
        LimitCase{"TrainCheckpointNameTooLong", {"train", "--model", "mlp:4-4-2", "--steps", "1", "--checkpoint",
                                                 std::string(300, 'n') + ".safetensors"}, {},
                  "dptwin train: error: --checkpoint " + std::string(300, 'n') +
                      ".safetensors: the file name is too long for the file system\n"},
        LimitCase{"TrainCheckpointBelowAFile", {"train", "--model", "mlp:4-4-2", "--steps", "1", "--checkpoint",
                                                "plain/c.safetensors"},
                  {{"plain", "x\n"}}, "dptwin train: error: --checkpoint plain/c.safetensors: plain is not a directory\n"},
        LimitCase{"VerifyJunitBelowAFile", {"verify", "--backend", "host", "--devices", "1", "--cases", "1", "--junit",
                                            "plain/v.xml"},
                  {{"plain", "x\n"}}, "dptwin verify: error: --junit plain/v.xml: plain is not a directory\n"},
        LimitCase{"VerifyJunitNameTooLong", {"verify", "--backend", "host", "--devices", "1", "--cases", "1", "--junit",
                                             std::string(300, 'n') + ".xml"}, {},
                  "dptwin verify: error: --junit " + std::string(300, 'n') +
                      ".xml: the file name is too long for the file system\n"},
        LimitCase{"CalibrateOutNameTooLong", {"calibrate", "--from", "a.log", "--hardware", "dgx-a100", "--out",
                                              std::string(300, 'n') + ".yaml"},
                  {{"a.log", "# nothing\n"}},
                  "dptwin calibrate: error: --out " + std::string(300, 'n') +
                      ".yaml: the file name is too long for the file system\n"},
        // One log given twice was read as two measurements (an outside-user review).
        LimitCase{"CalibrateTheSameLogTwice", {"calibrate", "--from", "a.log", "./a.log", "--hardware", "dgx-a100"},
                  {{"a.log", "# nothing\n"}},
                  "dptwin calibrate: error: --from ./a.log: the same file as --from a.log; give each measurement "
                  "once\n"},
        LimitCase{"SweepTraceDirIsALinkLoop", {"sweep", "s.yaml", "--trace-dir", "loop"},
                  {{"s.yaml", kGoodScenario + "sweep:\n  devices: [1, 2]\n"}, {"loop", "<loop>"}},
                  "dptwin sweep: error: --trace-dir loop: a symbolic-link loop\n"},
        // plan --currency took any text, "-1" included.
        LimitCase{"PlanCurrencyNotACode", {"plan", "--model", "resnet50", "--target-samples-per-s", "1000",
                                           "--hardware", "dgx-a100:2.40", "--currency", "-1"}, {},
                  "dptwin plan: error: --currency '-1': expected a currency code of 1 to 8 letters such as USD or "
                  "EUR\n"},
        // plan: an unknown strategy names the flag it came from.
        LimitCase{"PlanUnknownStrategy", {"plan", "--model", "resnet50", "--target-samples-per-s", "1000",
                                          "--hardware", "dgx-a100:2.40", "--strategies", "-1"}, {},
                  "dptwin plan: error: --strategies: unknown strategy '-1': expected single, dp or ddp\n"},
        // plan flags hold the plan file's bounds, named by flag (an outside-user review: 100,000
        // GPUs ran 10 minutes without a word; inf was named at a generated file's line; a
        // 1e308 price printed inf; a second price for one hardware replaced the first).
        LimitCase{"PlanMaxGpusBeyondThePlanFilesBound", {"plan", "--model", "resnet50", "--target-samples-per-s", "1000",
                                                         "--hardware", "dgx-a100:2.40", "--max-gpus", "100000"}, {},
                  "dptwin plan: error: --max-gpus 100000: must be in 1 .. 65536 (the plan file's bound)\n"},
        LimitCase{"PlanInfiniteTarget", {"plan", "--model", "resnet50", "--target-samples-per-s", "inf",
                                         "--hardware", "dgx-a100:2.40"}, {},
                  "dptwin plan: error: --target-samples-per-s inf: must be in 0.000277778 .. 1e+12\n"},
        LimitCase{"PlanPriceBeyondItsBound", {"plan", "--model", "resnet50", "--target-samples-per-s", "1000",
                                              "--hardware", "dgx-a100:1e308"}, {},
                  "dptwin plan: error: --hardware dgx-a100:1e308: price 1e308 per GPU-hour is above 1e6\n"},
        LimitCase{"PlanHardwareGivenTwice", {"plan", "--model", "resnet50", "--target-samples-per-s", "1000",
                                             "--hardware", "dgx-a100:2", "--hardware", "dgx-a100:3"}, {},
                  "dptwin plan: error: --hardware dgx-a100:3: 'dgx-a100' is already a candidate (--hardware "
                  "dgx-a100:2); give each hardware once\n"},
        LimitCase{"PlanStrategyGivenTwice", {"plan", "--model", "resnet50", "--target-samples-per-s", "1000",
                                             "--hardware", "dgx-a100:2", "--strategies", "ddp", "ddp"}, {},
                  "dptwin plan: error: --strategies: 'ddp' given twice; give each strategy once\n"},
        LimitCase{"PlanTrainSamplesBeyondItsBound", {"plan", "--model", "resnet50", "--target-samples-per-s", "1000",
                                                     "--hardware", "dgx-a100:2", "--train-samples", "1e300"}, {},
                  "dptwin plan: error: --train-samples 1e+300: must be in 1 .. 1e15\n"}),
    [](const ::testing::TestParamInfo<LimitCase>& case_info) { return std::string(case_info.param.name); });

// The twin's bench writes --out as the host bench does (it wrote nothing and exited 0).
TEST(CliLimitsBench, SimWritesOut) {
  const fs::path dir = case_dir("SimWritesOut");
  const CliResult r = run_dptwin({"bench", "--hardware", "dgx-a100", "-b", "8", "-e", "64", "-n", "1", "-w", "0",
                                   "--out", "b.json"},
                                  dir, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(dir / "b.json"));
  const auto j = nlohmann::json::parse(slurp(dir / "b.json"));
  // 8, 16, 32, 64 bytes: four rows, each with its size.
  ASSERT_EQ(j.at("rows").size(), 4u);
  EXPECT_EQ(j.at("rows").at(3).at("size").get<long long>(), 64);
  EXPECT_EQ(j.at("hardware").get<std::string>(), "dgx-a100");
}

// A shard of a sweep of 1,000,000 points expands and checks only its own points:
// it finishes in seconds (checking every point took over 120 s).
TEST(CliLimitsSweep, OnePointShardOfAMillionPointsIsQuick) {
  const fs::path dir = case_dir("MillionPointShard");
  std::string s = kGoodScenario + "sweep:\n";
  for (const char* axis : {"batch_per_device", "bucket_cap_mb", "overrides.host.dispatch_cost"}) {
    s += fmt::format("  {}: [", axis);
    for (int v = 1; v <= 100; ++v)
      s += std::string(v == 1 ? "" : ", ") + (std::string(axis).rfind("overrides", 0) == 0 ? fmt::format("{} us", v)
                                                                                            : std::to_string(v));
    s += "]\n";
  }
  std::ofstream(dir / "s.yaml") << s;
  const auto start = std::chrono::steady_clock::now();
  const CliResult r = run_dptwin({"sweep", "s.yaml", "--shard", "0/1000000", "-o", "r.json", "--json"}, dir, 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(dir / "r.json"));
  EXPECT_EQ(j.at("total_points").get<long long>(), 1000000);
  EXPECT_EQ(j.at("points").size(), 1u);
  EXPECT_LT(seconds, 30.0);
}

// A report directory has one writer: while another process holds its lock, a
// second command refuses before running (two sweeps left a mixed report).
TEST(CliLimitsReport, SecondWriterOfAReportDirectoryIsRefused) {
  const fs::path dir = case_dir("ReportLock");
  std::ofstream(dir / "s.yaml") << kGoodScenario;
  fs::create_directories(dir / "rep");
  const int fd = ::open((dir / "rep").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const CliResult held = run_dptwin({"predict", "s.yaml", "--report", "rep"}, dir, 60);
  EXPECT_EQ(held.exit_code, 2);
  EXPECT_EQ(held.err, "dptwin predict: error: --report rep: another dptwin is writing a report into this directory (it "
                      "holds the directory's lock); wait for it or choose another directory\n");
  EXPECT_FALSE(fs::exists(dir / "rep" / "report.html"));
  ::close(fd);  // released: the same command now writes the report
  const CliResult free = run_dptwin({"predict", "s.yaml", "--report", "rep"}, dir, 60);
  EXPECT_EQ(free.exit_code, 0) << free.err;
  EXPECT_TRUE(fs::exists(dir / "rep" / "report.html"));
}

// A report replaces its directory whole: a directory holding anything but a previous
// report is refused before the run, and keeps its files (`--report` into a project
// folder deleted it; found by an outside-user review). A previous report is replaced, and
// the lock leaves no file behind, in place (`--report .`) or not.
TEST(CliLimitsReport, ADirectoryOfOtherFilesIsRefusedAndKept) {
  const fs::path dir = case_dir("ReportForeign");
  std::ofstream(dir / "s.yaml") << kGoodScenario;
  fs::create_directories(dir / "mine" / "deep");
  std::ofstream(dir / "mine" / "important.txt") << "keep\n";
  std::ofstream(dir / "mine" / "deep" / "y.txt") << "x\n";
  // sweep, report and plan replace the folder whole: refused.
  for (const std::vector<std::string>& args : {std::vector<std::string>{"sweep", "s.yaml", "--report", "mine"},
                                               std::vector<std::string>{"report", "s.yaml", "--report", "mine"}}) {
    const CliResult r = run_dptwin(args, dir, 60);
    EXPECT_EQ(r.exit_code, 2) << args[0] << "\n" << r.out;
    EXPECT_NE(r.err.find("--report mine: the directory holds files that are not a dptwin report (deep/, important.txt)"),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(fs::exists(dir / "mine" / "important.txt"));
    EXPECT_TRUE(fs::exists(dir / "mine" / "deep" / "y.txt"));
  }
  // predict writes its files in place and keeps the rest.
  const CliResult in_place = run_dptwin({"predict", "s.yaml", "--report", "mine"}, dir, 60);
  EXPECT_EQ(in_place.exit_code, 0) << in_place.err;
  EXPECT_TRUE(fs::exists(dir / "mine" / "report.html"));
  EXPECT_TRUE(fs::exists(dir / "mine" / "important.txt"));
  // A previous report is replaced; no lock file stays in it.
  ASSERT_EQ(run_dptwin({"sweep", "s.yaml", "--report", "rep"}, dir, 60).exit_code, 0);
  const CliResult again = run_dptwin({"sweep", "s.yaml", "--report", "rep"}, dir, 60);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_FALSE(fs::exists(dir / "rep" / ".dptwin-report.lock"));
  const CliResult here = run_dptwin({"predict", "../s.yaml", "--report", "."}, dir / "rep", 60);
  EXPECT_EQ(here.exit_code, 0) << here.err;
  EXPECT_FALSE(fs::exists(dir / "rep" / ".dptwin-report.lock"));
}

}  // namespace
}  // namespace dpt::test
