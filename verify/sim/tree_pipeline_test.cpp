// The pipelined tree (collectives.hpp, "tree"; CollectivePlan::pieces_in_flight): with
// NCCL's model a tree hop keeps NCCL_STEPS (8) pieces of NCCL's chunk in flight, each
// piece's bytes following the previous one's on the wire while its latency overlaps them,
// and every NIC carries both trees of the double binary tree.
//  - Fluid gate: pieces chained by their FIFO gates on one route, started at once, end at
//    L + (b_0 + ... + b_j) / B (the latency paid once), against the closed form by hand.
//    Planted fluid-gate-ignored: they share the route and all end together.
//  - Replay: a tree all-reduce of k pieces on two ranks (one GPU on each of two nodes)
//    ends when the hand-written recurrence of its two edges says, for 1, 2, 3 and 8 pieces
//    in flight (a free slot: the piece `in flight` ahead arrived; the FIFO gate: the
//    previous piece's bytes through). Planted fluid-gate-ignored is caught.
//  - Estimate: the pipelined tree estimate is within 5 % of the replay of every transfer at
//    256 MiB and within 15 % at 1 and 16 MiB (the bound the unpipelined estimate holds
//    against exact), for tree and NVLS-tree on 2-5 nodes of 2 and 8 GPUs.
//  - NIC bound: a 512 MiB tree or NVLS-tree all-reduce on 4 DGX H100 nodes reaches 90-100 %
//    of the bus bandwidth its NICs allow. In a double binary tree over 4 or more nodes
//    some node is interior in one tree (two children and a parent) and a leaf in the
//    other, so its NICs take in 3 S/2 + S/2 = 2 S for S bytes: at 8 NICs of 400 Gb/s x
//    0.95 (the file's NIC efficiency), busbw <= 8 x 47.5 GB/s x (N - 1) / N. Planted
//    tree-one-tree-per-nic (a NIC carries one tree: 3x the load on an interior node's
//    NICs) and tree-one-in-flight (each piece pays its hop latency in series) are caught.

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/collectives/large_n/estimate.hpp"
#include "sim/collectives/large_n/fluid_sim.hpp"
#include "sim/collectives/large_n/replay.hpp"
#include "sim/collectives/nccl_model.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_process.hpp"
#include "verify/support/collective_fixture.hpp"
#include "verify/support/rc_cases.hpp"

using namespace dpt;
using namespace dpt::sim;

namespace {

using test::kHardwareLibrary;
using test::all_reduce_bytes;
using test::h100_nodes;
using test::ranks_of;

// A route's rate for one flow alone on it: its slowest link's bandwidth.
double route_rate(const Platform& p, const RouteInfo& r) {
  double b = std::numeric_limits<double>::infinity();
  for (const int id : r.link_ids) b = std::min(b, p.link_bandwidth(id));
  return b;
}

// Runs `property` in a child process on a 2-node DGX H100 platform: "1" if it held.
std::string on_two_nodes(int cases, bool expect_counterexample, const std::function<void(const Platform&)>& property) {
  return run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, h100_nodes(2));
    const Platform& platform = *p;
    const bool held = test::holds_for(expect_counterexample ? "planted bug: case" : "case", cases,
                                      [&]() { property(platform); }, !expect_counterexample);
    engine.release();
    return std::string(held ? "1" : "0");
  });
}

// Invariant: k transfers chained by FIFO gates on one route, all ready at 0, end at
// L + (b_0 + ... + b_j) / B: each pays the route's latency L, all of them at once, and its
// bytes follow the previous one's at the route's rate B.
void fluid_gate_property(const Platform& p) {
  const RouteInfo& route = p.gpu_route(0, 8);
  const double L = route.latency_s, B = route_rate(p, route);
  const int k = *rc::gen::inRange(1, 13);
  std::vector<FluidTransfer> ts;
  std::vector<double> bytes;
  for (int j = 0; j < k; ++j) {
    bytes.push_back(static_cast<double>(*rc::gen::inRange(1024, 4 << 20)));
    ts.push_back({&route, bytes.back(), 0, {}, j > 0 ? j - 1 : -1});
  }
  const auto end = fluid_sim_end_times(ts, &p);
  double through = 0;
  for (int j = 0; j < k; ++j) {
    through += bytes[static_cast<size_t>(j)];
    const double expected = L + through / B;
    RC_ASSERT(std::abs(end[static_cast<size_t>(j)] - expected) <= 1e-9 * expected);
  }
}

