// NCCL's performance model in the twin (sim/collectives/nccl_model.hpp) and the collectives
// it shapes. Each property states its invariant and is shown to fail on a named fault.
//  - Graph: NCCL's search on DGX A100 finds 6 x 40 GB/s rings (240 GB/s of NVLink at
//    SM80's 20 GB/s per link), doubled to 12 x 20; DGX H100 6 x 60 (370.8 GB/s at 20.6),
//    doubled to 12 x 30; NVLS 8 x 40 (values derived by hand from search.cc, not by dptwin).
//  - Latency floor: a small all-reduce never takes less than NCCL's latency term for the
//    pair it runs (fault nccl-no-latency).
//  - Monotonicity: the tuner's time never decreases with size (nccl-tuner-slowest).
//  - Protocols: an LL collective puts twice its data bytes on the links, LL128 128/120
//    (nccl-proto-free).
//  - Channel bound: bus bandwidth never exceeds NCCL's channels x per-channel bandwidth
//    (nccl-no-channel-cap).
//  - Transports: a ring through an Intel root complex pays NCCL's 6/5 PCI overhead
//    (nccl-shm-free); P2P off is never faster than P2P on.
//  - SHM both ways: with P2P off, a ring's bus bandwidth never exceeds the host-staged
//    bidirectional rate (pcie.staged_bidirectional), while a one-way broadcast and P2P
//    rings ignore it (nccl-shm-duplex-free); without the field, 0.41 of the link's raw rate
//    (a published p2pBandwidthLatencyTest figure) binds instead (nccl-shm-duplex-free).
//  - P2P level: NCCL uses P2P over PCIe only within its p2pLevel (a shared switch; through
//    the root complex only on non-Intel x86 in 2.18.5, on 2-GPU AMD systems in master),
//    else SHM (nccl-p2p-through-any-cpu).
//  - Runtime channels: NCCL launches twice its ring graph's channels, each with its share of
//    the bus bandwidth (nccl-channels-not-duplicated); LL's llMaxBw caps the launched
//    channels together, not each runtime channel's share (nccl-ll-ceiling-per-channel).
//  - Tree chunks: NCCL's tree pipelines LL128 in chunks halved for mid sizes (dgx-h100
//    cluster, 4 nodes, 8 channels: 72,000 B at 16 MiB, 576,000 B at 1 GiB, derived by hand
//    from enqueue.cc), never growing as the size shrinks (nccl-tree-chunk-fixed).
//  - NVLS rounds: one node's NVLS pipelines NCCL's rounds (16 channels x 8 heads x a chunk
//    of 16-128 KiB by size, derived by hand from enqueue.cc) through its kernel's three
//    stages, so a mid-size all-reduce pays two rounds beyond its bytes' time
//    (nvls-rounds-ignored).
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
using test::all_reduce_bytes;

struct RunResult {
  Seconds time_s = 0;
  Seconds latency_s = 0;   // NCCL's latency term of the plan
  double link_bytes = 0;   // bytes on every link, summed
  std::string protocol;
  int channels = 0;
};

// One collective on all GPUs of `hw`, simulated in a child process.
RunResult run_one(const HardwareSpec& hw, CollectiveCall call, CollectiveSettings s = {}) {
  std::shared_ptr<CollectiveGroup> group;
  const std::vector<int> gpus = test::first_gpus(hw.gpu_count());
  const std::string out = run_simulation(
      hw, [&](Platform& p) { group = test::start_collective(p, gpus, call, s); },
      [&](Platform& p) {
        const auto& rec = group->records().at(0);
        double bytes = 0;
        for (const auto& u : p.link_usage()) bytes += static_cast<double>(u.bytes);
        nlohmann::json j;
        j["time"] = rec.end_s - rec.start_s;
        j["latency"] = rec.plan.latency_s;
        j["bytes"] = bytes;
        j["protocol"] = nccl_protocol_name(rec.plan.protocol);
        j["channels"] = rec.plan.channels;
        return j.dump();
      });
  const auto j = nlohmann::json::parse(out);
  return {j["time"].get<double>(), j["latency"].get<double>(), j["bytes"].get<double>(),
          j["protocol"].get<std::string>(), j["channels"].get<int>()};
}

double busbw_all_reduce(Bytes bytes, int n, Seconds t) { return bytes / t * 2.0 * (n - 1) / n; }

}  // namespace

TEST(NcclGraph, NvswitchChannelsAndPerChannelBandwidthAreNcclsSearch) {
  const auto a100 = nccl_graph(load_hardware("dgx-a100", kHardwareLibrary), 8, 1, true);
  EXPECT_EQ(a100.compcap, 80);
  EXPECT_EQ(a100.ring_channels, 12);
  EXPECT_DOUBLE_EQ(a100.ring_bw_gbs, 20.0);
  EXPECT_EQ(a100.nvls_channels, 0);  // no NVLS before Hopper
  const auto h100 = nccl_graph(load_hardware("dgx-h100", kHardwareLibrary), 8, 1, true);
  EXPECT_EQ(h100.ring_channels, 12);
  EXPECT_DOUBLE_EQ(h100.ring_bw_gbs, 30.0);
  EXPECT_EQ(h100.nvls_channels, 8);
  EXPECT_DOUBLE_EQ(h100.nvls_bw_gbs, 40.0);
  // NVLS bus bandwidth = 8 x 40 x 0.85 x 7/8 x 2 = 476 GB/s (tuning.cc).
  EXPECT_NEAR(nccl_cost(h100, CollectiveOp::all_reduce, NcclAlgo::nvls, NcclProtocol::simple).bus_bw_gbs, 476.0, 1e-9);
}

// Invariant: a faster NIC never gives NCCL's search a slower cross-node graph: the ring's
// channels x per-channel bandwidth, and the NVLS-tree's across-node bandwidth, never fall
// as nic_bandwidth rises, because a GPU's path to its NIC is bounded by the PCIe link
// between them (NCCL's path bandwidth is its slowest link's). Past that link the graph
// stops changing: 400 and 800 Gb/s NICs behind PCIe Gen4 x16 give the 200 Gb/s graph.
// (With the line rate alone, 50 GB/s NICs on a DGX A100 found 5 x 48 GB/s rings, 10 x 24
// after duplication, through 5 of the 8 NICs: all-reduce busbw 190 -> 122 GB/s.)
namespace {
std::vector<std::string> net_graph_regressions() {
  std::vector<std::string> out;
  for (const char* name : {"dgx-a100-cluster", "dgx-h100-cluster"}) {
    HardwareSpec hw = with_nodes(load_hardware(name, kHardwareLibrary), 2);
    double best = 0;
    for (double gbs : {25.0, 30.0, 50.0, 100.0}) {
      hw.network->nic_bandwidth = gbs * 1e9;
      const Bytes bytes = Bytes{512} << 20;
      const double busbw = busbw_all_reduce(bytes, 16, run_one(hw, all_reduce_bytes(bytes)).time_s);
      if (busbw < best * (1 - 1e-6))
        out.push_back(fmt::format("{} at {} GB/s NICs: busbw {:.1f} GB/s, {:.1f} with slower NICs", name, gbs,
                                  busbw / 1e9, best / 1e9));
      best = std::max(best, busbw);
    }
  }
  return out;
}
}  // namespace

