// Rail-aligned rings across nodes (NCCL's NET transport with several NICs per node).
//
// NCCL's search gives a multi-node ring one channel per NIC and rotates each channel so that
// it leaves and enters every node through a different GPU and so a different NIC (its rail).
// Property (2 DGX H100 nodes, 16 ranks, ring all-reduce of 1 GiB, k = 1, 2, 4, 8 NICs per
// node, each NIC on the PCIe switch of its GPUs):
//  - bound: bus bandwidth never exceeds k x the NIC's line rate (x efficiency.nic): every
//    channel crosses out of a node once, and the node has k NICs to cross through;
//  - growth: while k NICs stay below the node's NVLink bandwidth per GPU (18 x 20.6 GB/s as
//    NCCL counts it, 370.8 GB/s; 8 x 50 GB/s is the first k above it), doubling k at least
//    1.6x the bus bandwidth, and never lowers it.
// The planted fault net-rails-one-nic sends every channel through the same GPU and NIC:
// the bus bandwidth then stays at one NIC's and the growth fails.
//
// GPUDirect RDMA off (network.gpu_direct_rdma: false; same 2 nodes, 8 NICs): NCCL's NET
// transport stages through host memory, so each byte sent crosses its GPU's PCIe switch
// uplink going up (GPU to host) and its NIC's going down (host to NIC), each byte received
// the reverse. Property: never faster than with GPUDirect, and the bus bandwidth is at most
// 4 switches x the uplink rate / 2 (each direction of an uplink carries the node's traffic
// out and in), well below the 8 NICs' rate. Planted fault net-gdr-ignored (the NIC still
// reaches GPU memory through the switch) breaks the bound.
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_process.hpp"
#include "verify/support/test_files.hpp"

namespace fs = std::filesystem;
namespace sg4 = simgrid::s4u;
using namespace dpt;
using namespace dpt::sim;