// Invariant: a tree all-reduce of k pieces on two ranks (GPU 8 the child of GPU 0) ends as
// the recurrence of its up and down edges says. One in flight: a piece goes once the
// previous one arrived over the same edge (and, down, once it arrived from below).
// W > 1 in flight: a piece starts once it is ready and the piece W ahead arrived over its
// edge; its bytes flow from the later of its latency paid and the previous piece's end.
void two_rank_replay_property(const Platform& p) {
  const std::vector<int> gpus{0, 8};
  const auto tcs = tree_channels(p, gpus, 1);
  RC_ASSERT(tcs.size() == 1u);
  RC_ASSERT(tcs[0].root == 0);
  const int in_flight = *rc::gen::element(1, 2, 3, 8);
  const Elements piece = *rc::gen::inRange<Elements>(16, 256 << 10);  // 64 B .. 1 MiB of f32
  const int k = *rc::gen::inRange(1, 25);
  const Elements count = (k - 1) * piece + *rc::gen::inRange<Elements>(1, piece + 1);
  const CollectiveCall call{CollectiveOp::all_reduce, count, 4, 0};
  const PieceEnds ends = tree_replay(p, gpus, tcs, call, piece, k, in_flight);
  const Seconds replayed = *std::max_element(ends.end.begin(), ends.end.end());

  const RouteInfo& up = p.gpu_route(8, 0);
  const RouteInfo& down = p.gpu_route(0, 8);
  const double bu = route_rate(p, up), bd = route_rate(p, down);
  std::vector<double> eu(static_cast<size_t>(k)), ed(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) {
    const auto u = static_cast<size_t>(i);
    const double b = static_cast<double>(std::min(piece, count - i * piece) * 4);
    if (in_flight == 1) {
      eu[u] = (i > 0 ? eu[u - 1] : 0.0) + up.latency_s + b / bu;
      ed[u] = std::max(eu[u], i > 0 ? ed[u - 1] : 0.0) + down.latency_s + b / bd;
    } else {
      const auto slot = [&](const std::vector<double>& e) { return i >= in_flight ? e[u - in_flight] : 0.0; };
      eu[u] = std::max(slot(eu) + up.latency_s, i > 0 ? eu[u - 1] : 0.0) + b / bu;
      ed[u] = std::max(std::max(eu[u], slot(ed)) + down.latency_s, i > 0 ? ed[u - 1] : 0.0) + b / bd;
    }
  }
  RC_LOG() << "k " << k << ", piece " << 4 * piece << " B, " << in_flight << " in flight: replay " << replayed
           << " s, recurrence " << ed.back() << " s\n";
  RC_ASSERT(std::abs(replayed - ed.back()) <= 1e-9 * ed.back());
}

// A `bytes` all-reduce on `nodes` DGX H100 nodes (all 8 GPUs each) with NCCL's model,
// forced to `algo`: nccl-tests' bus bandwidth (GB/s) and the plan's pieces in flight.
std::pair<double, int> busbw_gbs(CollectiveAlgorithm algo, int nodes, Bytes bytes) {
  const HardwareSpec hw = h100_nodes(nodes);
  const std::vector<int> gpus = ranks_of(nodes, 8);
  CollectiveSettings s;
  s.algorithm = algo;
  s.protocol = NcclProtocol::simple;
  std::shared_ptr<CollectiveGroup> group;
  const std::string out = run_simulation(
      hw, [&](Platform& p) { group = test::start_collective(p, gpus, all_reduce_bytes(bytes), s); },
      [&](Platform&) {
        const auto& rec = group->records().at(0);
        return fmt::format("{:.17g} {}", rec.end_s - rec.start_s, rec.plan.pieces_in_flight);
      });
  const double t = std::stod(out.substr(0, out.find(' ')));
  const int n = static_cast<int>(gpus.size());
  return {static_cast<double>(bytes) / t * 2.0 * (n - 1) / n / 1e9, std::stoi(out.substr(out.find(' ') + 1))};
}

// The NIC bound above, by hand: 8 NICs x 400 Gb/s x 0.95 x (N - 1) / N.
double nic_bound_gbs(int nodes) {
  const int n = 8 * nodes;
  return 8 * 400.0 / 8 * 0.95 * (n - 1) / n;
}