TEST(NcclGraph, AFasterNicNeverGivesASlowerCrossNodeGraph) {
  const auto bad = net_graph_regressions();
  EXPECT_TRUE(bad.empty()) << fmt::format("{}", fmt::join(bad, "\n"));
  HardwareSpec a100 = load_hardware("dgx-a100-cluster", kHardwareLibrary);
  const NcclGraph at200 = nccl_graph(a100, 16, 2, true);
  for (double gbps : {400.0, 800.0}) {
    a100.network->nic_bandwidth = gbps / 8 * 1e9;
    const NcclGraph g = nccl_graph(a100, 16, 2, true);
    EXPECT_EQ(g.ring_channels, at200.ring_channels) << gbps;
    EXPECT_DOUBLE_EQ(g.ring_bw_gbs, at200.ring_bw_gbs) << gbps;
  }
}

TEST(NcclGraph, PlantedBugNicPathAtLineRateIsCaught) {
  ScopedFault fault(Fault::nccl_net_path_line_rate);
  EXPECT_FALSE(net_graph_regressions().empty());
}

namespace {
// The least latency NCCL's model gives any usable (algorithm, protocol) on one node of
// `hw` for an all-reduce (nccl_cost's latency term: base + hardware latency per step).
double least_latency_us(const HardwareSpec& hw) {
  const auto g = nccl_graph(hw, hw.gpu_count(), 1, hw.pcie.peer_to_peer);
  double least = 1e30;
  for (auto a : {NcclAlgo::ring, NcclAlgo::nvls})
    for (auto p : {NcclProtocol::ll, NcclProtocol::ll128, NcclProtocol::simple}) {
      const auto c = nccl_cost(g, CollectiveOp::all_reduce, a, p);
      if (c.alg_bw_gbs > 0) least = std::min(least, c.latency_us);
    }
  return least;
}
// Whether an 8-byte all-reduce on `name` takes at least that least latency.
bool latency_floor_holds(const char* name, std::string& why) {
  const auto hw = load_hardware(name, kHardwareLibrary);
  const RunResult r = run_one(hw, all_reduce_bytes(8));
  const double floor_s = least_latency_us(hw) * 1e-6;
  why = fmt::format("{}: {:.3f} us against NCCL's least latency {:.3f} us", name, r.time_s * 1e6, floor_s * 1e6);
  return r.time_s >= floor_s * (1 - 1e-9) && r.time_s <= 30e-6;
}
}  // namespace

// Invariant: ring LL on one NVLink node costs baseLat 6.6 + 2(N-1) x hwLat 0.6 us; no
// simulated 8-byte all-reduce is faster than the least latency NCCL's model gives any
// usable pair (never the 1 us of a bare switch traversal), nor slower than 30 us.
TEST(NcclLatency, SmallAllReduceNeverBelowNcclsLatencyTerm) {
  const auto g = nccl_graph(load_hardware("dgx-h100", kHardwareLibrary), 8, 1, true);
  EXPECT_NEAR(nccl_cost(g, CollectiveOp::all_reduce, NcclAlgo::ring, NcclProtocol::ll).latency_us, 6.6 + 14 * 0.6, 1e-9);
  for (const char* name : {"dgx-a100", "dgx-h100", "dgx1-v100", "l40s-4x-pcie4", "desktop-2gpu-pcie-p2p"}) {
    std::string why;
    EXPECT_TRUE(latency_floor_holds(name, why)) << why;
  }
}

TEST(NcclLatency, PlantedBugNoLatencyIsCaught) {
  ScopedFault f(Fault::nccl_latency_omitted);
  std::string why;
  EXPECT_FALSE(latency_floor_holds("dgx-h100", why)) << why;
}

namespace {
// Whether the tuner's time is non-decreasing over powers of two from 8 B to 1 GiB.
bool tuner_monotone(const NcclGraph& g, const std::vector<NcclAlgo>& algos, std::string& where) {
  double last = 0;
  for (Bytes b = 8; b <= kGiB; b *= 2) {
    const double t = nccl_choose(g, CollectiveOp::all_reduce, algos, b).time_us;
    if (t < last) {
      where = fmt::format("{} B: {} us after {} us", b, t, last);
      return false;
    }
    last = t;
  }
  return true;
}
}  // namespace

// Invariant: the tuner's chosen time never decreases as the message grows (each pair's
// time grows with size, so their minimum does too), on one node and across nodes.
TEST(NcclTuner, TimeNonDecreasingInSize) {
  for (const char* name : {"dgx-a100", "dgx-h100", "dgx1-v100", "l40s-4x-pcie4"}) {
    const auto g = nccl_graph(load_hardware(name, kHardwareLibrary), 8, 1, true);
    std::vector<NcclAlgo> algos{NcclAlgo::ring};
    if (g.nvls_channels > 0) algos.push_back(NcclAlgo::nvls);
    std::string where;
    EXPECT_TRUE(tuner_monotone(g, algos, where)) << name << ": " << where;
  }
  const auto cluster = load_hardware("dgx-h100-cluster", kHardwareLibrary);
  for (int nodes : {2, 4, 16}) {
    const auto g = nccl_graph(with_nodes(cluster, nodes), 8 * nodes, nodes, true);
    std::string where;
    EXPECT_TRUE(tuner_monotone(g, {NcclAlgo::ring, NcclAlgo::tree}, where)) << nodes << " nodes: " << where;
  }
}

TEST(NcclTuner, PlantedBugSlowestPairBelow64KiBIsCaught) {
  ScopedFault f(Fault::nccl_tuner_slowest_small);
  const auto g = nccl_graph(load_hardware("dgx-h100", kHardwareLibrary), 8, 1, true);
  std::string where;
  EXPECT_FALSE(tuner_monotone(g, {NcclAlgo::ring, NcclAlgo::nvls}, where));
}

// Invariant: the simulated time of a forced protocol grows with size too (8 B .. 64 MiB).
TEST(NcclTuner, SimulatedTimeNonDecreasingInSize) {
  const auto hw = load_hardware("dgx-a100", kHardwareLibrary);
  double last = 0;
  for (Bytes b = 8; b <= 64 * kMiB; b *= 8) {
    const RunResult r = run_one(hw, all_reduce_bytes(b));
    EXPECT_GE(r.time_s, last * (1 - 1e-9)) << b << " B (" << r.protocol << ")";
    last = r.time_s;
  }
}

// Invariant: a forced protocol runs as NCCL_PROTO runs it: LL128 where NCCL's default
// leaves it off (over PCIe: the hardware gate applies only to the default), and a pair
// NCCL cannot run (NVLS with LL) is refused, never swapped for the tuner's own choice.
namespace {
void expect_forced_protocols_as_nccl(bool planted) {
  CollectiveSettings ll128;
  ll128.protocol = NcclProtocol::ll128;
  const auto l40s = load_hardware("l40s-4x-pcie4", kHardwareLibrary);
  const std::string ran = run_one(l40s, all_reduce_bytes(4 * kMiB), ll128).protocol;
  CollectiveSettings nvls_ll;
  nvls_ll.algorithm = CollectiveAlgorithm::nvls;
  nvls_ll.protocol = NcclProtocol::ll;
  bool refused = false;
  try {
    run_one(load_hardware("dgx-h100", kHardwareLibrary), all_reduce_bytes(kMiB), nvls_ll);
  } catch (const std::exception&) {
    refused = true;
  }
  if (planted) {
    EXPECT_TRUE(ran != "LL128" || !refused) << "planted: forced protocols honoured";
  } else {
    EXPECT_EQ(ran, "LL128");
    EXPECT_TRUE(refused) << "NVLS with LL ran";
  }
}
}  // namespace

