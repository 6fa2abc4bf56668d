// NVLS-tree (NCCL_ALGO=NVLSTree): NVLink SHARP within each node, a double binary tree of the
// nodes' NVLS heads across them (collectives.hpp, "nvls_tree"; nccl_model.hpp).
//  - Tuner: on dgx-h100-cluster NCCL's NVLS graph across nodes has 8 heads at bwIntra 40 and
//    bwInter 48 GB/s, and its cost is NCCL's formula (values derived by hand below from
//    search.cc and tuning.cc, not by dptwin). Planted nccl-nvls-tree-off: no NVLS graph
//    across nodes, so a 512 MiB all-reduce on 4 nodes runs another algorithm.
//  - Channels: for every node count 2..5, ranks per node 2..8 and channel count, each
//    channel is a tree rooted at one head in which a node's other ranks hang off that
//    node's head and a head's parent is the same GPU (so the same NIC: its rail) of
//    another node; over 2H channels every head serves exactly 2. Planted
//    nvls-tree-one-head (every channel through the node's first GPU) breaks the last.
//  - Traffic: on 4 nodes every NIC of a node carries the same bytes, within 1 %, also with
//    a node of 4 ranks among nodes of 8 (nvls-tree-one-head puts them all on one NIC).
//  - Rail fold: the estimate over head 0's channels standing for every head's equals the
//    estimate over every channel, and so for the tree's channels 0 and 1 (both trees over
//    chains from GPU 0) turned by 1 GPU, with one and NCCL_STEPS pieces in flight
//    (nvls-tree-fold-unscaled: the two channels' loads alone).
//  - Formulations: on the bare links the large-N formulation times an NVLS-tree all-reduce
//    on 2 nodes of 4 GPUs within 3 % of the exact one (every message a SimGrid comm); with
//    NCCL's model (8 pieces in flight) exact is refused and the estimate is within 3 % of
//    the replay.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/collectives/large_n/dispatch.hpp"
#include "sim/collectives/large_n/estimate.hpp"
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
using test::h100_nodes;
using test::ranks_of;

}  // namespace

// NCCL's NVLS search on DGX H100 across nodes (search.cc), by hand: 8 NICs of 400 Gb/s (50
// GB/s as NCCL counts them), NVSwitch ports of 18 x 20.6 = 370.8 GB/s. Pass 1 from the
// fastest SM90 inter speed under 50: 48 fits 6 channels (a head's port carries 7 x 48 =
// 336), 45 fits 7 (360), 40 fits 8 (9 x 40 = 360): 8 heads at 40. Pass 2 raises bwInter
// 40 -> 42 -> 45 -> 48 (each below 2 x 40, the NIC carries 48). Cost (tuning.cc, Hopper):
// per channel min(40 x 0.85 x 7/8 x 2 = 59.5, bwInter, perChMaxNVLSTreeBw):
//   4 nodes: min(59.5, 48, 45.5) x 8 = 364 GB/s bus, x 32/62 = 187.87 alg; latency 25 + 2 x 2 x 20.9 = 108.6 us;
//   2 nodes: min(59.5, 96, 57.7) x 8 = 461.6 GB/s bus; latency 25 + 2 x 20.9 = 66.8 us.
// NCCL 2.18.5 (v2.18.5-1 search.cc, tuning.cc): pass 1 keeps a graph only for more channels
// (8 at 40 as above) and pass 2 raises bwIntra, never bwInter: 42 fits 7 channels, not 8, so
// the graph stays 8 x 40 / 40. 4 nodes: 8 x bwInter 40 = 320 bus, x 0.7 x 4/6 = 149.33 alg;
// latency 23 + 2 x 3 x 19 = 137 us. NVLS there needs more than 2 GPUs per node
// (ncclNvlsInit), master more than 1.
namespace {
// The NVLS graph across nodes and the NVLS-tree all-reduce cost NCCL computes from it.
void expect_graph_and_cost(const NcclGraph& g, int channels, double intra_gbs, double inter_gbs, double bus_gbs,
                           double alg_gbs, double latency_us) {
  EXPECT_EQ(g.nvls_channels, channels);
  EXPECT_DOUBLE_EQ(g.nvls_bw_gbs, intra_gbs);
  EXPECT_DOUBLE_EQ(g.nvls_inter_bw_gbs, inter_gbs);
  const NcclCost c = nccl_cost(g, CollectiveOp::all_reduce, NcclAlgo::nvls_tree, NcclProtocol::simple);
  EXPECT_NEAR(c.bus_bw_gbs, bus_gbs, 1e-9);
  EXPECT_NEAR(c.alg_bw_gbs, alg_gbs, 1e-9);
  EXPECT_NEAR(c.latency_us, latency_us, 1e-9);
}
}  // namespace

