// `dptwin calibrate --from BENCH.json`: efficiency fields from microbenchmark
// figures against a library hardware file's datasheet rates.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "scenarios/measure/calibrate.hpp"
#include "scenarios/measure/calibrate_bench.hpp"
#include "verify/support/test_files.hpp"

using namespace dpt;

namespace {

using dpt::test::slurp;
using dpt::test::kHardwareLibrary;

// A bench of 2 GPUs whose figures are the given fractions of `hw`'s datasheet rates.
DeviceBenchResult bench_at(const sim::HardwareSpec& hw, double gemm, double memory, double pcie, double peer_Bps) {
  DeviceBenchResult b;
  b.backend = "cuda";
  b.date = "2026-12-02T15:00:00Z";
  b.hostname = "node1";
  b.device_names = {"cuda:0", "cuda:1"};
  b.gemm = {{"f32", 0, 4096, 4096, 4096, 1.0, gemm * hw.gpu.peak_flops.f32},
            {"f32", 1, 4096, 4096, 4096, 1.0, 0.9 * gemm * hw.gpu.peak_flops.f32},
            {"f64", 0, 4096, 4096, 4096, 1.0, 0.99 * hw.gpu.peak_flops.f64}};
  const double raw_pcie = sim::pcie_lane_bandwidth(hw.pcie.generation) * hw.pcie.lanes;
  b.bandwidth = {{"memory", 0, 0, 1 << 28, 1.0, memory * hw.gpu.memory_bandwidth},
                 {"memory", 1, 1, 1 << 28, 1.0, 0.5 * memory * hw.gpu.memory_bandwidth},
                 {"h2d", -1, 0, 1 << 28, 1.0, (pcie + 0.02) * raw_pcie},
                 {"d2h", 0, -1, 1 << 28, 1.0, (pcie - 0.02) * raw_pcie},
                 {"peer", 0, 1, 1 << 28, 1.0, peer_Bps},
                 {"peer", 1, 0, 1 << 28, 1.0, peer_Bps}};
  return b;
}

}  // namespace

TEST(CalibrateBench, FieldsAreMeasuredOverDatasheetRates) {
  const auto path = kHardwareLibrary / "dgx-h100.yaml";
  const sim::HardwareSpec hw = sim::load_hardware_file(path);
  ASSERT_TRUE(hw.nvswitch.has_value());
  const double port = hw.nvswitch->links_per_gpu * hw.nvswitch->link_bandwidth;
  const auto r = calibrate_from_bench(hw, slurp(path), bench_at(hw, 0.5, 0.8, 0.7, 0.9 * port), "b.json");
  // Invariant: each field is (best or mean) measured figure / the datasheet rate it scales.
  EXPECT_NEAR(r.spec.efficiency.gemm, 0.5, 1e-12);
  EXPECT_NEAR(r.spec.efficiency.memory_bandwidth, 0.8, 1e-12);
  EXPECT_NEAR(r.spec.efficiency.pcie, 0.7, 1e-12);
  EXPECT_NEAR(r.spec.efficiency.p2p, 0.9, 1e-12);
  EXPECT_EQ(r.spec.efficiency.nic, hw.efficiency.nic);  // not measured by the bench
  // The emitted file loads and carries the calibrated values and their sources.
  const sim::HardwareSpec back = sim::parse_hardware_yaml(r.yaml, "calibrated");
  EXPECT_NEAR(back.efficiency.gemm, 0.5, 1e-4);
  EXPECT_NEAR(back.efficiency.p2p, 0.9, 1e-4);
  EXPECT_EQ(back.gpu.name, hw.gpu.name);
  EXPECT_NE(r.yaml.find("# measured: f32 GEMM 4096^3"), std::string::npos) << r.yaml;
  EXPECT_NE(r.yaml.find("2026-12-02"), std::string::npos);
  EXPECT_EQ(r.yaml.find("\nefficiency:"), r.yaml.rfind("\nefficiency:"));  // one block only (gpu.op_efficiency aside)
}