TEST(NcclProtocols, ForcedProtocolRunsAsNcclProtoOrIsRefused) { expect_forced_protocols_as_nccl(false); }

TEST(NcclProtocols, PlantedBugForcedProtocolSwappedIsCaught) {
  ScopedFault fault(Fault::nccl_forced_protocol_swapped);
  expect_forced_protocols_as_nccl(true);
}

namespace {
double wire_ratio(const HardwareSpec& hw, NcclProtocol p) {
  CollectiveSettings forced, simple;
  forced.protocol = p;
  simple.protocol = NcclProtocol::simple;
  const auto call = all_reduce_bytes(4 * kMiB);
  return run_one(hw, call, forced).link_bytes / run_one(hw, call, simple).link_bytes;
}
}  // namespace

// Invariant: LL sends 8-byte lines of 4 data bytes (twice the data on the links), LL128
// 128-byte lines of 120 data bytes.
TEST(NcclProtocols, WireBytesFollowTheLineFormats) {
  const auto hw = load_hardware("dgx-a100", kHardwareLibrary);
  EXPECT_NEAR(wire_ratio(hw, NcclProtocol::ll), 2.0, 1e-3);
  EXPECT_NEAR(wire_ratio(hw, NcclProtocol::ll128), 128.0 / 120.0, 1e-3);
}

TEST(NcclProtocols, PlantedBugFreeFlagBytesIsCaught) {
  ScopedFault f(Fault::nccl_protocol_overhead_omitted);
  EXPECT_NEAR(wire_ratio(load_hardware("dgx-a100", kHardwareLibrary), NcclProtocol::ll), 1.0, 1e-3);  // not 2
}

// Invariant: a large all-reduce's bus bandwidth never exceeds NCCL's channels x
// per-channel bandwidth (DGX A100: 12 x 20 = 240 GB/s; the links alone would allow
// 12 x 25 GB/s x 0.9 = 270), and reaches at least 95 % of it.
TEST(NcclChannels, BusBandwidthWithinNcclsChannelBandwidth) {
  const auto hw = load_hardware("dgx-a100", kHardwareLibrary);
  const Bytes s = 256 * kMiB;
  const RunResult r = run_one(hw, all_reduce_bytes(s));
  const double busbw = busbw_all_reduce(s, 8, r.time_s);
  EXPECT_LE(busbw, 240e9 * (1 + 1e-6));
  EXPECT_GE(busbw, 0.95 * 240e9);
}

TEST(NcclChannels, PlantedBugUnboundedChannelsIsCaught) {
  ScopedFault f(Fault::nccl_channel_cap_omitted);
  const Bytes s = 256 * kMiB;
  const RunResult r = run_one(load_hardware("dgx-a100", kHardwareLibrary), all_reduce_bytes(s));
  EXPECT_GT(busbw_all_reduce(s, 8, r.time_s), 240e9 * 1.05);
}

namespace {
// The library's 4x L40S PCIe box with a 4-link NVLink bridge between GPUs 0 and 1 only.
HardwareSpec l40s_with_one_bridge() {
  HardwareSpec hw = load_hardware("l40s-4x-pcie4", kHardwareLibrary);
  NvlinkSpec nv;
  nv.generation = 3;
  nv.link_bandwidth = 25e9;
  nv.latency_s = 1e-6;
  nv.pairs = {{0, 1, 4}};
  hw.nvlink = nv;
  validate_hardware(hw);
  return hw;
}
}  // namespace

// Invariant: NCCL searches the graph of the communicator's GPUs. Its rings run over NVLink
// only when each of them has a link to another; GPUs without one are reached over PCIe,
// so a bridge between two of four GPUs leaves the 4-GPU graph as PCIe alone makes it,
// and gives the 2-GPU communicator on the bridged pair an NVLink graph at least as fast.
// A bridge never slows a collective down.
// The first of those that fails, or "" when all hold.
std::string bridge_violation() {
  const HardwareSpec bridged = l40s_with_one_bridge();
  const HardwareSpec plain = load_hardware("l40s-4x-pcie4", kHardwareLibrary);
  const NcclGraph four = nccl_graph(bridged, 4, 1, true), four_plain = nccl_graph(plain, 4, 1, true);
  if (four.intra_nvlink || four.ring_channels != four_plain.ring_channels || four.ring_bw_gbs != four_plain.ring_bw_gbs)
    return fmt::format("4 GPUs: {} x {} GB/s (NVLink {}), PCIe alone {} x {} GB/s", four.ring_channels,
                       four.ring_bw_gbs, four.intra_nvlink, four_plain.ring_channels, four_plain.ring_bw_gbs);
  const NcclGraph pair = nccl_graph(bridged, 2, 1, true, -1, {0, 1});
  const NcclGraph pair_plain = nccl_graph(plain, 2, 1, true, -1, {0, 1});
  if (!pair.intra_nvlink || pair.ring_channels * pair.ring_bw_gbs < pair_plain.ring_channels * pair_plain.ring_bw_gbs)
    return fmt::format("GPUs 0, 1: {} x {} GB/s (NVLink {}), PCIe alone {} x {} GB/s", pair.ring_channels,
                       pair.ring_bw_gbs, pair.intra_nvlink, pair_plain.ring_channels, pair_plain.ring_bw_gbs);
  if (nccl_graph(bridged, 2, 1, true, -1, {2, 3}).intra_nvlink) return "GPUs 2, 3 (no bridge) on NVLink";
  const Bytes s = 64 * kMiB;
  const double with = busbw_all_reduce(s, 4, run_one(bridged, all_reduce_bytes(s)).time_s);
  const double without = busbw_all_reduce(s, 4, run_one(plain, all_reduce_bytes(s)).time_s);
  if (with < 0.99 * without) return fmt::format("64 MiB all-reduce: {} GB/s with the bridge, {} without", with / 1e9, without / 1e9);
  return "";
}

TEST(NcclGraph, AnNvlinkBridgeOnSomeGpusNeverSlowsTheRing) { EXPECT_EQ(bridge_violation(), ""); }

TEST(NcclGraph, PlantedBugNvlinkCountedOutsideTheCommunicatorIsCaught) {
  ScopedFault f(Fault::nccl_nvlink_ring_outside_communicator);
  EXPECT_NE(bridge_violation(), "");
}

