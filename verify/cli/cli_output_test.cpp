// Output tests of the what-if commands through the real dptwin executable and
// the real twin: the printed text against expected text with numeric
// placeholders (%float, %duration, %percent, %gib: see text_match.hpp), the
// files they write, and the quick start (`dptwin report` with no argument).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "verify/support/cli_run.hpp"
#include "verify/support/text_match.hpp"
#include "verify/support/test_files.hpp"

namespace dpt::test {
namespace {

namespace fs = std::filesystem;

const std::string kWhatif = std::string(DPT_SOURCE_DIR) + "/scenarios/whatif/";

fs::path output_dir(const std::string& name) { return test::fresh_test_dir(fs::path("cli_output") / name); }

TEST(CliOutput, PredictPrintsTheSummaryAndWritesReportAndTrace) {
  const fs::path dir = output_dir("predict");
  const CliResult r =
      run_dptwin({"predict", kWhatif + "resnet50-dgx-a100-ddp.yaml", "--out", "step.json", "--trace", "trace.json"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string expected =
      "resnet50 on dgx-a100 (A100-SXM4-80GB), DDP on 8 GPUs (1 node), batch 256 (32 per GPU), f32\n"
      "  precision: f32 (PyTorch defaults: convolutions on TF32 on Ampere and later, matmul in f32)\n"
      "  optimizer: sgd_momentum (torch.optim.SGD with momentum: one state tensor per parameter)\n"
      "    kernels: foreach (torch._foreach_* over all parameters: PyTorch's default on CUDA since 2.0)\n"
      "  step time                %duration\n"
      "    compute                %duration\n"
      "    exposed communication  %duration (%duration of it host-to-device copies of the batch, no collective running)\n"
      "    dispatch               %duration\n"
      "    optimizer              %duration\n"
      "    interference           %duration\n"
      "    kernels by op class    conv %duration (%percent), norm %duration (%percent), %any on sim:gpu0\n"
      "  throughput               %float samples/s\n"
      "  scaling efficiency       %percent of 8 x one GPU's throughput (one GPU: %duration per step of 32)\n"
      "  over one GPU's step      %duration: %duration exposed collectives, %duration the rest (DDP's bucket "
      "copies, hooks and their dispatch)\n"
      "  peak memory sim:gpu0     %gib of 80.00 GiB\n"
      "  peak memory sim:gpu1     %gib of 80.00 GiB\n"
      "  peak memory sim:gpu7     %gib of 80.00 GiB\n"
      "  trace                    trace.json\n";
  EXPECT_EQ(match_text(expected, r.out), "");
  const auto report = nlohmann::json::parse(slurp(dir / "step.json"));
  EXPECT_EQ(report.at("schema"), "dptwin.step_report/1");
  EXPECT_EQ(report.at("devices"), 8);
  EXPECT_TRUE(fs::exists(dir / "trace.json"));
  // The trace is Chrome's JSON trace format.
  EXPECT_TRUE(nlohmann::json::parse(slurp(dir / "trace.json")).contains("traceEvents"));
}

TEST(CliOutput, PredictCreatesTheDirectoriesOfItsOutputs) {
  // The README's command, run where out/ does not exist yet: the trace, the step report
  // and the report land in directories made for them.
  const fs::path dir = output_dir("predict_dirs");
  const CliResult r = run_dptwin({"predict", kWhatif + "resnet50-dgx-a100-ddp.yaml", "--report", "out/", "--trace",
                                  "out/trace.json", "--out", "runs/1/step.json"},
                                 dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(slurp(dir / "out" / "trace.json")).contains("traceEvents"));
  EXPECT_EQ(nlohmann::json::parse(slurp(dir / "runs" / "1" / "step.json")).at("schema"), "dptwin.step_report/1");
  EXPECT_TRUE(fs::exists(dir / "out" / "report.html"));
}

TEST(CliOutput, PredictWithResidentInputsSaysSoAndCopiesNothing) {
  const CliResult r = run_dptwin({"predict", "--hardware", "dgx-a100", "--model", "resnet50", "--strategy", "single",
                                  "--devices", "1", "--batch-per-device", "64", "--inputs", "device"},
                                 output_dir("predict_inputs"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string expected =
      "resnet50 on dgx-a100 (A100-SXM4-80GB), single on 1 GPU (1 node), batch 64 (64 per GPU), f32\n"
      "  precision: f32 (PyTorch defaults: convolutions on TF32 on Ampere and later, matmul in f32)\n"
      "  optimizer: sgd (torch.optim.SGD, momentum 0: no optimizer state)\n"
      "    kernels: foreach (torch._foreach_* over all parameters: PyTorch's default on CUDA since 2.0)\n"
      "  inputs: on the GPUs (the batch stays there across steps: no host-to-device copy per step)\n"
      "  step time                %duration\n"
      "    compute                %duration\n"
      "    exposed communication  0 s\n";
  // The summary's head: the rest is the usual breakdown, throughput and memory.
  const std::vector<std::string> lines = split_lines(r.out);
  ASSERT_GE(lines.size(), 8u) << r.out;
  std::string head;
  for (size_t i = 0; i < 8; ++i) head += lines[i] + "\n";
  EXPECT_EQ(match_text(expected, head), "");
}

TEST(CliOutput, PredictJsonIsTheStepReport) {
  const CliResult r = run_dptwin({"predict", "--hardware", "l40s-4x-pcie4", "--model", "resnet50", "--strategy", "dp",
                                  "--devices", "4", "--batch", "128", "--json"},
                                 output_dir("predict_json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("strategy"), "dp");
  EXPECT_EQ(j.at("batch_global"), 128);
  EXPECT_EQ(j.at("batch_per_device"), 32);
  // DataParallel's GPU 0 holds more than the others (gathered outputs, reduced gradients).
  const auto& d = j.at("devices_detail");
  ASSERT_EQ(d.size(), 4u);
  EXPECT_GT(d[0].at("peak_memory_bytes").get<long long>(), d[1].at("peak_memory_bytes").get<long long>());
}

TEST(CliOutput, SweepShardsMergeAndReport) {
  const fs::path dir = output_dir("sweep");
  const std::string scenario = kWhatif + "pcie-p2p.yaml";
  for (const char* shard : {"0/2", "1/2"}) {
    const std::string out = std::string("shard-") + shard[0] + ".json";
    const CliResult r = run_dptwin({"sweep", scenario, "--shard", shard, "-o", out, "--jobs", "2"}, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Not a terminal: no progress bar on stderr.
    EXPECT_EQ(r.err, "");
  }
  const CliResult m = run_dptwin({"merge", "shard-0.json", "shard-1.json", "-o", "all.json"}, dir);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const std::string expected =
      "#  hardware               strategy      GPUs  pcie.peer_to_peer  batch  step time  samples/s  efficiency  status\n"
      "0  desktop-2gpu-pcie-p2p  DataParallel     2  true               64/32  %duration  %float  %percent  ok\n"
      "1  desktop-2gpu-pcie-p2p  DataParallel     2  false              64/32  %duration  %float  %percent  ok\n"
      "2  desktop-2gpu-pcie-p2p  DDP              2  true               64/32  %duration  %float  %percent  ok\n"
      "3  desktop-2gpu-pcie-p2p  DDP              2  false              64/32  %duration  %float  %percent  ok\n"
      "\n"
      "%any\n"
      "merged 2 shards into all.json\n";
  EXPECT_EQ(match_text(expected, m.out), "");
  const CliResult rep = run_dptwin({"report", "all.json", "--report", "rep"}, dir);
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_TRUE(fs::exists(dir / "rep" / "report.html"));
  EXPECT_TRUE(fs::exists(dir / "rep" / "points.csv"));
  // The merged file never replaces a shard (exit 2, the shard byte for byte as it was).
  const std::string shard0 = test::slurp(dir / "shard-0.json");
  const CliResult over = run_dptwin({"merge", "shard-0.json", "shard-1.json", "-o", "shard-0.json"}, dir);
  EXPECT_EQ(over.exit_code, 2) << over.err;
  EXPECT_NE(over.err.find("-o shard-0.json: is one of the shards it merges"), std::string::npos) << over.err;
  EXPECT_EQ(test::slurp(dir / "shard-0.json"), shard0);
}

TEST(CliOutput, QuickStartWritesTheDefaultReport) {
  // The README's first command: no argument, the embedded default scenario, the
  // report into ./dptwin-report/.
  const fs::path dir = output_dir("quickstart");
  const CliResult r = run_dptwin({"report"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string expected =
      "How do DataParallel and DDP scale ResNet-50 from 1 to 8 GPUs on a PCIe server without NVLink and on a DGX "
      "A100?\n"
      "%int" "x %any with %any reach %float samples/s at %percent scaling efficiency in f32 (PyTorch defaults: "
      "convolutions on TF32 on Ampere and later, matmul in f32); DataParallel reaches %percent of "
      "DDP's throughput on %int" "x %any.\n"
      "report: dptwin-report/report.html (and report.md, points.csv)\n";
  EXPECT_EQ(match_text(expected, r.out), "");
  for (const char* f : {"report.html", "report.md", "points.csv", "results.json", "charts/throughput.svg",
                        "charts/efficiency.svg", "charts/breakdown.svg", "charts/memory.svg"})
    EXPECT_TRUE(fs::exists(dir / "dptwin-report" / f)) << f;
  // One trace per predicted point: 16 points less the PCIe server's two 8-GPU ones.
  size_t traces = 0;
  for (const auto& e : fs::directory_iterator(dir / "dptwin-report" / "traces")) traces += e.is_regular_file();
  EXPECT_EQ(traces, 14u);
}

TEST(CliOutput, PlanNamesTheWinnerAndWhyTheOthersLost) {
  const CliResult r = run_dptwin({"plan", "--model", "resnet50", "--target-samples-per-s", "3000", "--hardware",
                                  "l40s-4x-pcie4:1.10", "--hardware", "dgx-a100:2.40", "--max-gpus", "8", "--json"},
                                 output_dir("plan"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j.at("winner").is_null());
  const auto& winner = j.at("verdicts").at(j.at("winner").get<size_t>());
  EXPECT_EQ(winner.at("verdict"), "winner");
  EXPECT_GE(winner.at("throughput_samples_per_s").get<double>(), 3000.0);
  // Every other configuration says why it lost; each verdict is one of the named kinds.
  const std::set<std::string> kinds = {"winner", "alternative", "more_expensive", "too_slow",
                                        "communication_bound", "out_of_memory", "infeasible", "failed"};
  for (const auto& v : j.at("verdicts")) {
    EXPECT_TRUE(kinds.count(v.at("verdict").get<std::string>())) << v.dump();
    EXPECT_FALSE(v.at("reason").get<std::string>().empty()) << v.dump();
    // Nothing cheaper than the winner meets the target.
    if (v.at("verdict") == "more_expensive") {
      EXPECT_GE(v.at("price_per_hour").get<double>(), winner.at("price_per_hour").get<double>());
    }
  }
  EXPECT_EQ(j.at("answer").get<std::string>().rfind("The cheapest configuration that meets 3,000 samples/s is ", 0), 0u);
}

TEST(CliOutput, ReportWithOtherHardwareAsksAboutIt) {
  // The default scenario's question names a PCIe server and a DGX A100; with --hardware
  // dgx-h100 the report asks about what it ran.
  const CliResult r = run_dptwin({"report", "--hardware", "dgx-h100", "-o", "rep", "--json"}, output_dir("report_h100"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("question"), "How do DataParallel and DDP scale resnet50 from 1 to 8 GPUs on dgx-h100?");
}

TEST(CliOutput, PlanOverrideAndTokenTarget) {
  // 1 GiB GPUs cannot hold ResNet-50's training state: no configuration is predicted, exit 1.
  const CliResult small = run_dptwin({"plan", "--model", "resnet50", "--target-samples-per-s", "3000", "--hardware",
                                      "dgx-a100:2.40", "--max-gpus", "2", "--override", "gpu.memory=1 GiB", "--json"},
                                     output_dir("plan_override"));
  ASSERT_EQ(small.exit_code, 1) << small.err;
  const auto small_json = nlohmann::json::parse(small.out);  // kept alive: the loop iterates inside it
  for (const auto& v : small_json.at("verdicts")) EXPECT_EQ(v.at("verdict"), "out_of_memory") << v.dump();
  // 2,048,000 tokens/s of GPT-2's 1,024-token sequences is 2,000 samples/s.
  const CliResult tokens = run_dptwin({"plan", "--model", "gpt2-124m", "--target-tokens-per-s", "2048000", "--hardware",
                                       "dgx-h100-cluster:4.50", "--strategies", "ddp", "--max-gpus", "8", "--json"},
                                      output_dir("plan_tokens"));
  ASSERT_NE(tokens.exit_code, 2) << tokens.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(tokens.out).at("target_samples_per_s").get<double>(), 2000.0);
}

TEST(CliOutput, CompareLaysTwoScenariosSideBySide) {
  const CliResult r = run_dptwin(
      {"compare", kWhatif + "resnet50-dgx-a100-dp.yaml", kWhatif + "resnet50-dgx-a100-ddp.yaml"}, output_dir("compare"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string expected =
      "                       resnet50-dgx-a100-dp  resnet50-dgx-a100-ddp\n"
      "source                 predicted             predicted\n"
      "hardware               dgx-a100              dgx-a100\n"
      "model                  resnet50              resnet50\n"
      "precision              f32                   f32\n"
      "optimizer type  sgd_momentum  sgd_momentum\n"
      "memory format  contiguous  contiguous\n"
      "inputs  copied from the host  copied from the host\n"
      "strategy               DataParallel          DDP\n"
      "GPUs                   8  8\n"
      "batch (global/per GPU)  256/32  256/32\n"
      "accumulation  none  none\n"
      "comm hook  none  none\n"
      "activation checkpointing  none  none\n"
      "hardware overrides  none  none\n"
      "step time  %duration  %duration\n"
      "  vs first  %float %\n"
      "compute  %duration  %duration\n"
      "exposed communication  %duration  %duration\n"
      "  of it host copies  %duration  %duration\n"  // the batch's x.to(device), both strategies
      "dispatch  %duration  %duration\n"
      "interference  0 s  %duration\n"  // DataParallel reduces after backward: nothing overlaps
      "%any\n"
      "samples/s  %float  %float\n"
      "  vs first  %float %\n"
      "scaling efficiency  %percent  %percent\n"
      "GPU 0 peak memory  %gib  %gib\n"
      "out of memory  no  no\n";
  EXPECT_EQ(match_text(expected, r.out), "");
}

}  // namespace
}  // namespace dpt::test

namespace dpt::test {
namespace {

void put(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// Invariant: an output never replaces an input or another output, however its path is
// spelled (the same name, ./, a link, a folder that does not exist yet followed by ..):
// exit 2 naming both files, the input byte for byte as it was. Shown to fail before the
// check: predict s.yaml -o s.yaml exited 0 with the scenario replaced by its step report.
// Found by an outside-user review.
TEST(CliOutput, OutputsNeverReplaceInputsOrEachOther) {
  const fs::path dir = output_dir("shared_files");
  const std::string scenario = "schema_version: 1\nhardware: dgx-h100\nmodel: gpt2-124m\nstrategy: ddp\n"
                               "devices: 2\nbatch_per_device: 1\n";
  put(dir / "s.yaml", scenario);
  fs::create_symlink("s.yaml", dir / "link.yaml");
  fs::copy_file(fs::path(DPT_SOURCE_DIR) / "scenarios/hardware/dgx-h100.yaml", dir / "hw.yaml");
  put(dir / "d.safetensors", "not read: the flags are refused first");
  fs::create_directories(dir / "rep");
  fs::copy_file(dir / "hw.yaml", dir / "rep" / "scenario.yaml");
  fs::create_directories(dir / "whole");
  put(dir / "whole" / "s.yaml", scenario);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"predict", "s.yaml", "-o", "s.yaml"}, "--out s.yaml: is the scenario file it reads"},
      {{"predict", "s.yaml", "-o", "./s.yaml"}, "is the scenario file it reads"},
      {{"predict", "s.yaml", "--trace", "link.yaml"}, "--trace link.yaml: is the scenario file it reads"},
      {{"predict", "s.yaml", "-o", "new/../s.yaml"}, "--out new/../s.yaml: is the scenario file it reads"},
      {{"predict", "s.yaml", "--hardware", "hw.yaml", "-o", "hw.yaml"}, "is the hardware file it reads"},
      {{"predict", "s.yaml", "-o", "x.json", "--trace", "x.json"}, "--out x.json: is also --trace (x.json)"},
      {{"sweep", "s.yaml", "-o", "s.yaml"}, "-o s.yaml: is the scenario file it reads"},
      {{"verify", "--backend", "host", "--junit", "v.out", "--calibrate-out", "v.out"},
       "--junit v.out: is also --calibrate-out"},
      {{"train", "--model", "mlp:4-8-1", "--data", "d.safetensors", "--checkpoint", "d.safetensors"},
       "--checkpoint d.safetensors: is the --data it reads"},
      {{"verify", "--backend", "sim", "--hardware", "hw.yaml", "--junit", "hw.yaml"},
       "--junit hw.yaml: is the --hardware file it reads"},
      // A report folder: predict writes its own files in place (and keeps the rest), so a
      // file at one of those names clashes; sweep replaces the folder whole, so anything in it.
      {{"predict", "s.yaml", "--hardware", "rep/scenario.yaml", "--report", "rep"},
       "--report rep: holds the hardware file it reads (./rep/scenario.yaml), where the report writes that file"},
      {{"predict", "s.yaml", "--report", "rep", "-o", "rep/results.json"},
       "--out rep/results.json: is inside --report rep, where the report writes that file"},
      {{"sweep", "whole/s.yaml", "--report", "whole"}, "--report whole: holds the scenario file it reads"},
  };
  for (const auto& [args, message] : cases) {
    const CliResult r = run_dptwin(args, dir);
    EXPECT_EQ(r.exit_code, 2) << args[1] << " " << args.back() << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  EXPECT_EQ(slurp(dir / "s.yaml"), scenario);
  EXPECT_EQ(slurp(dir / "whole" / "s.yaml"), scenario);
  EXPECT_EQ(slurp(dir / "rep" / "scenario.yaml"), slurp(dir / "hw.yaml"));
  EXPECT_FALSE(fs::exists(dir / "new"));
  EXPECT_FALSE(fs::exists(dir / "x.json"));
  // Separate files are fine.
  const CliResult ok = run_dptwin({"predict", "s.yaml", "-o", "x.json", "--trace", "t.json"}, dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// Paths in flags are the working directory's, whatever folder the scenario file is in:
// `predict sub/s.yaml --hardware hw.yaml` reads ./hw.yaml, not sub/hw.yaml (which took it
// before). Found by an outside-user review.
TEST(CliOutput, FlagPathsAreRelativeToTheWorkingDirectory) {
  const fs::path dir = output_dir("flag_paths");
  fs::create_directories(dir / "sub");
  put(dir / "sub" / "s.yaml", "schema_version: 1\nhardware: dgx-h100\nmodel: gpt2-124m\nstrategy: ddp\n"
                              "devices: 2\nbatch_per_device: 1\n");
  fs::copy_file(fs::path(DPT_SOURCE_DIR) / "scenarios/hardware/dgx-a100.yaml", dir / "hw.yaml");
  const CliResult r = run_dptwin({"predict", "sub/s.yaml", "--hardware", "hw.yaml"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("A100-SXM4-80GB"), std::string::npos) << r.out;
  const CliResult model = run_dptwin({"predict", "sub/s.yaml", "--model",
                                      "hf:" + (fs::path(DPT_SOURCE_DIR) / "scenarios/models/hf/gpt2/config.json").string() +
                                          ":seq=128"},
                                     dir);
  EXPECT_EQ(model.exit_code, 0) << model.err;
  fs::create_directories(dir / "hf");
  fs::copy_file(fs::path(DPT_SOURCE_DIR) / "scenarios/models/hf/gpt2/config.json", dir / "hf" / "config.json");
  const CliResult relative = run_dptwin({"predict", "sub/s.yaml", "--model", "hf:hf/config.json:seq=128"}, dir);
  EXPECT_EQ(relative.exit_code, 0) << relative.err;
  EXPECT_NE(relative.out.find("config.json:seq=128"), std::string::npos) << relative.out;
}

}  // namespace
}  // namespace dpt::test