TEST(CalibrateBench, FasterThanTheDatasheetIsCappedAtOne) {
  const auto path = kHardwareLibrary / "dgx-h100.yaml";
  const sim::HardwareSpec hw = sim::load_hardware_file(path);
  const double port = hw.nvswitch->links_per_gpu * hw.nvswitch->link_bandwidth;
  const auto r = calibrate_from_bench(hw, slurp(path), bench_at(hw, 1.3, 0.8, 0.7, 0.9 * port), "b.json");
  EXPECT_EQ(r.spec.efficiency.gemm, 1.0);
  const auto gemm = std::find_if(r.fields.begin(), r.fields.end(), [](auto& f) { return f.field == "gemm"; });
  ASSERT_NE(gemm, r.fields.end());
  EXPECT_TRUE(gemm->capped);
  // A figure far below the datasheet means the file describes another machine.
  try {
    calibrate_from_bench(hw, slurp(path), bench_at(hw, 0.5, 0.8, 0.7, 1.0), "b.json");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("efficiency.p2p: measured"), std::string::npos) << e.what();
  }
}

TEST(CalibrateBench, NoNvlinkLeavesP2pAndTooManyDevicesIsAnError) {
  const auto path = kHardwareLibrary / "desktop-2gpu-pcie-p2p.yaml";
  const sim::HardwareSpec hw = sim::load_hardware_file(path);
  const auto r = calibrate_from_bench(hw, slurp(path), bench_at(hw, 0.5, 0.8, 0.7, 20e9), "b.json");
  EXPECT_EQ(r.spec.efficiency.p2p, hw.efficiency.p2p);
  auto many = bench_at(hw, 0.5, 0.8, 0.7, 20e9);
  many.device_names = {"cuda:0", "cuda:1", "cuda:2"};
  try {
    calibrate_from_bench(hw, slurp(path), many, "b.json");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("b.json: 3 devices measured"), std::string::npos) << e.what();
  }
  auto empty = bench_at(hw, 0.5, 0.8, 0.7, 20e9);
  empty.gemm.clear();
  empty.bandwidth.clear();
  EXPECT_THROW(calibrate_from_bench(hw, slurp(path), empty, "b.json"), std::invalid_argument);
}

// The one entry point (`dptwin calibrate --from`): a bench JSON file is recognised by its
// content and calibrates exactly as calibrate_from_bench does; a bench file mixed with an
// nccl-tests log, or a second bench file, is refused naming both files.
TEST(CalibrateBench, TheEntryPointTellsBenchJsonFromLogs) {
  const auto path = kHardwareLibrary / "dgx-h100.yaml";
  const sim::HardwareSpec hw = sim::load_hardware_file(path);
  const double port = hw.nvswitch->links_per_gpu * hw.nvswitch->link_bandwidth;
  const DeviceBenchResult bench = bench_at(hw, 0.5, 0.8, 0.7, 0.9 * port);
  const auto dir = std::filesystem::path(DPT_BINARY_DIR) / "calibrate_entry_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string json_path = (dir / "bench.json").string();
  std::ofstream(json_path) << device_bench_to_json(bench).dump(2);
  const std::string log_path = std::string(DPT_SOURCE_DIR) + "/verify/data/nccl-tests/l40s-4gpu-pcie-all_reduce.log";
  ASSERT_TRUE(std::filesystem::exists(log_path)) << log_path;

  const CalibratedHardware r = calibrate_hardware(hw, slurp(path), {{json_path}, std::nullopt, "2026-12-03"});
  const BenchCalibration direct = calibrate_from_bench(hw, slurp(path), bench, json_path);
  EXPECT_EQ(r.yaml, direct.yaml);
  EXPECT_NEAR(r.spec.efficiency.gemm, 0.5, 1e-12);
  ASSERT_EQ(r.changes.size(), direct.fields.size());
  EXPECT_NE(r.changes.front().find("efficiency.gemm"), std::string::npos) << r.changes.front();
  ASSERT_EQ(r.read.size(), 1u);
  EXPECT_NE(r.read.front().find("dptwin bench --backend cuda on node1"), std::string::npos) << r.read.front();

  for (const std::vector<std::string>& files : {std::vector<std::string>{json_path, log_path},
                                                std::vector<std::string>{json_path, json_path}}) {
    try {
      calibrate_hardware(hw, slurp(path), {files, std::nullopt, "2026-12-03"});
      FAIL() << "expected std::invalid_argument for " << files.back();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(json_path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(files.back() == log_path ? std::string("l40s-4gpu-pcie-all_reduce.log")
                                                                     : std::string("second bench file")),
                std::string::npos)
          << e.what();
    }
  }
  // Broken JSON names the file.
  const std::string broken = (dir / "broken.json").string();
  std::ofstream(broken) << "{\"schema\": ";
  try {
    calibrate_hardware(hw, slurp(path), {{broken}, std::nullopt, "2026-12-03"});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json: not valid JSON"), std::string::npos) << e.what();
  }
  // `bench --backend sim --out` writes the twin's own figures: refused as such (it read
  // "algo is not a known key"; found by an outside-user review).
  const std::string sim_json = (dir / "sim.json").string();
  std::ofstream(sim_json) << R"({"backend": "sim", "hardware": "dgx-h100", "ranks": 8, "algo": null, "rows": []})";
  try {
    calibrate_hardware(hw, slurp(path), {{sim_json}, std::nullopt, "2026-12-03"});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sim.json: a bench of --backend sim is the twin's own prediction"),
              std::string::npos)
        << e.what();
  }
}