// Invariant: with every GPU bridged to one other (pairs 0-1 and 2-3 of four, as PCIe cards
// with NVLink bridges), the NVLink pairs close no ring through all four: NCCL's 4-GPU ring
// crosses PCIe between the pairs, so its graph is the PCIe one (channels, bandwidth, no
// LL128, PCI latencies), while each bridged pair alone rings over its bridge. The planted
// bug (every GPU's having a link taken for an NVLink ring) gave the 4-GPU ring NVLink's
// protocols and latencies over a PCIe bottleneck.
std::string bridged_pairs_violation() {
  HardwareSpec bridged = load_hardware("l40s-4x-pcie4", kHardwareLibrary);
  NvlinkSpec nv;
  nv.generation = 3;
  nv.link_bandwidth = 25e9;
  nv.latency_s = 1e-6;
  nv.pairs = {{0, 1, 4}, {2, 3, 4}};
  bridged.nvlink = nv;
  validate_hardware(bridged);
  const HardwareSpec plain = load_hardware("l40s-4x-pcie4", kHardwareLibrary);
  const NcclGraph four = nccl_graph(bridged, 4, 1, true), four_plain = nccl_graph(plain, 4, 1, true);
  if (four.intra_nvlink || four.ll128 != four_plain.ll128 || four.ring_channels != four_plain.ring_channels ||
      four.ring_bw_gbs != four_plain.ring_bw_gbs)
    return fmt::format("4 GPUs in bridged pairs: {} x {} GB/s (NVLink {}, LL128 {}), PCIe alone {} x {} GB/s (LL128 {})",
                       four.ring_channels, four.ring_bw_gbs, four.intra_nvlink, four.ll128, four_plain.ring_channels,
                       four_plain.ring_bw_gbs, four_plain.ll128);
  for (std::vector<int> pair : {std::vector<int>{0, 1}, std::vector<int>{2, 3}})
    if (!nccl_graph(bridged, 2, 1, true, -1, pair).intra_nvlink)
      return fmt::format("GPUs {}, {} (bridged) not on NVLink", pair[0], pair[1]);
  if (nccl_graph(bridged, 2, 1, true, -1, {1, 2}).intra_nvlink) return "GPUs 1, 2 (no bridge) on NVLink";
  // Four GPUs whose pairs do close a ring (0-1-2-3-0) ring over NVLink.
  HardwareSpec ring = bridged;
  ring.nvlink->pairs = {{0, 1, 2}, {1, 2, 2}, {2, 3, 2}, {3, 0, 2}};
  validate_hardware(ring);
  if (!nccl_graph(ring, 4, 1, true).intra_nvlink) return "a closed NVLink ring 0-1-2-3-0 not on NVLink";
  return "";
}

TEST(NcclGraph, BridgedPairsRingOverPcieBetweenThePairs) { EXPECT_EQ(bridged_pairs_violation(), ""); }

TEST(NcclGraph, PlantedBugBridgedPairsTakenForAnNvlinkRingIsCaught) {
  ScopedFault f(Fault::nvlink_pairs_ring_closed);
  EXPECT_NE(bridged_pairs_violation(), "");
}

namespace {
// Bus bandwidth of a 64 MiB all-reduce on both GPUs of the RTX 4090 desktop (PCIe Gen4
// x8 per GPU, no PCIe switch, Intel CPU), with P2P on or off. Its host-staged rate is set
// to the links' full raw rate (15.75 GB/s), so that only NCCL's PCI accounting binds.
double desktop_busbw(bool p2p) {
  HardwareSpec hw = load_hardware("desktop-2gpu-pcie-nop2p", kHardwareLibrary);
  hw.pcie.peer_to_peer = p2p;
  hw.pcie.staged_bidirectional = 15.75e9;
  validate_hardware(hw);
  const Bytes s = 64 * kMiB;
  return busbw_all_reduce(s, 2, run_one(hw, all_reduce_bytes(s)).time_s);
}
}  // namespace

// Invariant: a ring through an Intel root complex (SHM with P2P off, or P2P without a
// shared PCIe switch) costs NCCL 6/5 of the PCI bandwidth it uses (INTEL_P2P_OVERHEAD):
// Gen4 x8 counts 8 x 120 / 80 = 12 GB/s, so bus bandwidth stays at or below 10 GB/s.
// P2P off is never faster than P2P on.
TEST(NcclTransports, PathThroughAnIntelRootComplexPaysNcclsOverhead) {
  const double off = desktop_busbw(false), on = desktop_busbw(true);
  EXPECT_LE(off, 10e9 * (1 + 1e-6));
  EXPECT_GE(off, 0.9 * 10e9);
  EXPECT_LE(off, on * (1 + 1e-9));
}

TEST(NcclTransports, PlantedBugFreeRootComplexIsCaught) {
  ScopedFault f(Fault::nccl_shm_overhead_omitted);
  EXPECT_GT(desktop_busbw(false), 10e9 * 1.05);
}

namespace {
// The RTX 4090 desktop with P2P on or off and a host-staged bidirectional rate of 3 GB/s
// per direction (a test value, well below the 10 GB/s its Gen4 x8 links give one way).
constexpr double kStagedBothWays = 3e9;
HardwareSpec desktop_staged(bool p2p) {
  HardwareSpec hw = load_hardware("desktop-2gpu-pcie-nop2p", kHardwareLibrary);
  hw.pcie.peer_to_peer = p2p;
  hw.pcie.staged_bidirectional = kStagedBothWays;
  validate_hardware(hw);
  return hw;
}
}  // namespace

// Invariant: over SHM every GPU of a ring writes to and reads from host memory at once,
// so a 64 MiB all-reduce's bus bandwidth is at most the staged bidirectional rate (3 GB/s)
// and, being bandwidth-bound (about 22 ms against NCCL's microseconds of latency), at
// least 90 % of it.
TEST(NcclTransports, ShmRingBoundByStagedBidirectionalRate) {
  const Bytes s = 64 * kMiB;
  const double busbw = busbw_all_reduce(s, 2, run_one(desktop_staged(false), all_reduce_bytes(s)).time_s);
  EXPECT_LE(busbw, kStagedBothWays * (1 + 1e-6));
  EXPECT_GE(busbw, 0.9 * kStagedBothWays);
}

// Invariant: the bidirectional rate binds only staged traffic running both ways. Where
// NCCL runs P2P (the 2-GPU AMD workstation, through its root complex), the field changes
// nothing; a broadcast over SHM (one way: GPU 0 writes, GPU 1 reads) runs faster than
// it, at the links' one-way rate.
TEST(NcclTransports, StagedBidirectionalRateSparesP2pAndOneWayTraffic) {
  const Bytes s = 64 * kMiB;
  const HardwareSpec plain = load_hardware("desktop-2gpu-pcie-p2p", kHardwareLibrary);
  HardwareSpec staged = plain;
  staged.pcie.staged_bidirectional = kStagedBothWays;
  validate_hardware(staged);
  const double with_field = run_one(staged, all_reduce_bytes(s)).time_s;
  EXPECT_NEAR(with_field, run_one(plain, all_reduce_bytes(s)).time_s, 1e-9 * with_field);
  CollectiveCall b = all_reduce_bytes(s);
  b.op = CollectiveOp::broadcast;
  b.root = 0;
  const double broadcast_bytes_per_s = s / run_one(desktop_staged(false), b).time_s;
  EXPECT_GT(broadcast_bytes_per_s, 2 * kStagedBothWays);
}

TEST(NcclTransports, PlantedBugFreeDuplexIsCaught) {
  ScopedFault f(Fault::nccl_shm_duplex_cap_omitted);
  const Bytes s = 64 * kMiB;
  const double busbw = busbw_all_reduce(s, 2, run_one(desktop_staged(false), all_reduce_bytes(s)).time_s);
  EXPECT_GT(busbw, kStagedBothWays * 1.05);
}