TEST(NvlsTreeTuner, DgxH100ClusterGraphAndCostAreNcclsModel) {
  const HardwareSpec hw = h100_nodes(4);
  const NcclGraph g = nccl_graph(hw, 32, 4, true);
  expect_graph_and_cost(g, 8, 40.0, 48.0, 364.0, 364.0 * 32 / 62, 108.6);
  expect_graph_and_cost(nccl_graph(h100_nodes(2), 16, 2, true), 8, 40.0, 48.0, 461.6, 461.6 * 16 / 30, 66.8);
  HardwareSpec hw218 = hw;
  hw218.nccl_version = "2.18.5";
  expect_graph_and_cost(nccl_graph(hw218, 32, 4, true), 8, 40.0, 40.0, 320.0, 320.0 * 0.7 * 4 / 6, 137.0);
  EXPECT_EQ(nccl_graph(hw218, 8, 4, true).nvls_channels, 0);  // 2 GPUs per node
  EXPECT_EQ(nccl_graph(hw, 8, 4, true).nvls_channels, 2);
  // Simple only; none on one node (NVLS runs there), none on NVSwitch without in-switch reduction.
  EXPECT_EQ(nccl_cost(g, CollectiveOp::all_reduce, NcclAlgo::nvls_tree, NcclProtocol::ll128).alg_bw_gbs, 0.0);
  EXPECT_EQ(nccl_cost(g, CollectiveOp::all_reduce, NcclAlgo::nvls, NcclProtocol::simple).alg_bw_gbs, 0.0);
  const NcclGraph one = nccl_graph(h100_nodes(1), 8, 1, true);
  EXPECT_EQ(nccl_cost(one, CollectiveOp::all_reduce, NcclAlgo::nvls_tree, NcclProtocol::simple).alg_bw_gbs, 0.0);
  const auto a100 = with_nodes(load_hardware("dgx-a100-cluster", kHardwareLibrary), 4);
  EXPECT_EQ(nccl_graph(a100, 32, 4, true).nvls_channels, 0);
}

namespace {
// The algorithm the twin plans for a 512 MiB all-reduce on 4 nodes of `hw_name`, or the
// error a forced nvls_tree gives there.
std::string planned(const char* hw_name, bool force_nvls_tree) {
  const HardwareSpec hw = with_nodes(load_hardware(hw_name, kHardwareLibrary), 4);
  return run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    CollectiveSettings s;
    if (force_nvls_tree) s.algorithm = CollectiveAlgorithm::nvls_tree;
    std::string out;
    try {
      const CollectivePlan plan = plan_collective(*p, test::first_gpus(32), all_reduce_bytes(Bytes{512} << 20), s);
      out = fmt::format("{} x{}", collective_algorithm_name(plan.algorithm), plan.channels);
    } catch (const std::invalid_argument& e) {
      out = std::string("error: ") + e.what();
    }
    engine.release();
    return out;
  });
}
}  // namespace

// Invariant: NCCL's tuner runs 512 MiB across 4 DGX H100 nodes as NVLS-tree (its model's
// least time; NVLS-tree's 364 GB/s bus against the ring graph's 8 channels at 45 GB/s),
// on 2 x 8 heads' channels; DGX A100 (no in-switch reduction) never, and forcing it there
// names the hardware.
TEST(NvlsTreeTuner, LargeAllReducesAcrossH100NodesRunNvlsTree) {
  EXPECT_EQ(planned("dgx-h100-cluster", false), "nvls_tree x16");
  EXPECT_EQ(planned("dgx-a100-cluster", false).rfind("nvls_tree", 0), std::string::npos);
  const std::string err = planned("dgx-a100-cluster", true);
  EXPECT_NE(err.find("error: algorithm nvls_tree cannot run all_reduce here"), std::string::npos) << err;
  EXPECT_NE(err.find("dgx-a100-cluster"), std::string::npos) << err;
}

