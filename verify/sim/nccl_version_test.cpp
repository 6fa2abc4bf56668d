// The NCCL release as an input of the collective model: the hardware's nccl_version picks
// the tuner constants of that release (master by default, or the v2.18.5-1 tag's).
//
// Hand derivation for 8x A100 on NVSwitch (dgx-a100: 12 NVLinks per GPU at NCCL's
// SM80_NVLINK_BW 20 GB/s = 240 GB/s per GPU). The ring search keeps 6 channels of 40 GB/s
// and ncclTopoDupChannels makes them 12 of 20 GB/s: ring bus bandwidth 12 x 20 = 240 GB/s.
// Ring LL on one Ampere node: master min(llMaxBw 87.7, 240 x 0.5) = 87.7 GB/s;
// 2.18.5 min(87.7, 240 / 4) = 60 GB/s. All-reduce algorithm bandwidth = bus x 8 / 14.
// Ring LL latency (both): baseLat 6.6 + 14 steps x NVLink hwLat 0.6 = 15.0 us.
// 1 MiB = 1,048,576 bytes:
//   master: 15.0 + 1,048,576 / (1000 x 87.7 x 8/14) = 15.0 + 20.924 = 35.924 us
//   2.18.5: 15.0 + 1,048,576 / (1000 x 60 x 8/14)   = 15.0 + 30.583 = 45.583 us  (x 1.2689)
// Ring LL stays the tuner's choice under both: ring LL128 40.6 + 1,048,576 / (1000 x 220.8
// x 8/14) = 48.9 us; tree LL128 31.5 + 1,048,576 / (1000 x 171.7 x 0.5 x 0.6) = 51.9 us.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/collectives/nccl_model.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_process.hpp"
#include "verify/support/collective_fixture.hpp"

using namespace dpt;
using namespace dpt::sim;

namespace {

using test::kHardwareLibrary;

HardwareSpec with_version(const std::string& name, const std::string& version) {
  HardwareSpec hw = load_hardware(name, kHardwareLibrary);
  hw.nccl_version = version;
  return hw;
}

const std::vector<NcclAlgo> kSingleNodeAlgos{NcclAlgo::ring, NcclAlgo::tree};
constexpr Bytes kOneMiB = 1048576;

// Simulated time of one 1 MiB all-reduce on every GPU of `hw`.
double simulated_all_reduce_s(const HardwareSpec& hw, Bytes bytes) {
  std::shared_ptr<CollectiveGroup> group;
  CollectiveCall call;
  call.op = CollectiveOp::all_reduce;
  call.element_bytes = 4;
  call.count = static_cast<Elements>(bytes / 4);
  const std::vector<int> gpus = test::first_gpus(hw.gpu_count());
  const std::string out = run_simulation(
      hw, [&](Platform& p) { group = test::start_collective(p, gpus, call, {}); },
      [&](Platform&) {
        const auto& rec = group->records().at(0);
        return std::to_string(rec.end_s - rec.start_s);
      });
  return std::stod(out);
}

}  // namespace

// Invariant: the default is master's constants; 2.18.5's ring LL takes a quarter of the bus
// bandwidth, so the A100 1 MiB all-reduce the tuner plans takes the hand-derived 45.583 us
// instead of 35.924 us (header comment), with ring LL chosen under both.
TEST(NcclVersion, A100OneMiBRingLLTakesTheHandDerivedTime) {
  const auto master = nccl_graph(load_hardware("dgx-a100", kHardwareLibrary), 8, 1, true);
  const NcclChoice m = nccl_choose(master, CollectiveOp::all_reduce, kSingleNodeAlgos, kOneMiB);
  EXPECT_EQ(m.algo, NcclAlgo::ring);
  EXPECT_EQ(m.protocol, NcclProtocol::ll);
  EXPECT_NEAR(m.time_us, 35.924, 0.005);

  const auto old = nccl_graph(with_version("dgx-a100", "2.18.5"), 8, 1, true);
  const NcclChoice o = nccl_choose(old, CollectiveOp::all_reduce, kSingleNodeAlgos, kOneMiB);
  EXPECT_EQ(o.algo, NcclAlgo::ring);
  EXPECT_EQ(o.protocol, NcclProtocol::ll);
  EXPECT_NEAR(o.time_us, 45.583, 0.005);
  EXPECT_NEAR(o.cost.bus_bw_gbs, 60.0, 1e-6);
}