namespace {
// The 4x L40S server with P2P off (every hop SHM) and the test's staged rate.
HardwareSpec l40s_shm_staged() {
  HardwareSpec hw = load_hardware("l40s-4x-pcie4", kHardwareLibrary);
  hw.pcie.peer_to_peer = false;
  hw.pcie.staged_bidirectional = kStagedBothWays;
  validate_hardware(hw);
  return hw;
}
// Bus bandwidth of a 64 MiB broadcast (nccl-tests: busbw = algbw) or all_gather (64 MiB
// of output; busbw = algbw x (n-1)/n) on it.
double l40s_shm_busbw(CollectiveOp op) {
  const Bytes s = 64 * kMiB;
  CollectiveCall c = all_reduce_bytes(s);
  c.op = op;
  c.root = 0;
  const double t = run_one(l40s_shm_staged(), c).time_s;
  return op == CollectiveOp::broadcast ? s / t : s / t * 3.0 / 4.0;
}
}  // namespace

// Invariant: in a chain of four ranks over SHM the two middle ranks receive each piece
// from host memory while they send the one before into it, so their links carry staged
// traffic both ways, as a ring's do: a 64 MiB broadcast's bus bandwidth is at most the
// staged bidirectional rate, like all_gather's, and at least 90 % of it. (A two-rank
// broadcast, one way, runs past it: StagedBidirectionalRateSparesP2pAndOneWayTraffic.) The
// chain had run at the one-way rate, 1.8x all_gather's bus bandwidth on the same links.
TEST(NcclTransports, ShmChainOfFourBoundByStagedBidirectionalRate) {
  for (CollectiveOp op : {CollectiveOp::broadcast, CollectiveOp::all_gather}) {
    const double busbw = l40s_shm_busbw(op);
    EXPECT_LE(busbw, kStagedBothWays * (1 + 1e-6)) << collective_op_name(op);
    EXPECT_GE(busbw, 0.9 * kStagedBothWays) << collective_op_name(op);
  }
}

TEST(NcclTransports, PlantedBugFreeDuplexOnAChainIsCaught) {
  ScopedFault f(Fault::nccl_shm_duplex_cap_omitted);
  EXPECT_GT(l40s_shm_busbw(CollectiveOp::broadcast), 1.05 * kStagedBothWays);
}

namespace {
// Bus bandwidth of a 256 MiB all-reduce on the RTX A6000 workstation (PCIe Gen4 x16 per
// GPU, AMD CPU: no Intel overhead), as shipped (P2P on) or with P2P turned off as
// `--override pcie.peer_to_peer=false` turns it off; its file gives no staged figure.
double workstation_busbw(bool p2p) {
  HardwareSpec hw = load_hardware("desktop-2gpu-pcie-p2p", kHardwareLibrary);
  hw.pcie.peer_to_peer = p2p;
  validate_hardware(hw);
  const Bytes s = 256 * kMiB;
  return busbw_all_reduce(s, 2, run_one(hw, all_reduce_bytes(s)).time_s);
}
// 0.41 (p2pBandwidthLatencyTest's "Bidirectional P2P=Disabled" on RTX 4090s at Gen4 x16:
// 12.9 of 31.5 GB/s each way) x 16 lanes x 16 GT/s x 128/130 / 8 bits = 12.92 GB/s.
constexpr double kWorkstationStagedBytesPerS = 0.41 * 16 * 16e9 * 128 / 130 / 8;
}  // namespace

// Invariant: a machine whose file gives no staged rate still stages SHM rings through host
// memory at the published share of its link rate: turning P2P off on the A6000
// workstation takes a 256 MiB all-reduce from the links' one-way rate (P2P through the
// root complex, above 20 GB/s) to at most 12.92 GB/s, and at least 90 % of it (it is
// bandwidth-bound). Before, P2P off changed nothing on this file (issue 14).
TEST(NcclTransports, ShmWithoutAStagedFigureRunsAtThePublishedShareOfTheLink) {
  const double off = workstation_busbw(false), on = workstation_busbw(true);
  EXPECT_LE(off, kWorkstationStagedBytesPerS * (1 + 1e-6));
  EXPECT_GE(off, 0.9 * kWorkstationStagedBytesPerS);
  EXPECT_GT(on, 20e9);
}

TEST(NcclTransports, PlantedBugFreeDuplexWithoutAFigureIsCaught) {
  ScopedFault f(Fault::nccl_shm_duplex_cap_omitted);
  EXPECT_GT(workstation_busbw(false), 1.05 * kWorkstationStagedBytesPerS);
}

namespace {
// A 2-socket PCIe Gen4 x16 server like the L40S file, its `gpus` GPUs all on socket 0: each
// on a root port of its own or (`one_switch`) all behind one PCIe switch; with this CPU and
// NCCL release.
HardwareSpec pcie_server(int gpus, bool one_switch, const std::string& cpu, const std::string& nccl) {
  HardwareSpec hw = load_hardware("l40s-4x-pcie4", kHardwareLibrary);
  hw.gpus_per_node = gpus;
  hw.pcie.switches.clear();
  for (int g = 0; g < gpus; ++g) {
    if (one_switch && g > 0) {
      hw.pcie.switches[0].gpus.push_back(g);
      continue;
    }
    PcieSwitchSpec sw;
    sw.socket = 0;
    sw.gpus = {g};
    hw.pcie.switches.push_back(sw);
  }
  hw.host.cpu = cpu;
  hw.nccl_version = nccl;
  validate_hardware(hw);
  return hw;
}
double server_busbw(const HardwareSpec& hw) {
  const Bytes s = 256 * kMiB;
  return busbw_all_reduce(s, hw.gpus_per_node, run_one(hw, all_reduce_bytes(s)).time_s);
}
// SHM at the published share of a Gen4 x16 link (as kWorkstationStagedBytesPerS), and the
// least a P2P ring must beat it by to count as P2P here.
constexpr double kShmCap = kWorkstationStagedBytesPerS;
constexpr double kP2pAbove = 1.3 * kShmCap;
}  // namespace