TEST(NvlsTreeTuner, PlantedTunerOffIsCaught) {
  const ScopedFault planted(Fault::nccl_nvls_tree_off);
  EXPECT_NE(planned("dgx-h100-cluster", false), "nvls_tree x16") << "the planted bug went unnoticed";
}

namespace {
// Checks the channel property above for every case; returns the first few failures.
std::vector<std::string> channel_property_failures() {
  const HardwareSpec hw = h100_nodes(5);
  const std::string out = run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    std::vector<std::string> fails;
    auto fail = [&](std::string s) {
      if (fails.size() < 5) fails.push_back(std::move(s));
    };
    for (int nodes = 2; nodes <= 5; ++nodes)
      for (int per_node = 2; per_node <= 8; ++per_node) {
        const auto gpus = ranks_of(nodes, per_node);
        const int n = static_cast<int>(gpus.size());
        const auto heads = nvls_heads(*p, gpus);
        const int h = static_cast<int>(heads.at(0).size());
        if (h != per_node) fail(fmt::format("{}x{}: {} heads, expected one per GPU (each has a NIC)", nodes, per_node, h));
        for (int channels = 1; channels <= 2 * h + 2; ++channels) {
          const auto tcs = nvls_tree_channels(*p, gpus, channels);
          std::map<int, int> served;  // head rank -> channels among the first 2H
          for (int c = 0; c < channels; ++c) {
            const TreeChannel& tc = tcs[static_cast<size_t>(c)];
            const std::string where = fmt::format("{} nodes x {}, channel {} of {}", nodes, per_node, c, channels);
            auto node_of = [&](int r) { return p->node_of_gpu(gpus[static_cast<size_t>(r)]); };
            // A node's head in this channel: its one rank whose parent is elsewhere (or none).
            std::map<int, std::vector<int>> head_of;
            int roots = 0;
            for (int r = 0; r < n; ++r) {
              const int par = tc.parent[static_cast<size_t>(r)];
              if (par < 0 || node_of(par) != node_of(r)) head_of[node_of(r)].push_back(r);
              if (par < 0) {
                ++roots;
                if (r != tc.root) fail(where + ": a parentless rank is not the root");
                continue;
              }
              int q = r, steps = 0;  // reaches the root without a cycle
              while (tc.parent[static_cast<size_t>(q)] >= 0 && steps <= n) q = tc.parent[static_cast<size_t>(q)], ++steps;
              if (q != tc.root) fail(where + fmt::format(": rank {} does not reach the root", r));
            }
            if (roots != 1) fail(where + fmt::format(": {} roots", roots));
            for (int v = 0; v < nodes; ++v) {
              if (head_of[v].size() != 1) {
                fail(where + fmt::format(": node {} has {} heads", v, head_of[v].size()));
                continue;
              }
              const int head = head_of[v][0];
              if (c < 2 * h) ++served[head];
              const int par = tc.parent[static_cast<size_t>(head)];
              if (par >= 0 && p->local_index(gpus[static_cast<size_t>(par)]) != p->local_index(gpus[static_cast<size_t>(head)]))
                fail(where + fmt::format(": head {}'s parent {} is another GPU (another rail)", head, par));
              for (int r = 0; r < n; ++r)
                if (node_of(r) == v && r != head && tc.parent[static_cast<size_t>(r)] != head)
                  fail(where + fmt::format(": rank {}'s parent is not its node's head {}", r, head));
            }
          }
          if (channels == 2 * h)
            for (const auto& node_heads : heads)
              for (int r : node_heads)
                if (served[r] != 2)
                  fail(fmt::format("{} nodes x {}: GPU of rank {} heads {} of {} channels, not 2", nodes, per_node, r,
                                   served[r], channels));
        }
      }
    engine.release();
    std::string joined;
    for (const auto& f : fails) joined += f + "\n";
    return joined;
  });
  std::vector<std::string> out_lines;
  size_t start = 0;
  for (size_t i = out.find('\n'); i != std::string::npos; start = i + 1, i = out.find('\n', start))
    out_lines.push_back(out.substr(start, i - start));
  return out_lines;
}
}  // namespace