// A host bench (CPU workers "host:N CPU MODEL") calibrates the host platform's file, whose
// "GPUs" are those workers: the GPU-model check has nothing to compare (it refused the
// README's `bench --backend host --out` then `calibrate --from`: "has host-cpu-1-thread
// GPUs"). A GPU bench of another model is still refused.
TEST(CalibrateBench, AHostBenchCalibratesTheHostPlatform) {
  const auto path = kHardwareLibrary / "host-cpu-gloo.yaml";
  const sim::HardwareSpec hw = sim::load_hardware_file(path);  // host.cpu "AMD EPYC (family 26), ..."
  DeviceBenchResult b = bench_at(hw, 0.5, 0.8, 0.7, 1e9);
  b.backend = "host";
  b.device_names = {"host:0 AMD EPYC 9B14 96-Core Processor", "host:1 AMD EPYC 9B14 96-Core Processor"};
  EXPECT_NO_THROW(calibrate_from_bench(hw, slurp(path), b, "hb.json"));
  // Another vendor's CPU is another machine: refused, naming both CPUs and the way out; the
  // vendor is found anywhere in the name ("13th Gen Intel(R) Core(TM) ...").
  b.device_names = {"host:0 13th Gen Intel(R) Core(TM) i9-13900K", "host:1 13th Gen Intel(R) Core(TM) i9-13900K"};
  EXPECT_THROW(calibrate_from_bench(hw, slurp(path), b, "hb.json"), std::invalid_argument);
  b.device_names = {"host:0 Intel(R) Xeon(R) Processor", "host:1 Intel(R) Xeon(R) Processor"};
  try {
    calibrate_from_bench(hw, slurp(path), b, "hb.json");
    ADD_FAILURE() << "an Intel bench calibrated an AMD host file";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("measured on CPU 'Intel(R) Xeon(R) Processor', but hardware 'host-cpu-gloo' "
                                         "describes host.cpu 'AMD EPYC"),
              std::string::npos)
        << e.what();
  }
  b.device_names = {"NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"};
  const sim::HardwareSpec h100 = sim::load_hardware_file(kHardwareLibrary / "dgx-h100.yaml");
  EXPECT_THROW(calibrate_from_bench(h100, slurp(kHardwareLibrary / "dgx-h100.yaml"), b, "b.json"), std::invalid_argument);
}