// Invariant: NCCL connects GPUs with P2P only within its p2pLevel (paths.cc
// ncclTopoCheckP2p), else with SHM, which runs at most at the staged rate. A shared PCIe
// switch is always P2P. Through the CPU's root complex: in master P2P only on AMD systems
// of at most 2 GPUs; in 2.18.5 on every x86 CPU but Intel's.
TEST(NcclTransports, P2pOnlyWithinNcclsP2pLevel) {
  const std::string intel = "2x Intel Xeon Gold 6448Y", amd = "2x AMD EPYC 9354";
  EXPECT_LE(server_busbw(pcie_server(2, false, intel, "master")), kShmCap * (1 + 1e-6));
  EXPECT_LE(server_busbw(pcie_server(2, false, intel, "2.18.5")), kShmCap * (1 + 1e-6));
  EXPECT_GT(server_busbw(pcie_server(2, true, intel, "master")), kP2pAbove);
  EXPECT_GT(server_busbw(pcie_server(2, false, amd, "master")), kP2pAbove);
  EXPECT_LE(server_busbw(pcie_server(4, false, amd, "master")), kShmCap * (1 + 1e-6));
  EXPECT_GT(server_busbw(pcie_server(4, false, amd, "2.18.5")), kP2pAbove);
  // master counts the communicator's GPUs on the node, not the machine's: 2 of the 4 AMD
  // GPUs run P2P, all 4 SHM.
  EXPECT_TRUE(nccl_p2p_within_node(pcie_server(4, false, amd, "master"), 0, 1, 2));
  EXPECT_FALSE(nccl_p2p_within_node(pcie_server(4, false, amd, "master"), 0, 1, 4));
  // 2.18.5 lowers the level only on Intel, Zhaoxin and ARM: a POWER host runs P2P
  // through its root complex; master does not.
  EXPECT_TRUE(nccl_p2p_within_node(pcie_server(2, false, "2x IBM POWER9", "2.18.5"), 0, 1, 2));
  EXPECT_FALSE(nccl_p2p_within_node(pcie_server(2, false, "2x IBM POWER9", "master"), 0, 1, 2));
  // NVLink: DGX-1's GPUs 0 and 5 have no link of their own and sit on different sockets,
  // but two NVLinks through GPU 1 or 4 join them (PATH_NVB): P2P.
  const HardwareSpec dgx1 = load_hardware("dgx1-v100", kHardwareLibrary);
  ASSERT_EQ(dgx1.nvlink->links_between(0, 5), 0);
  EXPECT_TRUE(nccl_p2p_within_node(dgx1, 0, 5, 8));
  // NVLink bridges on pairs 0-1 and 2-3 of an Intel box: 0-2 crosses PCIe through the CPU.
  HardwareSpec bridged = pcie_server(4, false, intel, "master");
  bridged.nvlink = NvlinkSpec{};
  bridged.nvlink->generation = 3;
  bridged.nvlink->link_bandwidth = 14.0625e9;
  bridged.nvlink->latency_s = 0.7e-6;
  bridged.nvlink->pairs = {{0, 1, 4}, {2, 3, 4}};
  validate_hardware(bridged);
  EXPECT_TRUE(nccl_p2p_within_node(bridged, 0, 1, 4));
  EXPECT_FALSE(nccl_p2p_within_node(bridged, 0, 2, 4));
}

// Invariant: NCCL_P2P_DISABLE=1 (nccl_p2p_disable) puts every pair of a node's GPUs outside
// NCCL's p2pLevel (PATH_LOC), NVSwitch, NVLink and a shared PCIe switch alike, so its rings
// run over SHM: an all-reduce then moves at no more than the machine's host-staged rate
// (staged_bidirectional_rate), where the same machine without the flag runs well above it.
TEST(NcclTransports, P2pDisableSendsEveryPairThroughHostMemory) {
  for (const std::string name : {"dgx-a100", "dgx1-v100"}) {
    HardwareSpec hw = load_hardware(name, kHardwareLibrary);
    const double shm = staged_bidirectional_rate(hw);
    EXPECT_GT(server_busbw(hw), 2 * shm) << name;
    EXPECT_TRUE(nccl_p2p_within_node(hw, 0, 1, 8)) << name;
    hw.nccl_p2p_disable = true;
    EXPECT_FALSE(nccl_p2p_within_node(hw, 0, 1, 8)) << name;
    EXPECT_LE(server_busbw(hw), shm * (1 + 1e-6)) << name;
  }
  HardwareSpec one_switch = pcie_server(2, true, "2x Intel Xeon Gold 6448Y", "master");
  EXPECT_GT(server_busbw(one_switch), kP2pAbove);
  one_switch.nccl_p2p_disable = true;
  EXPECT_FALSE(nccl_p2p_within_node(one_switch, 0, 1, 2));
  EXPECT_LE(server_busbw(one_switch), kShmCap * (1 + 1e-6));
}

// Invariant: the default host-staged share is a root port's (it was measured on GPUs with a
// port each), so GPUs behind one PCIe switch split it: DGX A100's 8 GPUs, two per switch,
// run an SHM ring at half of 0.41 x PCIe Gen4 x16, where a server with a root port per GPU
// runs the whole share; a file's own figure (its GPU pair as measured there) is not split.
TEST(NcclTransports, GpusBehindOneSwitchShareTheirRootPortsHostStagedRate) {
  HardwareSpec a100 = load_hardware("dgx-a100", kHardwareLibrary);
  a100.nccl_p2p_disable = true;
  const double port = staged_bidirectional_rate(a100);
  EXPECT_EQ(gpus_per_root_port(a100, {0, 1, 2, 3, 4, 5, 6, 7}), 2);
  EXPECT_EQ(gpus_per_root_port(a100, {0, 2}), 1);
  EXPECT_DOUBLE_EQ(shm_rate_per_gpu(a100, {0, 1}), port / 2);
  EXPECT_DOUBLE_EQ(shm_rate_per_gpu(a100, {0, 2}), port);  // a switch each: the whole uplink's share
  // Lanes count: x8 GPUs two to a x16 uplink are bound by their own links, not halved; a x8
  // uplink for two x16 GPUs gives each a quarter of their own link's share.
  HardwareSpec narrow = a100;
  narrow.pcie.lanes = 8;
  EXPECT_DOUBLE_EQ(shm_rate_per_gpu(narrow, {0, 1}), staged_bidirectional_rate(narrow));
  HardwareSpec thin_uplink = a100;
  thin_uplink.pcie.switches[0].uplink_lanes = 8;
  EXPECT_DOUBLE_EQ(shm_rate_per_gpu(thin_uplink, {0, 1}), port / 4);
  EXPECT_LE(server_busbw(a100), port / 2 * (1 + 1e-6));
  EXPECT_GT(server_busbw(a100), port / 2 * 0.9);
  HardwareSpec own_ports = pcie_server(2, false, "2x AMD EPYC 9354", "master");
  own_ports.nccl_p2p_disable = true;
  EXPECT_GT(server_busbw(own_ports), 0.9 * staged_bidirectional_rate(own_ports));
  HardwareSpec measured = a100;
  measured.pcie.staged_bidirectional = 4e9;  // a pair's figure as measured on the machine
  EXPECT_DOUBLE_EQ(shm_rate_per_gpu(measured, {0, 1}), 4e9);
}

TEST(NcclTransports, PlantedBugRootPortUnsharedIsCaught) {
  ScopedFault f(Fault::shm_root_port_unshared);
  HardwareSpec a100 = load_hardware("dgx-a100", kHardwareLibrary);
  a100.nccl_p2p_disable = true;
  EXPECT_GT(server_busbw(a100), 0.75 * staged_bidirectional_rate(a100));
}

TEST(NcclTransports, PlantedBugP2pDisableIgnoredIsCaught) {
  ScopedFault f(Fault::nccl_p2p_disable_ignored);
  HardwareSpec hw = load_hardware("dgx-a100", kHardwareLibrary);
  hw.nccl_p2p_disable = true;
  EXPECT_GT(server_busbw(hw), 2 * staged_bidirectional_rate(hw));
}

TEST(NcclTransports, PlantedBugP2pThroughAnyCpuIsCaught) {
  ScopedFault f(Fault::nccl_p2p_through_any_cpu);
  EXPECT_GT(server_busbw(pcie_server(2, false, "2x Intel Xeon Gold 6448Y", "master")), kP2pAbove);
}