TEST(NvlsTreeChannels, HeadsAreRailAlignedAndEachServesTwoChannels) {
  const auto fails = channel_property_failures();
  EXPECT_TRUE(fails.empty()) << fails.front();
}

TEST(NvlsTreeChannels, PlantedOneHeadIsCaught) {
  const ScopedFault planted(Fault::nvls_tree_one_head);
  EXPECT_FALSE(channel_property_failures().empty()) << "the planted bug went unnoticed";
}

namespace {
// Bytes on each NIC's link to the switch (n1.nic<j>.ib, both directions) of node 1 for a
// 1 GiB NVLS-tree all-reduce over `gpus` of 4 nodes (the large-N traffic of the plan).
std::vector<double> nic_bytes_node1(const std::vector<int>& gpus) {
  const HardwareSpec hw = h100_nodes(4);
  const std::string out = run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    CollectiveSettings s;
    s.algorithm = CollectiveAlgorithm::nvls_tree;
    const CollectiveCall call = all_reduce_bytes(Bytes{1} << 30);
    const CollectivePlan plan = plan_collective(*p, gpus, call, s);
    std::map<int, double> by_nic;
    for (const auto& [l, b] : large_n_traffic(*p, gpus, call, plan, s)) {
      const std::string name = p->link_name(l);
      int nic = -1, used = 0;
      if (std::sscanf(name.c_str(), "n1.nic%d.ib%n", &nic, &used) == 1 && used > 0 &&
          (name.substr(static_cast<size_t>(used)) == "_UP" || name.substr(static_cast<size_t>(used)) == "_DOWN"))
        by_nic[nic] += static_cast<double>(b);
    }
    std::string o;
    for (int j = 0; j < 8; ++j) o += fmt::format("{:.17g} ", by_nic[j]);
    engine.release();
    return o;
  });
  std::vector<double> v;
  size_t pos = 0;
  for (int j = 0; j < 8; ++j) {
    size_t used = 0;
    v.push_back(std::stod(out.substr(pos), &used));
    pos += used;
  }
  return v;
}
// The first `k` NICs carry equal bytes (within 1 %), more than none, and the rest none.
bool nics_balanced(const std::vector<double>& v, size_t k = 8) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.begin() + static_cast<long>(k));
  return *lo > 0 && *hi <= *lo * 1.01 && std::all_of(v.begin() + static_cast<long>(k), v.end(), [](double b) { return b == 0; });
}
}  // namespace

// Also where nodes hold different numbers of ranks (8, 4, 8, 8): the plan takes the node
// with the fewest heads (4: 8 channels), and node 1's four NICs carry equal shares.
TEST(NvlsTreeTraffic, EveryNicOfANodeCarriesItsShare) {
  const auto v = nic_bytes_node1(test::first_gpus(32));
  EXPECT_TRUE(nics_balanced(v)) << fmt::format("{}", fmt::join(v, " "));
  std::vector<int> uneven = ranks_of(1, 8);
  for (int g = 8; g < 12; ++g) uneven.push_back(g);
  for (int g = 16; g < 32; ++g) uneven.push_back(g);
  const auto w = nic_bytes_node1(uneven);
  EXPECT_TRUE(nics_balanced(w, 4)) << fmt::format("{}", fmt::join(w, " "));
}

TEST(NvlsTreeTraffic, PlantedOneHeadIsCaught) {
  const ScopedFault planted(Fault::nvls_tree_one_head);
  EXPECT_FALSE(nics_balanced(nic_bytes_node1(test::first_gpus(32)))) << "the planted bug went unnoticed";
}