namespace {

using dpt::test::kHardwareLibrary;

// dgx-h100-cluster on 2 nodes with k compute NICs per node: NIC j sits on PCIe switch
// j x 4 / k (the file's 4 switches of 2 GPUs), so with k < 8 some GPUs share a rail.
HardwareSpec with_nics(int k) {
  HardwareSpec hw = with_nodes(load_hardware("dgx-h100-cluster", kHardwareLibrary), 2);
  hw.network->nics_per_node = k;
  for (auto& sw : hw.pcie.switches) sw.nics.clear();
  for (int j = 0; j < k; ++j) hw.pcie.switches[static_cast<size_t>(j * 4 / k)].nics.push_back(j);
  return hw;
}

// Bus bandwidth (GB/s, nccl-tests' 2(n-1)/n factor) of one ring all-reduce on 16 ranks.
double ring_busbw_gbs(const HardwareSpec& hw, Bytes bytes) {
  std::vector<int> gpus(16);
  for (int i = 0; i < 16; ++i) gpus[i] = i;
  CollectiveSettings s;
  s.algorithm = CollectiveAlgorithm::ring;
  s.formulation = Formulation::exact;
  const CollectiveCall call{CollectiveOp::all_reduce, bytes / 4, 4, 0};
  std::shared_ptr<CollectiveGroup> group;
  const std::string out = run_simulation(
      hw,
      [&](Platform& p) {
        group = std::make_shared<CollectiveGroup>(p, gpus, s);
        for (int r = 0; r < 16; ++r)
          sg4::Actor::create(fmt::format("rank{}", r), p.gpu_host(gpus[r]), [group, r, call]() { group->run(r, call); });
      },
      [&](Platform&) {
        const auto& rec = group->records().at(0);
        return fmt::format("{:.17g}", rec.end_s - rec.start_s);
      });
  const double t = std::stod(out);
  return static_cast<double>(bytes) / t * (2.0 * 15 / 16) / 1e9;
}

// Checks the property above; returns the failures (empty when it holds).
std::vector<std::string> rails_property_failures() {
  std::vector<std::string> failures;
  std::map<int, double> busbw;
  for (int k : {1, 2, 4, 8}) {
    const HardwareSpec hw = with_nics(k);
    busbw[k] = ring_busbw_gbs(hw, Bytes{1} << 30);
    const double bound = k * hw.network->nic_bandwidth * hw.efficiency.nic / 1e9;
    if (busbw[k] > bound * 1.001)
      failures.push_back(fmt::format("{} NICs: bus bandwidth {:.1f} GB/s above {} x the NIC rate, {:.1f}", k,
                                     busbw[k], k, bound));
  }
  for (int k : {2, 4}) {
    if (busbw[k] < 1.6 * busbw[k / 2])
      failures.push_back(fmt::format("{} NICs: {:.1f} GB/s, not 1.6x the {:.1f} GB/s of {} NICs", k, busbw[k],
                                     busbw[k / 2], k / 2));
  }
  if (busbw[8] < busbw[4])
    failures.push_back(fmt::format("8 NICs: {:.1f} GB/s, below the {:.1f} GB/s of 4", busbw[8], busbw[4]));
  return failures;
}

// Checks the GPUDirect property above; returns the failures.
std::vector<std::string> gdr_property_failures() {
  std::vector<std::string> failures;
  const HardwareSpec on = with_nics(8);
  HardwareSpec off = on;
  off.network->gpu_direct_rdma = false;
  const double bw_on = ring_busbw_gbs(on, Bytes{1} << 30), bw_off = ring_busbw_gbs(off, Bytes{1} << 30);
  if (bw_off > bw_on * 1.001)
    failures.push_back(fmt::format("GPUDirect off {:.1f} GB/s, faster than on {:.1f} GB/s", bw_off, bw_on));
  const auto& sw = off.pcie.switches.at(0);
  const double uplink_gbs = pcie_lane_bandwidth(off.pcie.generation) * sw.uplink_lanes * off.efficiency.pcie / 1e9;
  const double bound = static_cast<double>(off.pcie.switches.size()) * uplink_gbs / 2;
  if (bw_off > bound * 1.001)
    failures.push_back(fmt::format("GPUDirect off {:.1f} GB/s, above the uplinks' bound {:.1f} GB/s", bw_off, bound));
  return failures;
}

// DGX-1 nodes (direct NVLink, no switch; 4 NICs, each on the PCIe switch of 2 GPUs): ring
// all-reduce of 1 GiB on 4 nodes (32 ranks; NCCL's model, so the large-N formulation).
// NCCL's ring graph has 4 channels, one per NIC at 12 GB/s; each enters and leaves a node
// through the GPUs of its NIC's switch and crosses the other GPUs over NVLink. Property: the
// bus bandwidth is 90-100 % of 4 x the NIC's rate (every NIC carries one channel each way,
// and the NVLink hops, 1 or 2 links of 22.5 GB/s, carry the channels without becoming the
// bound). Planted ring-nvlink-paths-unbalanced (the node's ranks in cycle order between
// entry and exit: a hop without NVLink, and single links shared by three channels) and
// net-rails-one-nic each fall below.
std::string dgx1_ring_failure() {
  const HardwareSpec hw = with_nodes(load_hardware("dgx1-v100", kHardwareLibrary), 4);
  std::vector<int> gpus(32);
  for (int i = 0; i < 32; ++i) gpus[static_cast<size_t>(i)] = i;
  CollectiveSettings s;
  s.algorithm = CollectiveAlgorithm::ring;
  s.protocol = NcclProtocol::simple;
  const Bytes bytes = Bytes{1} << 30;
  const CollectiveCall call{CollectiveOp::all_reduce, static_cast<Elements>(bytes / 4), 4, 0};
  std::shared_ptr<CollectiveGroup> group;
  const std::string out = run_simulation(
      hw,
      [&](Platform& p) {
        group = std::make_shared<CollectiveGroup>(p, gpus, s);
        for (int r = 0; r < 32; ++r)
          sg4::Actor::create(fmt::format("rank{}", r), p.gpu_host(gpus[static_cast<size_t>(r)]),
                             [group, r, call]() { group->run(r, call); });
      },
      [&](Platform&) {
        const auto& rec = group->records().at(0);
        return fmt::format("{:.17g}", rec.end_s - rec.start_s);
      });
  const double busbw = static_cast<double>(bytes) / std::stod(out) * (2.0 * 31 / 32) / 1e9;
  const double bound = 4 * hw.network->nic_bandwidth * hw.efficiency.nic / 1e9;
  if (busbw < 0.9 * bound || busbw > bound * 1.001)
    return fmt::format("DGX-1 x 4 nodes: {:.1f} GB/s against 4 NICs' {:.1f} GB/s ({:.0f} %)", busbw, bound,
                       100 * busbw / bound);
  return "";
}

TEST(NcclRails, DirectNvlinkNodesRunEveryNicAtItsRate) { EXPECT_EQ(dgx1_ring_failure(), ""); }

TEST(NcclRails, PlantedBugUnbalancedNvlinkPathsIsCaught) {
  const ScopedFault bug(Fault::ring_nvlink_paths_unbalanced);
  EXPECT_NE(dgx1_ring_failure(), "") << "the planted bug went unnoticed";
}

TEST(NcclRails, PlantedBugOneNicOnDirectNvlinkNodesIsCaught) {
  const ScopedFault bug(Fault::net_rails_one_nic);
  EXPECT_NE(dgx1_ring_failure(), "") << "the planted bug went unnoticed";
}

TEST(NcclRails, BusBandwidthGrowsWithNicsUpToNvlink) {
  const auto failures = rails_property_failures();
  for (const auto& f : failures) ADD_FAILURE() << f;
}

TEST(NcclRails, PlantedBugOneNicForEveryChannelIsCaught) {
  const ScopedFault bug(Fault::net_rails_one_nic);
  EXPECT_FALSE(rails_property_failures().empty()) << "every channel through one NIC went unnoticed";
}

TEST(NcclRails, WithoutGpuDirectRdmaTheSwitchUplinksBound) {
  const auto failures = gdr_property_failures();
  for (const auto& f : failures) ADD_FAILURE() << f;
}

TEST(NcclRails, PlantedBugGpuDirectIgnoredIsCaught) {
  const ScopedFault bug(Fault::net_gdr_ignored);
  EXPECT_FALSE(gdr_property_failures().empty()) << "GPUDirect RDMA off went unnoticed";
}

}  // namespace