namespace {
// NCCL's graph of 4 dgx-h100 nodes (32 ranks): 8 ring channels (one per NIC at 45 GB/s).
NcclGraph four_h100_nodes() {
  HardwareSpec hw = load_hardware("dgx-h100-cluster", kHardwareLibrary);
  return nccl_graph(hw, 32, 4, true);
}
}  // namespace

// Invariant: the tree's chunk is one step of the protocol's buffer (Simple 512 KiB, LL
// 32 KiB of data, LL128 576,000 B of data); LL128's is halved while a channel holds fewer
// than nsteps x 64 / ppn chunks (nsteps = 1 + 2 + 0.8 = 3.8 here: 30.4), down to 128 KiB:
// at 16 MiB on 8 channels 576,000 -> 288,000 -> 144,000 -> 72,000 B (29 chunks), at 1 GiB
// it stays 576,000 (233 chunks). Smaller operations never get larger chunks.
TEST(NcclTreeChunks, ProtocolStepHalvedForMidSizes) {
  const NcclGraph g = four_h100_nodes();
  ASSERT_EQ(g.ring_channels, 8);
  EXPECT_EQ(nccl_tree_chunk_bytes(g, NcclProtocol::simple, 16 * kMiB, 8), 524288);
  EXPECT_EQ(nccl_tree_chunk_bytes(g, NcclProtocol::ll, 16 * kMiB, 8), 32768);
  EXPECT_EQ(nccl_tree_chunk_bytes(g, NcclProtocol::ll128, 16 * kMiB, 8), 72000);
  EXPECT_EQ(nccl_tree_chunk_bytes(g, NcclProtocol::ll128, kGiB, 8), 576000);
  Bytes prev = 0;
  for (Bytes b = 64 * kKiB; b <= kGiB; b *= 2) {
    const Bytes chunk = nccl_tree_chunk_bytes(g, NcclProtocol::ll128, b, 8);
    EXPECT_GE(chunk, prev) << b;
    prev = chunk;
  }
}

// Invariant: NCCL 2.18.5 also halves the Simple tree chunk while a channel holds fewer than
// depth x 8 chunks (down to 128 KiB), depth x 4 (64 KiB), depth (32 KiB), depth = 8 - 1 +
// log2(4) = 9 here (connect.cc): at 16 MiB on 8 channels 512 -> 256 -> 128 KiB (4, 8
// chunks < 72; the first rule stops at 128 KiB), 16 chunks < 36 -> 64 KiB, where 32 >= 9
// holds; at 1 GiB 256 chunks keep 512 KiB. master keeps 512 KiB at every size.
TEST(NcclTreeChunks, SimpleShrunkByDepthIn2185) {
  NcclGraph g = four_h100_nodes();
  g.tuner = NcclTuner::v2_18_5;
  EXPECT_EQ(nccl_tree_chunk_bytes(g, NcclProtocol::simple, 16 * kMiB, 8), 65536);
  EXPECT_EQ(nccl_tree_chunk_bytes(g, NcclProtocol::simple, kGiB, 8), 524288);
  EXPECT_EQ(nccl_tree_chunk_bytes(g, NcclProtocol::ll128, 16 * kMiB, 8), 72000);
  EXPECT_EQ(nccl_tree_chunk_bytes(g, NcclProtocol::ll128, kGiB, 8), 576000);
}

TEST(NcclTreeChunks, PlantedBugFixedChunkIsCaught) {
  ScopedFault f(Fault::nccl_tree_chunk_fixed);
  EXPECT_NE(nccl_tree_chunk_bytes(four_h100_nodes(), NcclProtocol::ll128, 16 * kMiB, 8), 72000);
  NcclGraph g = four_h100_nodes();
  g.tuner = NcclTuner::v2_18_5;
  EXPECT_NE(nccl_tree_chunk_bytes(g, NcclProtocol::simple, 16 * kMiB, 8), 65536);
}

namespace {
// Whether the graph launches twice its ring graph's channels (connect.cc duplicates them
// once more when the communicator connects), within MAXCHANNELS 32.
bool runtime_channels_duplicated(const NcclGraph& g) {
  return g.runtime_channels == std::min(32, 2 * g.ring_channels);
}
}  // namespace

// Invariant: NCCL launches up to twice the channels its ring graph found
// (ncclTopoPostset: min(MAXCHANNELS, 2 x nChannels)). An HGX A100 8-GPU node logs
// "Channel 23/24" (nccl-tests issue 100): 12 graph rings, 24 launched.
TEST(NcclChannels, RuntimeChannelsAreTheGraphsDuplicated) {
  const auto a100 = nccl_graph(load_hardware("dgx-a100", kHardwareLibrary), 8, 1, true);
  EXPECT_EQ(a100.runtime_channels, 24);
  for (const char* name : {"dgx-a100", "dgx-h100", "desktop-2gpu-pcie-nop2p"}) {
    const auto hw = load_hardware(name, kHardwareLibrary);
    EXPECT_TRUE(runtime_channels_duplicated(nccl_graph(hw, hw.gpu_count(), 1, hw.pcie.peer_to_peer))) << name;
  }
}

TEST(NcclChannels, PlantedBugChannelsNotDuplicatedIsCaught) {
  ScopedFault f(Fault::nccl_channels_not_duplicated);
  EXPECT_FALSE(runtime_channels_duplicated(nccl_graph(load_hardware("dgx-a100", kHardwareLibrary), 8, 1, true)));
}

namespace {
// Seconds a 512 KiB LL all-reduce on DGX A100 spends moving data: simulated time less
// NCCL's latency term.
Seconds a100_ll_512k_transfer_s() {
  CollectiveSettings s;
  s.protocol = NcclProtocol::ll;
  const RunResult r = run_one(load_hardware("dgx-a100", kHardwareLibrary), all_reduce_bytes(512 * kKiB), s);
  return r.time_s - r.latency_s;
}
}  // namespace

// Invariant: each launched channel carries its own share of NCCL's bus bandwidth before
// llMaxBw (1/runtime_channels of it), and llMaxBw caps the launched channels together, so
// an operation that launches fewer channels than the runtime count moves its data no
// faster than their share. By hand (enqueue.cc, tuning.cc): LL on 8 ranks keeps a channel
// per 512 threads x 8 B x 8 ranks = 32 KiB, so 512 KiB launches 16 of 24 channels; ring
// LL's bus bandwidth on one Ampere node before the ceiling is 12 x 20 x 0.5 = 120 GB/s
// (llMaxBw 87.7 caps all 24); 16/24 of 120 = 80 GB/s moves 2 x 7/8 x 512 KiB in at least
// 11.5 us.
TEST(NcclChannels, LaunchedChannelsCarryOnlyTheirShare) {
  const double least_s = 2.0 * 7 / 8 * 512 * 1024 / (16.0 / 24.0 * 120e9);
  EXPECT_GE(a100_ll_512k_transfer_s(), least_s * (1 - 1e-3));
}