namespace {
// One NVLS-tree all-reduce of `bytes` on 2 nodes x 4 GPUs in the given formulation: with
// NCCL's model (8 pieces in flight, NCCL's chunks: large-N only), the large-N time by
// `method`; bare (nccl_model off: one piece in flight), the group's time.
Seconds nvls_tree_time(Bytes bytes, Formulation f, bool nccl_model = false,
                       LargeNMethod method = LargeNMethod::automatic) {
  const HardwareSpec hw = h100_nodes(2);
  const std::vector<int> gpus = ranks_of(2, 4);
  CollectiveSettings s;
  s.algorithm = CollectiveAlgorithm::nvls_tree;
  s.formulation = f;
  s.nccl_model = nccl_model;
  std::shared_ptr<CollectiveGroup> group;
  const std::string out = run_simulation(
      hw, [&](Platform& p) { group = test::start_collective(p, gpus, all_reduce_bytes(bytes), s); },
      [&](Platform& p) {
        const auto& rec = group->records().at(0);
        if (rec.plan.algorithm != CollectiveAlgorithm::nvls_tree) return std::string("-1");
        if (!nccl_model) return fmt::format("{:.17g}", rec.end_s - rec.start_s);
        if (rec.plan.pieces_in_flight != kNcclSteps || rec.plan.formulation != Formulation::large_n)
          return std::string("-2");
        return fmt::format("{:.17g}", collective_time_large_n(p, gpus, all_reduce_bytes(bytes), rec.plan, s, method));
      });
  return std::stod(out);
}
}  // namespace

// Invariant: on the bare links (one piece in flight), the large-N NVLS-tree (replay of the
// same transfers) is within 3 % of the exact SimGrid actors.
TEST(NvlsTreeFormulations, LargeNWithinThreePercentOfExactOnTwoNodes) {
  for (Bytes bytes : {Bytes{1} << 20, Bytes{64} << 20, Bytes{256} << 20}) {
    const Seconds exact = nvls_tree_time(bytes, Formulation::exact);
    const Seconds large = nvls_tree_time(bytes, Formulation::large_n);
    ASSERT_GT(exact, 0) << "nvls_tree did not run";
    EXPECT_NEAR(large / exact, 1.0, 0.03) << bytes << " B: large-N " << large << " s, exact " << exact << " s";
  }
}

// Invariant: with NCCL's model the tree keeps NCCL_STEPS pieces in flight, which SimGrid's
// comms cannot (their latency comes before their bytes): the exact formulation is refused
// with a message that says why, and the large-N replay and the estimate agree within 3 %.
TEST(NvlsTreeFormulations, PipelinedTreeRunsLargeNWhereReplayAndEstimateAgree) {
  const std::string refusal = run_in_child_process([]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, h100_nodes(2));
    CollectiveSettings s;
    s.algorithm = CollectiveAlgorithm::nvls_tree;
    s.formulation = Formulation::exact;
    std::string out = "planned";
    try {
      plan_collective(*p, ranks_of(2, 4), all_reduce_bytes(Bytes{64} << 20), s);
    } catch (const std::invalid_argument& e) {
      out = e.what();
    }
    engine.release();
    return out;
  });
  EXPECT_NE(refusal.find("no exact formulation: it keeps 8 pieces in flight per hop"), std::string::npos) << refusal;
  for (Bytes bytes : {Bytes{1} << 20, Bytes{64} << 20, Bytes{256} << 20}) {
    const Seconds replay = nvls_tree_time(bytes, Formulation::large_n, true, LargeNMethod::automatic);
    const Seconds estimate = nvls_tree_time(bytes, Formulation::large_n, true, LargeNMethod::estimate);
    ASSERT_GT(replay, 0) << "nvls_tree did not run pipelined in large-N";
    EXPECT_NEAR(estimate / replay, 1.0, 0.03) << bytes << " B: estimate " << estimate << " s, replay " << replay << " s";
  }
}

