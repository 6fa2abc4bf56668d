// dptwin verify end to end:
//  - on the host backend it passes, and its JUnit XML validates against
//    verify/data/junit.xsd and lists every check the JSON report lists;
//  - a planted correctness bug (DataParallel dropping a chunk, DDP skipping the
//    division by world size, the ring skipping a step) makes the matching property
//    fail with a shrunk counterexample and its seed;
//  - in the twin, a degraded peer link, a slowed GPU and a straggling rank each make
//    verify fail naming that link or device, and the nominal twin passes;
//  - degraded hardware files are validated; --calibrate-out writes a loadable file.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/host/host_backend.hpp"
#include "scenarios/measure/calibrate.hpp"
#include "scenarios/measure/faults.hpp"
#include "scenarios/verify/verify_performance.hpp"
#include "scenarios/verify/verify_properties.hpp"
#include "scenarios/verify/verify_report.hpp"
#include "scenarios/verify/verify_twin.hpp"
#include "verify/support/test_files.hpp"
#include "verify/support/shell_run.hpp"

namespace dpt::test {
using namespace dpt::verify;
namespace {

namespace fs = std::filesystem;

const fs::path kSource = DPT_SOURCE_DIR;
using dpt::test::kHardwareLibrary;

fs::path scratch() {
  const fs::path d = fs::path(DPT_BINARY_DIR) / "verify_cmd_test";
  fs::create_directories(d);
  return d;
}

using CliRun = ShellResult;

CliRun dptwin(const std::string& args) { return run_dptwin_shell(args); }

const CheckResult* find(const std::vector<CheckResult>& rs, const std::string& name) {
  for (const auto& r : rs)
    if (r.name == name) return &r;
  return nullptr;
}

// ---- the host backend, through the command line -----------------------------------

TEST(VerifyCommand, HostPassesAndItsJunitValidatesAndListsEveryCheck) {
  const fs::path junit = scratch() / "host.xml";
  fs::remove(junit);
  const CliRun r = dptwin("verify --backend host --devices 2 --cases 25 --seed 7 --json --junit " + junit.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto json = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(json.at("passed"), true);
  const auto& checks = json.at("checks");
  // Every correctness property and the training-step figures are there.
  std::set<std::string> names;
  for (const auto& c : checks) names.insert(c.at("name").get<std::string>());
  for (const char* expected :
       {"correctness.split.torch_chunk", "correctness.split.distributed_sampler", "correctness.collectives.exact",
        "correctness.dp.gradient_equivalence", "correctness.ddp.gradient_equivalence",
        "correctness.checkpoint.module_prefix", "performance.measure", "performance.all_reduce.busbw.4MiB",
        "performance.step.single.gpu0", "performance.step.dp", "performance.step.ddp"})
    EXPECT_TRUE(names.count(expected)) << expected << "\n" << r.out;

  const std::string xsd = (kSource / "verify" / "data" / "junit.xsd").string();
  const int valid = std::system(("xmllint --noout --schema '" + xsd + "' '" + junit.string() + "' 2>/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(valid), 0) << slurp(junit);
  const std::string xml = slurp(junit);
  size_t testcases = 0;
  for (size_t at = xml.find("<testcase "); at != std::string::npos; at = xml.find("<testcase ", at + 1)) ++testcases;
  EXPECT_EQ(testcases, checks.size());
  for (const auto& name : names)
    EXPECT_NE(xml.find("<testcase name=\"" + xml_escape(name) + "\""), std::string::npos) << name;
}

TEST(VerifyCommand, PlantedBugFailsWithACounterexampleAndExitCode1) {
  const CliRun r = dptwin("verify --backend host --devices 3 --only correctness --cases 60 --seed 5 "
                       "--inject-bug drop-chunk");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL  correctness.dp.gradient_equivalence"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("counterexample (shrunk)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--seed 5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS  correctness.ddp.gradient_equivalence"), std::string::npos) << r.out;
}

TEST(VerifyCommand, BadFlagsAreUsageErrors) {
  EXPECT_EQ(dptwin("verify --backend sim").exit_code, 2);                        // no --hardware
  EXPECT_EQ(dptwin("verify --backend host --as-measured x.yaml").exit_code, 2);  // sim only
  EXPECT_EQ(dptwin("verify --inject-bug nonsense").exit_code, 2);
}

// ---- planted correctness bugs, in process -----------------------------------------

CheckResult run_one(Backend& backend, PlantedBug bug, const std::string& name, int devices, int cases,
                    std::uint64_t seed) {
  CorrectnessOptions o;
  o.devices = devices;
  o.cases = cases;
  o.seed = seed;
  o.bug = bug;
  o.reproduce = "verify_cmd_test";
  o.scratch_dir = scratch().string();
  std::vector<Check> selected;
  for (auto& c : correctness_checks(backend, o))
    if (c.name == name) selected.push_back(c);
  const auto results = run_checks(selected);
  EXPECT_EQ(results.size(), 1u);
  return results.at(0);
}

TEST(VerifyCorrectness, SkippedDivisionFailsTheDdpPropertyWithACounterexample) {
  HostBackend backend(3);
  const CheckResult r = run_one(backend, PlantedBug::skip_divide, "correctness.ddp.gradient_equivalence", 3, 60, 9);
  ASSERT_EQ(r.status, CheckStatus::failed) << r.message;
  EXPECT_NE(r.message.find("counterexample (shrunk)"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("devices"), std::string::npos) << r.message;  // the case, printed
  EXPECT_NE(r.message.find("seed 9"), std::string::npos) << r.message;
  // The same property without the bug holds with the same seed.
  EXPECT_EQ(run_one(backend, PlantedBug::none, "correctness.ddp.gradient_equivalence", 3, 60, 9).status,
            CheckStatus::passed);
}

TEST(VerifyCorrectness, ABrokenRingFailsTheCollectivesProperty) {
  HostBackend backend(4);
  const CheckResult r = run_one(backend, PlantedBug::ring_step, "correctness.collectives.exact", 4, 60, 3);
  ASSERT_EQ(r.status, CheckStatus::failed) << r.message;
  EXPECT_NE(r.message.find("the exact sum is"), std::string::npos) << r.message;
  EXPECT_EQ(run_one(backend, PlantedBug::none, "correctness.collectives.exact", 4, 60, 3).status,
            CheckStatus::passed);
}

TEST(VerifyCorrectness, DroppedChunkFailsOnlyTheDataParallelProperty) {
  HostBackend backend(3);
  const CheckResult r = run_one(backend, PlantedBug::drop_chunk, "correctness.dp.gradient_equivalence", 3, 60, 4);
  ASSERT_EQ(r.status, CheckStatus::failed) << r.message;
  EXPECT_NE(r.message.find("DataParallel: gradient of"), std::string::npos) << r.message;
  EXPECT_EQ(run_one(backend, PlantedBug::drop_chunk, "correctness.checkpoint.module_prefix", 3, 10, 4).status,
            CheckStatus::passed);
}

// ---- faults in the twin ---------------------------------------------------------------

// The nominal file's text plus a `faults:` block, written to the scratch directory.
fs::path degraded_file(const std::string& name, const std::string& faults_yaml) {
  const fs::path p = scratch() / (name + ".yaml");
  std::ofstream(p) << slurp(kHardwareLibrary / "dgx1-v100.yaml") << "\nfaults:\n" << faults_yaml;
  return p;
}

std::vector<CheckResult> twin_check(const fs::path& degraded, int devices) {
  const DegradedHardware nominal = load_degraded_hardware("dgx1-v100", kHardwareLibrary);
  const DegradedHardware bad = load_degraded_hardware(degraded.string(), kHardwareLibrary);
  const MeasureConfig config = default_measure_config("sim", devices);
  const Figures measured = simulate_figures(bad.spec, bad.faults, config);
  const Figures predicted = simulate_figures(nominal.spec, Faults{}, config);
  PerformanceContext ctx;
  ctx.backend = "sim";
  return run_checks(performance_checks(measured, predicted, default_tolerances("sim"), ctx));
}

std::string failures(const std::vector<CheckResult>& rs) {
  std::string out;
  for (const auto& r : rs)
    if (r.status != CheckStatus::passed) out += r.name + ": " + r.message + "\n";
  return out;
}

TEST(VerifyTwinFaults, TheNominalTwinPasses) {
  const auto rs = twin_check(kHardwareLibrary / "dgx1-v100.yaml", 4);
  EXPECT_GT(rs.size(), 30u);
  EXPECT_EQ(failures(rs), "");
}

TEST(VerifyTwinFaults, ADegradedPeerLinkIsNamed) {
  const auto rs = twin_check(degraded_file("slow-link", "  - {link: [1, 2], bandwidth_factor: 0.4}\n"), 4);
  const CheckResult* fwd = find(rs, "performance.peer_bandwidth.gpu1->gpu2");
  const CheckResult* back = find(rs, "performance.peer_bandwidth.gpu2->gpu1");
  ASSERT_TRUE(fwd && back) << failures(rs);
  EXPECT_EQ(fwd->status, CheckStatus::failed);
  EXPECT_EQ(back->status, CheckStatus::failed);
  EXPECT_NE(fwd->message.find("peer link gpu1<->gpu2 at 40 % of hardware file"), std::string::npos) << fwd->message;
  // No other pair is blamed, and the devices themselves are healthy.
  for (const auto& r : rs) {
    const bool other_pair = r.name.rfind("performance.peer_bandwidth.", 0) == 0 &&
                            r.name.find("gpu1->gpu2") == std::string::npos &&
                            r.name.find("gpu2->gpu1") == std::string::npos;
    if (other_pair || r.name.rfind("performance.gemm.", 0) == 0 || r.name.rfind("performance.step.single", 0) == 0) {
      EXPECT_EQ(r.status, CheckStatus::passed) << r.name << ": " << r.message;
    }
  }
}

TEST(VerifyTwinFaults, ASlowedGpuIsNamed) {
  const auto rs = twin_check(degraded_file("slow-gpu", "  - {gpu: 3, flops_factor: 0.5}\n"), 4);
  const CheckResult* gemm = find(rs, "performance.gemm.gpu3");
  ASSERT_TRUE(gemm) << failures(rs);
  EXPECT_EQ(gemm->status, CheckStatus::failed);
  EXPECT_NE(gemm->message.find("GEMM rate of gpu3 at 50 %"), std::string::npos) << gemm->message;
  for (const char* other : {"performance.gemm.gpu0", "performance.gemm.gpu1", "performance.gemm.gpu2",
                            "performance.memory_bandwidth.gpu3"})
    EXPECT_EQ(find(rs, other)->status, CheckStatus::passed) << other;
  // Its own step is slow because of its kernels, and DDP names it.
  const CheckResult* ddp = find(rs, "performance.step.ddp");
  ASSERT_TRUE(ddp);
  EXPECT_EQ(ddp->status, CheckStatus::failed);
  EXPECT_NE(ddp->message.find("gpu3 computes at 50 % of the predicted GEMM rate"), std::string::npos) << ddp->message;
}

TEST(VerifyTwinFaults, AStragglingRankIsNamed) {
  const auto rs = twin_check(degraded_file("straggler", "  - {gpu: 2, straggle: 5 ms}\n"), 4);
  const CheckResult* single = find(rs, "performance.step.single.gpu2");
  const CheckResult* ddp = find(rs, "performance.step.ddp");
  ASSERT_TRUE(single && ddp) << failures(rs);
  EXPECT_EQ(single->status, CheckStatus::failed);
  EXPECT_NE(single->message.find("gpu2 straggles"), std::string::npos) << single->message;
  EXPECT_EQ(ddp->status, CheckStatus::failed);
  EXPECT_NE(ddp->message.find("gpu2 straggles"), std::string::npos) << ddp->message;
  EXPECT_EQ(find(rs, "performance.gemm.gpu2")->status, CheckStatus::passed);
  for (const char* other : {"performance.step.single.gpu0", "performance.step.single.gpu1", "performance.step.single.gpu3"})
    EXPECT_EQ(find(rs, other)->status, CheckStatus::passed) << other;
}

TEST(VerifyTwinFaults, TheCommandNamesTheDegradedLink) {
  const fs::path bad = degraded_file("slow-link-cmd", "  - {link: [1, 2], bandwidth_factor: 0.4}\n");
  const CliRun r = dptwin("verify --backend sim --hardware dgx1-v100 --devices 4 --only performance --as-measured " +
                       bad.string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("peer link gpu1<->gpu2 at 40 % of hardware file: check P2P/ACS/NVLink status"),
            std::string::npos)
      << r.out;
}

TEST(VerifyTwinFaults, DegradedFilesAreValidatedWithTheirLine) {
  auto error_of = [](const std::string& faults) {
    try {
      load_degraded_hardware(degraded_file("bad", faults).string(), kHardwareLibrary);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string nominal = slurp(kHardwareLibrary / "dgx1-v100.yaml");
  // The nominal file's lines, the blank line, "faults:", then the entry.
  const int line = static_cast<int>(std::count(nominal.begin(), nominal.end(), '\n')) + 3;
  std::string e = error_of("  - {link: [1, 2], bandwidth_factor: 1.5}\n");
  EXPECT_NE(e.find(":" + std::to_string(line) + ":"), std::string::npos) << e;
  EXPECT_NE(e.find("bandwidth_factor"), std::string::npos) << e;
  e = error_of("  - {gpu: 9, flops_factor: 0.5}\n");
  EXPECT_NE(e.find("GPU 9 is not in this machine"), std::string::npos) << e;
  e = error_of("  - {gpu: 1, flops_factor: 0.5, speed: 2}\n");
  EXPECT_NE(e.find("speed"), std::string::npos) << e;
  e = error_of("  - {gpu: 1, straggle: -2 ms}\n");
  EXPECT_NE(e.find("straggle"), std::string::npos) << e;
  // A pair with no NVLink between them (DGX-1's GPUs 0 and 5) names no link: its route's
  // links are other pairs' too (on a PCIe machine [1, 2] slowed every pair of 1 and 2).
  e = error_of("  - {link: [0, 5], bandwidth_factor: 0.5}\n");
  EXPECT_NE(e.find("GPUs 0 and 5 have no direct link on hardware 'dgx1-v100' (no NVLink pair joins them)"),
            std::string::npos)
      << e;
}

TEST(VerifyCalibrate, MeasuredFiguresBecomeALoadableHardwareFile) {
  const DegradedHardware nominal = load_degraded_hardware("dgx1-v100", kHardwareLibrary);
  const DegradedHardware slow = load_degraded_hardware(
      degraded_file("all-slow", "  - {gpu: 0, flops_factor: 0.5}\n  - {gpu: 1, flops_factor: 0.5}\n").string(),
      kHardwareLibrary);
  MeasureConfig config = default_measure_config("sim", 2);
  const MeasureParts compute{true, false, false, false, false, false};
  const Figures m = simulate_figures(slow.spec, slow.faults, config, compute);
  const Figures p = simulate_figures(nominal.spec, Faults{}, config, compute);
  const CalibrationResult cal = calibrate_from_figures(nominal.spec, m, p, "sim:gpu0", "2026-12-02T15:00:00Z");
  const fs::path out = scratch() / "calibrated.yaml";
  std::ofstream(out) << cal.yaml;
  const sim::HardwareSpec loaded = sim::load_hardware_file(out);
  // Both GPUs at half their rate: the file's GEMM efficiency halves (a GEMM's time
  // is launch latency plus flops / rate, so the ratio is a little above one half).
  EXPECT_NEAR(loaded.efficiency.gemm, nominal.spec.efficiency.gemm * 0.5, 0.02 * nominal.spec.efficiency.gemm);
  EXPECT_NE(cal.yaml.find("gemm: "), std::string::npos);
  EXPECT_NE(cal.yaml.find("# measured 2026-12-02T15:00:00Z on sim:gpu0"), std::string::npos) << cal.yaml;
  EXPECT_EQ(loaded.gpu_count(), nominal.spec.gpu_count());
}

}  // namespace
}  // namespace dpt::test