TEST(NcclChannels, PlantedBugChannelsNotDuplicatedMovesDataTooFast) {
  ScopedFault f(Fault::nccl_channels_not_duplicated);
  const double least_s = 2.0 * 7 / 8 * 512 * 1024 / (16.0 / 24.0 * 120e9);
  EXPECT_LT(a100_ll_512k_transfer_s(), least_s * (1 - 1e-3));
}

namespace {
// The slowest ratio, over sizes 32 KiB .. 2 MiB, of the simulated time of the tuner's pick
// to the fastest protocol simulated at that size, for all_gather on `nodes` nodes of `hw`
// (each protocol forced as NCCL_PROTO forces it); `where` names that size.
double pick_against_fastest(const char* hw_name, int nodes, std::string& where) {
  const auto hw = with_nodes(load_hardware(hw_name, kHardwareLibrary), nodes);
  double worst = 0;
  for (Bytes b = 32 * kKiB; b <= 2 * kMiB; b *= 4) {
    CollectiveCall call;
    call.op = CollectiveOp::all_gather;
    call.count = b / 4;
    const RunResult pick = run_one(hw, call);
    double fastest = pick.time_s;
    for (auto p : {NcclProtocol::ll, NcclProtocol::ll128, NcclProtocol::simple}) {
      CollectiveSettings forced;
      forced.protocol = p;
      fastest = std::min(fastest, run_one(hw, call, forced).time_s);
    }
    if (pick.time_s / fastest > worst) {
      worst = pick.time_s / fastest;
      where = fmt::format("{} B: {} took {:.1f} us, the fastest {:.1f} us", b, pick.protocol, pick.time_s * 1e6,
                          fastest * 1e6);
    }
  }
  return worst;
}
}  // namespace

// Invariant: NCCL's tuner picks the protocol its model finds fastest, and NCCL's model
// does not reduce LL's bandwidth when enqueue launches fewer channels for a small
// operation: llMaxBw caps the communicator's LL rate as a whole, each launched channel
// running at its own rate below it. So across nodes, where the tuner picks LL up to
// hundreds of KiB on a channel or a few, the pick runs in the simulation within 25 % of
// the fastest protocol there (measured: at most 1.19x, 16 DGX A100 nodes at 512 KiB).
// Spreading the ceiling over all 16 runtime channels (nccl-ll-ceiling-per-channel) made
// one launched channel carry 1/16 of it: 4 DGX H100 nodes took 149 us at 512 KiB with LL
// against 81 us with LL128.
TEST(NcclChannels, AcrossNodesTheTunersPickRunsNearTheFastestProtocol) {
  for (const auto& [name, nodes] : std::vector<std::pair<const char*, int>>{{"dgx-h100-cluster", 4}, {"dgx-a100-cluster", 16}}) {
    std::string where;
    EXPECT_LE(pick_against_fastest(name, nodes, where), 1.25) << name << " x " << nodes << " nodes, " << where;
  }
}

TEST(NcclChannels, PlantedBugLlCeilingPerChannelIsCaught) {
  ScopedFault f(Fault::nccl_ll_ceiling_per_channel);
  std::string where;
  EXPECT_GT(pick_against_fastest("dgx-h100-cluster", 4, where), 1.25) << where;
}

// NVLS on one node pipelines NCCL's rounds (enqueue.cc, NCCL_ALGO_NVLS): each of the 16
// NVLS channels x 8 heads moves one chunk per round, the chunk shrunk from 128 KiB for
// mid sizes. Values derived by hand from enqueue.cc's thresholds (ops = 128): below
// 64 x 128 x 128 KiB = 1 GiB the chunk is 64 KiB, below 8 x 128 x 64 KiB = 64 MiB 32 KiB,
// below 2 x 128 x 32 KiB = 8 MiB 16 KiB.
TEST(NcclNvls, OneNodeChunkIsNcclsForTheSize) {
  const auto h100 = nccl_graph(load_hardware("dgx-h100", kHardwareLibrary), 8, 1, true);
  EXPECT_EQ(nccl_nvls_runtime_channels(h100), 16);
  EXPECT_EQ(nccl_nvls_chunk_bytes(h100, kMiB), 16 * kKiB);
  EXPECT_EQ(nccl_nvls_chunk_bytes(h100, 4 * kMiB), 16 * kKiB);
  EXPECT_EQ(nccl_nvls_chunk_bytes(h100, 16 * kMiB), 32 * kKiB);
  EXPECT_EQ(nccl_nvls_chunk_bytes(h100, 64 * kMiB), 64 * kKiB);
  EXPECT_EQ(nccl_nvls_chunk_bytes(h100, 256 * kMiB), 64 * kKiB);
  EXPECT_EQ(nccl_nvls_chunk_bytes(h100, kGiB), 128 * kKiB);
  EXPECT_EQ(nccl_nvls_chunk_bytes(h100, 8 * kGiB), 128 * kKiB);
}

// Invariant: NCCL's one-node NVLS kernel runs each round through three stages (scatter,
// multimem reduce and multicast, gather), each a round behind the one before. All data is
// scattered at no more than NCCL's algorithm bandwidth (476 GB/s bus on 8 H100s: 476 x
// 8 / 14 = 272 GB/s), and the last round is gathered after it came back, so an all-reduce
// takes at least NCCL's latency term + bytes / algbw + one round / algbw, and no more than
// two rounds beyond the bytes' own time (the multicast stage never slower than the bound).
// Rounds by hand (above): 4 MiB 2 MiB (16 KiB x 128), 16 MiB 4 MiB, 64 MiB 8 MiB. With
// 512 KiB pieces and no gather stage (nvls-rounds-ignored) 16 MiB took 87.3 us, where
// the bound is 103 us (Azure ND H100 v5 measured 125 us: scenarios/measured/public).
namespace {
void expect_nvls_rounds_pipelined(bool planted) {
  const auto hw = load_hardware("dgx-h100", kHardwareLibrary);
  CollectiveSettings nvls;
  nvls.algorithm = CollectiveAlgorithm::nvls;
  const double algbw = 476e9 * 8.0 / 14.0;
  bool any_below = false;
  for (const auto& [bytes, round] : std::vector<std::pair<Bytes, Bytes>>{
           {4 * kMiB, 2 * kMiB}, {16 * kMiB, 4 * kMiB}, {64 * kMiB, 8 * kMiB}}) {
    const RunResult r = run_one(hw, all_reduce_bytes(bytes), nvls);
    const double lower = r.latency_s + static_cast<double>(bytes + round) / algbw;
    const double upper = r.latency_s + static_cast<double>(bytes + 2 * round) / algbw;
    any_below = any_below || r.time_s < lower * (1 - 1e-6);
    if (!planted) {
      EXPECT_GE(r.time_s, lower * (1 - 1e-6)) << bytes << " B";
      EXPECT_LE(r.time_s, upper * 1.02) << bytes << " B";
    }
  }
  if (planted) {
    EXPECT_TRUE(any_below) << "planted: NVLS rounds still pipelined";
  }
}
}  // namespace

TEST(NcclNvls, OneNodeAllReducePaysItsPipelineStages) { expect_nvls_rounds_pipelined(false); }
TEST(NcclNvls, PlantedBugNvlsRoundsIgnoredIsCaught) {
  ScopedFault f(Fault::nccl_nvls_rounds_ignored);
  expect_nvls_rounds_pipelined(true);
}