// "" when both algorithms reach 90-100 % of the NIC bound on 4 nodes, else what missed.
std::string nic_bound_misses() {
  std::string out;
  for (auto algo : {CollectiveAlgorithm::tree, CollectiveAlgorithm::nvls_tree}) {
    const auto [bw, in_flight] = busbw_gbs(algo, 4, Bytes{512} << 20);
    const double bound = nic_bound_gbs(4);
    if (bw < 0.9 * bound || bw > bound * (1 + 1e-9))
      out += fmt::format("{}: {:.1f} GB/s against a NIC bound of {:.1f} ({:.1f} %, {} in flight); ",
                         collective_algorithm_name(algo), bw, bound, 100 * bw / bound, in_flight);
  }
  return out;
}

}  // namespace

TEST(FluidGate, PiecesOnOneRouteFollowEachOtherWhileTheirLatenciesOverlap) {
  EXPECT_EQ(on_two_nodes(60, false, fluid_gate_property), "1");
}

TEST(FluidGate, PlantedGateIgnoredIsCaught) {
  const ScopedFault planted(Fault::fluid_sim_gate_ignored);
  EXPECT_EQ(on_two_nodes(60, true, fluid_gate_property), "0");
}

TEST(TreePipeline, TwoRankReplayFollowsTheRecurrence) {
  EXPECT_EQ(on_two_nodes(80, false, two_rank_replay_property), "1");
}

TEST(TreePipeline, PlantedGateIgnoredInTheReplayIsCaught) {
  const ScopedFault planted(Fault::fluid_sim_gate_ignored);
  EXPECT_EQ(on_two_nodes(80, true, two_rank_replay_property), "0");
}

// Invariant: the pipelined tree estimate (a head of up to 3 pieces placed, or for longer
// calls a 2-piece head and the larger of the chained and the bottleneck link's bounds) is within 5 % of the replay of every transfer
// at 256 MiB and within 15 % at 1 and 16 MiB, for tree and NVLS-tree with NCCL's chunks
// and NCCL_STEPS in flight, on 2, 3 and 5 nodes of 2 and 8 GPUs.
TEST(TreePipeline, EstimateWithinFivePercentOfTheReplayAtLargeSizesAndFifteenAtMidSizes) {
  std::string misses;
  for (int nodes : {2, 3, 5})
    for (int per_node : {2, 8})
      misses += run_in_child_process([&]() {
        auto engine = make_engine();
        auto p = Platform::build(*engine, h100_nodes(nodes));
        const auto gpus = ranks_of(nodes, per_node);
        std::string out;
        for (auto algo : {CollectiveAlgorithm::tree, CollectiveAlgorithm::nvls_tree})
          for (Bytes bytes : {Bytes{1} << 20, Bytes{16} << 20, Bytes{256} << 20}) {
            CollectiveSettings s;
            s.algorithm = algo;
            s.protocol = NcclProtocol::simple;
            const CollectiveCall call = all_reduce_bytes(bytes);
            const CollectivePlan plan = plan_collective(*p, gpus, call, s);
            if (plan.pieces_in_flight != kNcclSteps) out += "not pipelined; ";
            const auto tcs = algo == CollectiveAlgorithm::tree ? tree_channels(*p, gpus, plan.channels)
                                                               : nvls_tree_channels(*p, gpus, plan.channels);
            const Elements piece = static_cast<Elements>(plan.piece_bytes / 4);
            const auto ends = tree_replay(*p, gpus, tcs, call, piece, call.count, plan.pieces_in_flight);
            const Seconds replay = *std::max_element(ends.end.begin(), ends.end.end());
            const Seconds estimate = tree_estimate(*p, gpus, tcs, call, piece, plan.pieces_in_flight);
            if (std::abs(estimate / replay - 1) > (bytes >= (Bytes{256} << 20) ? 0.05 : 0.15))
              out += fmt::format("{} on {} x {} GPUs, {} B in {} B pieces: estimate {:.4g} s, replay {:.4g} s ({:+.1f} %); ",
                                 collective_algorithm_name(algo), nodes, per_node, bytes, plan.piece_bytes, estimate,
                                 replay, 100 * (estimate / replay - 1));
          }
        engine.release();
        return out;
      });
  EXPECT_EQ(misses, "");
}

TEST(TreePipeline, LargeAllReduceOnFourNodesReachesItsNicBound) { EXPECT_EQ(nic_bound_misses(), ""); }

TEST(TreePipeline, PlantedOneTreePerNicIsCaught) {
  const ScopedFault planted(Fault::tree_one_tree_per_nic);
  EXPECT_NE(nic_bound_misses(), "") << "the planted bug went unnoticed";
}

TEST(TreePipeline, PlantedOnePieceInFlightIsCaught) {
  const ScopedFault planted(Fault::nccl_tree_one_piece_in_flight);
  EXPECT_NE(nic_bound_misses(), "") << "the planted bug went unnoticed";
}