// Invariant: the simulated 1 MiB all-reduce slows by about the tuner's ratio, 45.583 /
// 35.924 = 1.269 (the flows carry the chosen protocol's per-channel bandwidth); within 5 %,
// the share of the simulated time that is not the tuner's alpha-beta term.
TEST(NcclVersion, SimulatedA100OneMiBSlowsByTheHandDerivedRatio) {
  const double master_s = simulated_all_reduce_s(load_hardware("dgx-a100", kHardwareLibrary), kOneMiB);
  const double old_s = simulated_all_reduce_s(with_version("dgx-a100", "2.18.5"), kOneMiB);
  EXPECT_NEAR(old_s / master_s, 1.269, 1.269 * 0.05) << master_s << " s -> " << old_s << " s";
}

// Invariant: Hopper's one-node llMaxBw is 141 GB/s on master and 87.7 in 2.18.5; dgx-h100's
// ring graph is 12 channels of 30 GB/s = 360 GB/s, so ring LL's bus bandwidth is
// min(141, 180) = 141 on master and min(87.7, 90) = 87.7 in 2.18.5. NVLS latency: master
// 0 + NVLink hwLat 25 us; 2.18.5 baseLat 23 + 0 us.
TEST(NcclVersion, HopperLlCapAndNvlsLatencyFollowTheRelease) {
  const auto master = nccl_graph(load_hardware("dgx-h100", kHardwareLibrary), 8, 1, true);
  const auto old = nccl_graph(with_version("dgx-h100", "2.18.5"), 8, 1, true);
  EXPECT_NEAR(nccl_cost(master, CollectiveOp::all_reduce, NcclAlgo::ring, NcclProtocol::ll).bus_bw_gbs, 141.0, 1e-6);
  EXPECT_NEAR(nccl_cost(old, CollectiveOp::all_reduce, NcclAlgo::ring, NcclProtocol::ll).bus_bw_gbs, 87.7, 1e-6);
  EXPECT_NEAR(nccl_cost(master, CollectiveOp::all_reduce, NcclAlgo::nvls, NcclProtocol::simple).latency_us, 25.0, 1e-6);
  EXPECT_NEAR(nccl_cost(old, CollectiveOp::all_reduce, NcclAlgo::nvls, NcclProtocol::simple).latency_us, 23.0, 1e-6);
}

// Planted bug: the model ignores nccl_version; 2.18.5 then plans master's 35.924 us, which
// the first test above would reject.
TEST(NcclVersion, PlantedBugVersionIgnoredIsCaught) {
  ScopedFault f(Fault::nccl_version_ignored);
  const auto old = nccl_graph(with_version("dgx-a100", "2.18.5"), 8, 1, true);
  const NcclChoice o = nccl_choose(old, CollectiveOp::all_reduce, kSingleNodeAlgos, kOneMiB);
  EXPECT_NEAR(o.time_us, 35.924, 0.005);
  EXPECT_GT(std::abs(o.time_us - 45.583), 1.0);
}

// Invariant: an unknown version is an error naming the key, the line and the known versions.
TEST(NcclVersion, UnknownVersionNamesKeyLineAndKnownVersions) {
  // dgx-a100's own file with one line more at its end.
  std::ifstream in(kHardwareLibrary / "dgx-a100.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (!text.empty() && text.back() != '\n') text += '\n';
  const auto line = std::count(text.begin(), text.end(), '\n') + 1;
  text += "nccl_version: \"2.19.3\"\n";
  try {
    (void)parse_hardware_yaml(text, "hw.yaml");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("hw.yaml:" + std::to_string(line)), std::string::npos) << msg;
    EXPECT_NE(msg.find("nccl_version"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2.19.3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("master, 2.18.5"), std::string::npos) << msg;
  }
  EXPECT_THROW((void)parse_nccl_tuner("2.19.3"), std::invalid_argument);
}