namespace {
// The rail folds (estimate.hpp) against the estimate over every channel: NVLS-tree (head 0's
// two channels for all 8 heads') and the tree (channels 0 and 1, both trees over chains from
// GPU 0, turned by 1 GPU for all 16), one and NCCL_STEPS pieces in flight, 512 and 64 KiB pieces,
// on dgx-h100-cluster and dgx-a100-cluster nodes, a plain rail fat-tree and one whose leaf
// uplinks are 4x oversubscribed (2 nodes per leaf, so most tree edges cross them and they
// bound), for each node count and size: "equal" when every folded estimate is within 1e-9
// of the full one, else the first miss.
std::string fold_verdict() {
  std::string verdict;
  for (const char* name : {"dgx-h100-cluster", "dgx-a100-cluster"})
    for (double oversubscription : {1.0, 4.0})
      for (int nodes : {2, 3, 5, 8}) {
        HardwareSpec hw = with_nodes(load_hardware(name, kHardwareLibrary), nodes);
        if (oversubscription > 1) {
          hw.network->nodes_per_leaf = 2;
          hw.network->oversubscription = oversubscription;
        }
        validate_hardware(hw);
        const bool nvls = hw.nvswitch && hw.nvswitch->in_switch_reduction;
        verdict += run_in_child_process([&]() {
          auto engine = make_engine();
          auto p = Platform::build(*engine, hw);
          const auto gpus = test::first_gpus(hw.gpu_count());
          std::string out;
          auto compare = [&](const char* algo, const std::vector<TreeChannel>& every, const std::vector<TreeChannel>& two,
                             RailFold fold, RailFold expected) {
            if (fold.copies != expected.copies || fold.step != expected.step)
              out += fmt::format("{} {} nodes: rail fold {} x {}, expected {} x {}; ", algo, nodes, fold.copies,
                                 fold.step, expected.copies, expected.step);
            for (int in_flight : {1, kNcclSteps}) {
              TreeEstimator full(*p, gpus, every, TreeEstimator::kHeadPieces, {}, in_flight);
              TreeEstimator folded(*p, gpus, two, TreeEstimator::kHeadPieces, fold, in_flight);
              for (Bytes piece_bytes : {Bytes{512} << 10, Bytes{64} << 10}) {
                const Elements piece = static_cast<Elements>(piece_bytes / 4);
                for (Bytes bytes : {Bytes{64} << 10, Bytes{4} << 20, Bytes{256} << 20}) {
                  const CollectiveCall call = all_reduce_bytes(bytes);
                  const Seconds a = full.estimate(call, piece), b = folded.estimate(call, piece);
                  if (std::abs(a - b) > 1e-9 * a && out.empty())
                    out = fmt::format("{} on {} {} nodes, oversubscription {}, {} B in {} B pieces, {} in flight: "
                                      "folded {:.9g} s, every channel {:.9g} s; ",
                                      algo, name, nodes, oversubscription, bytes, piece_bytes, in_flight, b, a);
                }
              }
            }
          };
          if (nvls)
            compare("nvls_tree", nvls_tree_channels(*p, gpus, 16), nvls_tree_channels(*p, gpus, 2),
                    nvls_tree_rail_fold(*p, gpus, 16), {8, 1});
          compare("tree", tree_channels(*p, gpus, 16), tree_channels(*p, gpus, 2), tree_rail_fold(*p, gpus, 16), {8, 1});
          engine.release();
          return out;
        });
      }
  return verdict.empty() ? "equal" : verdict;
}
}  // namespace

// Invariant: where the platform looks alike from every rail, the folded NVLS-tree estimate
// (head 0's two channels standing for all 8 heads') equals the estimate over all 16
// channels to rounding, and the folded tree estimate (channels 0 and 1 turned by 2 GPUs)
// the one over all 8, on shared switch ports and on oversubscribed fabric links alike;
// ranks that do not fill their nodes are not folded.
TEST(NvlsTreeFold, FoldedEstimateEqualsTheEstimateOverEveryChannel) {
  EXPECT_EQ(fold_verdict(), "equal");
  const HardwareSpec hw = h100_nodes(2);
  const std::string partial = run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    const int copies = nvls_tree_rail_fold(*p, ranks_of(2, 4), 16).copies;
    engine.release();
    return std::to_string(copies);
  });
  EXPECT_EQ(partial, "1");
}

TEST(NvlsTreeFold, PlantedUnscaledFoldIsCaught) {
  const ScopedFault planted(Fault::nvls_tree_fold_unscaled);
  EXPECT_NE(fold_verdict(), "equal") << "the planted bug went unnoticed";
}
