// The large-N formulation's fast paths against their definitions: the swept link loads
// against the pairwise sums, and the cached, folded and memoised dispatch (ring orders,
// ring steps folded into classes, tree estimator heads, traffic shapes, schedule_latency's
// memo) against the same quantities computed afresh for each call the way the formulation
// defines them, on two- and three-level fat-trees of 16 to 256 GPUs. Each is shown to
// catch a planted bug.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <rapidcheck/detail/Configuration.h>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/collective_exact.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/collectives/large_n/dispatch.hpp"
#include "sim/collectives/large_n/estimate.hpp"
#include "sim/collectives/large_n/link_sweep.hpp"
#include "sim/collectives/large_n/phases.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_process.hpp"

namespace dpt::sim {
namespace {

const std::string kHardwareDir = std::string(DPT_SOURCE_DIR) + "/scenarios/hardware";

template <typename F> rc::detail::TestResult run_property(F property, int cases) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = cases;
  return rc::detail::checkTestable(property, rc::detail::TestMetadata{}, params);
}

// ---- swept loads ---------------------------------------------------------------------------

// A random incidence: transfers on 1-3 of a few links, built the way link_incidence
// lays it out (incidences in transfer order, grouped by link).
LinkIncidence random_incidence(int transfers, int links) {
  LinkIncidence inc;
  inc.bandwidth.assign(static_cast<size_t>(links), 1e9);
  for (int i = 0; i < transfers; ++i) {
    inc.first.push_back(static_cast<int>(inc.link.size()));
    std::vector<int> mine = *rc::gen::unique<std::vector<int>>(*rc::gen::inRange(1, std::min(3, links) + 1),
                                                                rc::gen::inRange(0, links));
    for (int l : mine) inc.link.push_back(l), inc.owner.push_back(i);
  }
  inc.first.push_back(static_cast<int>(inc.link.size()));
  inc.on_first.assign(static_cast<size_t>(links) + 1, 0);
  for (int l = 0; l < links; ++l) {
    inc.on_first[static_cast<size_t>(l)] = static_cast<int>(inc.on.size());
    for (int k = 0; k < static_cast<int>(inc.link.size()); ++k)
      if (inc.link[static_cast<size_t>(k)] == l) inc.on.push_back(k);
  }
  inc.on_first[static_cast<size_t>(links)] = static_cast<int>(inc.on.size());
  for (int k : inc.on) inc.on_owner.push_back(inc.owner[static_cast<size_t>(k)]);
  return inc;
}

// Per transfer: an interval on a grid of 0.5 us (so ends often tie; zero lengths included)
// and a weight.
struct Intervals {
  std::vector<double> start, end, weight;
};
Intervals random_intervals(int transfers) {
  Intervals v;
  for (int i = 0; i < transfers; ++i) {
    v.start.push_back(*rc::gen::inRange(0, 20) * 0.5e-6);
    v.end.push_back(v.start.back() + *rc::gen::inRange(0, 10) * 0.5e-6);
    v.weight.push_back(*rc::gen::inRange(1, 1000) * 1e6);
  }
  return v;
}

// Invariant: for every transfer i on a link, the swept load equals the pairwise sum over
// the link's transfers o of weight_o x |I_i ∩ I_o| (to 1e-9 of the link's largest
// possible load, the sum of weight x length over its transfers: rounding of the running
// integral). Intervals share endpoints often (times drawn from a small grid), so ties
// and zero-length intervals are covered.
void check_sweep_equals_pairwise() {
  const int transfers = *rc::gen::inRange(1, 60);
  const int links = *rc::gen::inRange(1, 6);
  const LinkIncidence inc = random_incidence(transfers, links);
  const auto [start, end, weight] = random_intervals(transfers);
  std::vector<double> swept, pairwise;
  overlap_loads(inc, start, end, weight, swept);
  overlap_loads_pairwise(inc, start, end, weight, pairwise);
  RC_ASSERT(swept.size() == pairwise.size());
  std::vector<double> scale(static_cast<size_t>(links), 0.0);
  for (size_t k = 0; k < inc.link.size(); ++k) {
    const int i = inc.owner[k];
    scale[static_cast<size_t>(inc.link[k])] += weight[i] * std::max(0.0, end[i] - start[i]);
  }
  for (size_t k = 0; k < swept.size(); ++k) {
    RC_LOG() << "incidence " << k << ": swept " << swept[k] << ", pairwise " << pairwise[k] << "\n";
    RC_ASSERT(std::abs(swept[k] - pairwise[k]) <= 1e-9 * scale[static_cast<size_t>(inc.link[k])]);
  }
}

TEST(LargeNFast, SweptLoadsEqualThePairwiseSums) {
  const auto result = run_property([] { check_sweep_equals_pairwise(); }, 300);
  std::ostringstream why;
  rc::detail::printResultMessage(result, why);
  EXPECT_TRUE(result.is<rc::detail::SuccessResult>()) << why.str();
}

TEST(LargeNFast, PlantedBugSweepDropsOwnTransferIsCaught) {
  const ScopedFault planted(Fault::large_n_sweep_drops_own);
  const auto result = run_property([] { check_sweep_equals_pairwise(); }, 300);
  EXPECT_TRUE(result.is<rc::detail::FailureResult>()) << "the planted bug went unnoticed";
}

// Invariant: a sweep whose links are split between two threads (split_from 0: however
// small) gives every incidence the load the sweep on one thread gives, to the bit, over
// the whole incidence and over a prefix.
void check_split_sweep_equals_one_thread() {
  const int transfers = *rc::gen::inRange(1, 60);
  const int links = *rc::gen::inRange(2, 7);
  const int prefix = *rc::gen::inRange(0, transfers + 1);
  const LinkIncidence inc = random_incidence(transfers, links);
  const auto [start, end, weight] = random_intervals(transfers);
  for (const int t : {transfers, prefix}) {
    std::vector<double> one, two;
    overlap_loads_prefix(inc, t, start, end, weight, one, std::numeric_limits<size_t>::max());
    overlap_loads_prefix(inc, t, start, end, weight, two, 0);
    RC_ASSERT(one.size() == two.size());
    for (size_t k = 0; k < one.size(); ++k) {
      RC_LOG() << "first " << t << " transfers, incidence " << k << ": one thread " << one[k] << ", split "
               << two[k] << "\n";
      RC_ASSERT(one[k] == two[k]);
    }
  }
}

TEST(LargeNFast, SplitSweepEqualsTheSweepOnOneThread) {
  const auto result = run_property([] { check_split_sweep_equals_one_thread(); }, 200);
  std::ostringstream why;
  rc::detail::printResultMessage(result, why);
  EXPECT_TRUE(result.is<rc::detail::SuccessResult>()) << why.str();
}

TEST(LargeNFast, PlantedBugSplitSweepSkipsHalfIsCaught) {
  const ScopedFault planted(Fault::large_n_sweep_split_skips_half);
  const auto result = run_property([] { check_split_sweep_equals_one_thread(); }, 200);
  EXPECT_TRUE(result.is<rc::detail::FailureResult>()) << "the planted bug went unnoticed";
}

// Invariant: the swept loads over the first T transfers of an incidence equal those of
// the incidence built for those T transfers alone (the same links, the same incidences
// in the same order), to the bit: a short tree head placed on a longer head's prefix
// gets the loads its own graph would give.
void check_prefix_sweep_equals_own_incidence() {
  const int transfers = *rc::gen::inRange(1, 60);
  const int links = *rc::gen::inRange(1, 6);
  const int prefix = *rc::gen::inRange(0, transfers + 1);
  const LinkIncidence inc = random_incidence(transfers, links);
  LinkIncidence own = inc;  // the first `prefix` transfers only, laid out as link_incidence would
  own.first.resize(static_cast<size_t>(prefix) + 1);
  own.link.resize(static_cast<size_t>(own.first.back()));
  own.owner.resize(own.link.size());
  own.on.clear();
  for (int l = 0; l < links; ++l) {
    own.on_first[static_cast<size_t>(l)] = static_cast<int>(own.on.size());
    for (int k = 0; k < static_cast<int>(own.link.size()); ++k)
      if (own.link[static_cast<size_t>(k)] == l) own.on.push_back(k);
  }
  own.on_first[static_cast<size_t>(links)] = static_cast<int>(own.on.size());
  own.on_owner.clear();
  for (int k : own.on) own.on_owner.push_back(own.owner[static_cast<size_t>(k)]);
  const auto [start, end, weight] = random_intervals(transfers);
  std::vector<double> on_prefix, alone;
  overlap_loads_prefix(inc, prefix, start, end, weight, on_prefix);
  overlap_loads(own, start, end, weight, alone);
  for (size_t k = 0; k < alone.size(); ++k) {
    RC_LOG() << "incidence " << k << ": on the prefix " << on_prefix[k] << ", alone " << alone[k] << "\n";
    RC_ASSERT(on_prefix[k] == alone[k]);
  }
}

TEST(LargeNFast, PrefixSweptLoadsEqualTheirOwnIncidence) {
  const auto result = run_property([] { check_prefix_sweep_equals_own_incidence(); }, 300);
  std::ostringstream why;
  rc::detail::printResultMessage(result, why);
  EXPECT_TRUE(result.is<rc::detail::SuccessResult>()) << why.str();
}

// ---- the cached dispatch against each call afresh ---------------------------------------------

struct Cluster {
  int nodes = 2;
  bool three_level = false;  // one node per leaf, 4-port switches: pods of 2 leaves under a core
  double oversubscription = 1.0;  // of the leaf (and core) uplinks: past ~8 they are the bottleneck
};

HardwareSpec cluster_hardware(const Cluster& c) {
  HardwareSpec hw = with_nodes(load_hardware("dgx-h100-cluster", kHardwareDir), c.nodes);
  hw.network->oversubscription = c.oversubscription;
  if (c.three_level) {
    hw.network->nodes_per_leaf = 1;
    hw.network->switch_radix = 4;
    hw.network->core_oversubscription = c.oversubscription;
  } else {
    hw.network->nodes_per_leaf = 4;  // several leaves under one spine
  }
  validate_hardware(hw);
  return hw;
}

// The traffic of a call as the formulation defines it: every transfer's bytes on every
// link of its route (what large_n_traffic summed per call before it cached shapes).
std::map<std::string, Bytes> traffic_by_definition(const Platform& p, const std::vector<int>& gpus,
                                                   const CollectiveCall& call, const CollectivePlan& plan) {
  std::map<std::string, Bytes> on;
  const int n = static_cast<int>(gpus.size()), c = plan.channels;
  auto add = [&](int a, int b, Bytes bytes) {
    for (const auto* l : p.route(host_of(p, gpus, a), host_of(p, gpus, b)).links) on[l->get_name()] += bytes;
  };
  if (plan.algorithm == CollectiveAlgorithm::tree || plan.algorithm == CollectiveAlgorithm::nvls_tree) {
    const auto tcs = plan.algorithm == CollectiveAlgorithm::tree ? tree_channels(p, gpus, c) : nvls_tree_channels(p, gpus, c);
    for (int ch = 0; ch < c; ++ch)
      for (int r = 0; r < n; ++r)
        if (tcs[ch].parent[r] >= 0) {
          add(r, tcs[ch].parent[r], piece_count(call.count, c, ch) * call.element_bytes);
          add(tcs[ch].parent[r], r, piece_count(call.count, c, ch) * call.element_bytes);
        }
    return on;
  }
  const auto orders = ring_orders(p, gpus, c);
  if (call.op == CollectiveOp::broadcast) {
    const auto chains = chain_orders(orders, call);
    for (int ch = 0; ch < c; ++ch)
      for (int q = 0; q + 1 < n; ++q) add(chains[ch][q], chains[ch][q + 1], piece_count(call.count, c, ch) * call.element_bytes);
    return on;
  }
  const Bytes per_hop =
      static_cast<Bytes>(static_cast<double>(call.bytes()) * 2 * (n - 1) / (static_cast<double>(n) * c));
  for (const auto& o : orders)
    for (int i = 0; i < n; ++i) add(o[i], o[(i + 1) % n], per_hop);
  return on;
}

// The time of a call computed afresh, with nothing carried over from earlier calls.
Seconds time_by_definition(const Platform& p, const std::vector<int>& gpus, const CollectiveCall& call,
                           const CollectivePlan& plan, const CollectiveSettings& s) {
  const int n = static_cast<int>(gpus.size());
  const Elements piece = pipeline_piece_elements(s, call.element_bytes);
  if (plan.algorithm == CollectiveAlgorithm::tree)
    return tree_estimate(p, gpus, tree_channels(p, gpus, plan.channels), call, piece);
  if (plan.algorithm == CollectiveAlgorithm::nvls_tree)
    return tree_estimate(p, gpus, nvls_tree_channels(p, gpus, plan.channels), call, piece);
  const auto orders = ring_orders(p, gpus, plan.channels);
  if (call.op == CollectiveOp::broadcast) return chain_time(p, gpus, chain_orders(orders, call), call, piece);
  const Bytes chunk = ceil_div(call.count, static_cast<Elements>(n) * plan.channels) * call.element_bytes;
  return ring_time_by_phases(p, gpus, orders, chunk, 0, 2 * (n - 1));
}

// Invariant: a sequence of calls through the large-N dispatch (which keeps ring orders,
// folded ring steps, tree and NVLS-tree heads and traffic shapes from call to call) times each call
// and accounts its traffic exactly as the definition computed afresh for that call does:
// times to 1e-12 relative (the same arithmetic), bytes exactly; and the platform's link
// counters (link_usage, summed by dense link id) hold every call's bytes, link by link. Calls differ in op, size,
// root and channel count, as DDP's buckets and the parameter broadcast do.
void check_dispatch_equals_definition(const Cluster& cluster) {
  const HardwareSpec hw = cluster_hardware(cluster);
  const int n = hw.gpu_count();
  std::vector<CollectiveCall> calls;
  std::vector<int> channels;  // per call: the cache must tell channel counts apart
  for (int i = 0, m = *rc::gen::inRange(3, 7); i < m; ++i) {
    channels.push_back(*rc::gen::element(1, 2, 8));
    const CollectiveOp op = *rc::gen::element(CollectiveOp::all_reduce, CollectiveOp::broadcast);
    const Elements count = *rc::gen::element<Elements>(1, 1000, 262144, 6553600, 33554432) +
                           *rc::gen::inRange<Elements>(0, 4096);
    calls.push_back({op, count, 4, op == CollectiveOp::broadcast ? *rc::gen::inRange(0, n) : 0});
  }
  const std::string out = run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    std::vector<int> gpus(static_cast<size_t>(n));
    for (int g = 0; g < n; ++g) gpus[static_cast<size_t>(g)] = g;
    CollectiveSettings s;
    nlohmann::json rows = nlohmann::json::array();
    std::map<std::string, Bytes> fresh_total;  // every call's traffic by definition, by link name
    for (size_t i = 0; i < calls.size(); ++i)
      for (auto algo : {CollectiveAlgorithm::ring, CollectiveAlgorithm::tree, CollectiveAlgorithm::nvls_tree}) {
        const CollectiveCall& call = calls[i];
        if (algo != CollectiveAlgorithm::ring && call.op != CollectiveOp::all_reduce) continue;
        CollectivePlan plan;
        plan.algorithm = algo;
        plan.channels = channels[i];
        plan.formulation = Formulation::large_n;
        const Seconds fast = collective_time_large_n(*p, gpus, call, plan, s, LargeNMethod::estimate);
        const Seconds fresh = time_by_definition(*p, gpus, call, plan, s);
        std::map<std::string, Bytes> fast_bytes;
        for (const auto& [l, b] : large_n_traffic(*p, gpus, call, plan, s))
          if (b != 0) fast_bytes[p->link_name(l)] += b;
        auto fresh_bytes = traffic_by_definition(*p, gpus, call, plan);
        for (auto it = fresh_bytes.begin(); it != fresh_bytes.end();) it = it->second == 0 ? fresh_bytes.erase(it) : ++it;
        p->account_pattern(std::make_shared<const LinkBytes>(large_n_traffic(*p, gpus, call, plan, s)));
        for (const auto& [name, b] : fresh_bytes) fresh_total[name] += b;
        rows.push_back({{"call", fmt::format("{} {} of {} on {} channels", collective_algorithm_name(algo),
                                             collective_op_name(call.op), call.count, plan.channels)},
                        {"fast", fast},
                        {"fresh", fresh},
                        {"traffic_equal", fast_bytes == fresh_bytes}});
      }
    // The platform's counters (summed by dense link id) against the same sums by name.
    std::map<std::string, Bytes> usage;
    for (const auto& u : p->link_usage())
      if (u.bytes != 0) usage[u.link] += u.bytes;
    rows.push_back({{"usage_equal", usage == fresh_total}});
    engine.release();  // the child exits next; SimGrid needs no teardown
    return rows.dump();
  });
  auto rows = nlohmann::json::parse(out);
  RC_ASSERT(rows.back().at("usage_equal").get<bool>());
  rows.erase(rows.size() - 1);
  RC_ASSERT(rows.size() >= calls.size());
  for (const auto& row : rows) {
    const double fast = row.at("fast"), fresh = row.at("fresh");
    RC_LOG() << n << " GPUs" << (cluster.three_level ? " (three levels)" : "") << ", oversubscription "
             << cluster.oversubscription << ", " << row.at("call").get<std::string>() << ": fast " << fast
             << " s, fresh " << fresh << " s\n";
    RC_ASSERT(std::abs(fast - fresh) <= 1e-12 * fresh);
    RC_ASSERT(row.at("traffic_equal").get<bool>());
  }
}

rc::Gen<Cluster> gen_cluster() {
  return rc::gen::exec([] {
    Cluster c;
    c.three_level = *rc::gen::arbitrary<bool>();
    c.nodes = *rc::gen::element(2, 5, 8, 13, 32);  // 16 to 256 GPUs
    c.oversubscription = *rc::gen::element(1.0, 4.0, 16.0);
    return c;
  });
}

TEST(LargeNFast, CachedDispatchEqualsEachCallAfresh) {
  const auto result = run_property([] { check_dispatch_equals_definition(*gen_cluster()); }, 8);
  std::ostringstream why;
  rc::detail::printResultMessage(result, why);
  EXPECT_TRUE(result.is<rc::detail::SuccessResult>()) << why.str();
}

// The dense link ids (Platform::link_id) behind traffic shapes, incidences and link_usage:
// a split-duplex link's two directions sharing one id merges their bytes.
TEST(LargeNFast, PlantedBugLinkIdsSharedByDirectionsIsCaught) {
  const ScopedFault planted(Fault::platform_link_ids_shared_by_directions);
  const auto result = run_property([] { check_dispatch_equals_definition(*gen_cluster()); }, 8);
  EXPECT_TRUE(result.is<rc::detail::FailureResult>()) << "the planted bug went unnoticed";
}

TEST(LargeNFast, PlantedBugCacheKeyWithoutChannelsIsCaught) {
  const ScopedFault planted(Fault::large_n_cache_ignores_channels);
  const auto result = run_property([] { check_dispatch_equals_definition(*gen_cluster()); }, 8);
  EXPECT_TRUE(result.is<rc::detail::FailureResult>()) << "the planted bug went unnoticed";
}

// Invariant: the incidence of a route list repeated t times, built from one copy's
// look-ups, is field for field link_incidence of the list written out t times (link ids,
// incidences, owners, per-link lists): a tree head's pieces share piece 0's routes.
std::string repeated_incidence_verdicts() {
  const HardwareSpec hw = cluster_hardware(Cluster{5, true, 4.0});
  const std::string out = run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    std::vector<const RouteInfo*> routes;
    for (int a = 0; a < hw.gpu_count(); a += 3)  // within and across nodes, some repeated
      for (int b : {(a + 1) % hw.gpu_count(), (a + 9) % hw.gpu_count(), (a * 7 + 5) % hw.gpu_count(), (a + 1) % hw.gpu_count()})
        routes.push_back(&p->route(p->gpu_host(a), p->gpu_host(b)));
    std::string verdict;
    for (int times : {1, 2, 3}) {
      std::vector<const RouteInfo*> written;
      for (int q = 0; q < times; ++q) written.insert(written.end(), routes.begin(), routes.end());
      const LinkIncidence a = link_incidence_repeated(routes, times), b = link_incidence(written);
      const bool same = a.first == b.first && a.link == b.link && a.owner == b.owner && a.bandwidth == b.bandwidth &&
                        a.on_first == b.on_first && a.on == b.on && a.transfers() == times * static_cast<int>(routes.size());
      verdict += fmt::format("{}:{} ", times, same ? "same" : "different");
    }
    engine.release();  // the child exits next; SimGrid needs no teardown
    return verdict;
  });
  return out;
}

TEST(LargeNFast, RepeatedIncidenceEqualsTheWrittenOutList) {
  EXPECT_EQ(repeated_incidence_verdicts(), "1:same 2:same 3:same ");
}

TEST(LargeNFast, PlantedBugRepeatedOwnersUnshiftedIsCaught) {
  const ScopedFault planted(Fault::large_n_repeat_owner_unshifted);
  EXPECT_EQ(repeated_incidence_verdicts(), "1:same 2:different 3:different ");
}

// Tree calls of 1, 2, 3 and more pieces per channel, in the given order, through one
// TreeEstimator (one 3-piece head graph, shorter heads on its prefix, memoised head times
// and periods) and through tree_estimate (a graph of exactly the call's head, afresh).
// The counts are cut so channel 0 gets exactly `pieces` pieces of `piece` elements.
nlohmann::json kept_and_fresh_tree_times(const Cluster& cluster, const std::vector<int>& pieces_per_call,
                                         int in_flight = 1) {
  const HardwareSpec hw = cluster_hardware(cluster);
  const std::string out = run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    std::vector<int> gpus(static_cast<size_t>(hw.gpu_count()));
    for (int g = 0; g < hw.gpu_count(); ++g) gpus[static_cast<size_t>(g)] = g;
    const int channels = 4;
    const auto tcs = tree_channels(*p, gpus, channels);
    const Elements piece = pipeline_piece_elements(CollectiveSettings{}, 4);
    TreeEstimator kept(*p, gpus, tcs, TreeEstimator::kHeadPieces, {}, in_flight);
    nlohmann::json rows = nlohmann::json::array();
    for (int k : pieces_per_call) {
      const CollectiveCall call{CollectiveOp::all_reduce, static_cast<Elements>(channels) * (piece * (k - 1) + piece / 3), 4, 0};
      rows.push_back({{"pieces", k},
                      {"kept", kept.estimate(call, piece)},
                      {"fresh", tree_estimate(*p, gpus, tcs, call, piece, in_flight)}});
    }
    engine.release();  // the child exits next; SimGrid needs no teardown
    return rows.dump();
  });
  return nlohmann::json::parse(out);
}

// Invariant: a kept TreeEstimator times every call as tree_estimate does afresh, bit for
// bit, whatever the order of calls of 1, 2, 3 or more pieces per channel: a head shorter
// than the kept graph is its prefix (its transfers wait on nothing later, and its links'
// sweeps stop there), and the period is the head's piece 0.
// The same with NCCL_STEPS pieces in flight (pipelined heads, and for longer calls a 2-piece
// head placed once per piece size and the bottleneck link's streams).
TEST(LargeNFast, KeptTreeHeadPrefixEqualsTheCallsOwnHead) {
  for (int in_flight : {1, kNcclSteps})
    for (const Cluster cluster : {Cluster{5, true, 4.0}, Cluster{8, false, 1.0}}) {
      const auto rows = kept_and_fresh_tree_times(cluster, {5, 1, 3, 2, 1, 7, 2}, in_flight);
      ASSERT_EQ(rows.size(), 7u);
      for (const auto& row : rows) {
        const double kept = row.at("kept"), fresh = row.at("fresh");
        EXPECT_GT(fresh, 0.0);
        EXPECT_EQ(kept, fresh) << cluster.nodes << " nodes, " << row.at("pieces").get<int>() << " pieces per channel, "
                               << in_flight << " in flight";
      }
    }
}

TEST(LargeNFast, PlantedBugUncutHeadPrefixIsCaught) {
  const ScopedFault planted(Fault::large_n_head_prefix_uncut);
  const auto rows = kept_and_fresh_tree_times(Cluster{5, true, 4.0}, {5, 1, 2});
  ASSERT_EQ(rows.size(), 3u);
  // The 1- and 2-piece calls are placed with the graph's later pieces: they end later.
  EXPECT_GT(rows[1].at("kept").get<double>(), rows[1].at("fresh").get<double>());
  EXPECT_GT(rows[2].at("kept").get<double>(), rows[2].at("fresh").get<double>());
}

// Invariant: schedule_latency through a memo that earlier calls (other ops, sizes and
// channel counts on the same rank set) filled equals schedule_latency computed afresh,
// for ring, tree and NVLS-tree plans. On a two-level fat-tree of 7 nodes the deepest tree path over
// one tree (5.3e-5 s) differs from that over both (5.6e-5 s), so a memo that mixed up
// channel counts shows.
std::string schedule_memo_verdicts() {
  const HardwareSpec hw = cluster_hardware(Cluster{7, false, 4.0});
  return run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    std::vector<int> gpus(static_cast<size_t>(hw.gpu_count()));
    for (int g = 0; g < hw.gpu_count(); ++g) gpus[static_cast<size_t>(g)] = g;
    ScheduleLatencyMemo memo;
    std::string verdict;
    for (auto algo : {CollectiveAlgorithm::ring, CollectiveAlgorithm::tree, CollectiveAlgorithm::nvls_tree})
      for (int channels : {2, 1, 8, 1, 2})
        for (auto op : {CollectiveOp::all_reduce, CollectiveOp::broadcast}) {
          if (algo != CollectiveAlgorithm::ring && op != CollectiveOp::all_reduce) continue;
          const CollectiveCall call{op, 1000 * channels, 4, 0};
          CollectivePlan plan;
          plan.algorithm = algo;
          plan.channels = channels;
          const Seconds memoised = schedule_latency(*p, gpus, call, plan, &memo);
          const Seconds fresh = schedule_latency(*p, gpus, call, plan);
          if (memoised != fresh)
            verdict += fmt::format("{} {} on {} channels: memo {} s, afresh {} s; ", collective_algorithm_name(algo),
                                   collective_op_name(op), channels, memoised, fresh);
        }
    engine.release();  // the child exits next; SimGrid needs no teardown
    return verdict.empty() ? std::string("equal") : verdict;
  });
}

TEST(LargeNFast, MemoisedScheduleLatencyEqualsAfresh) { EXPECT_EQ(schedule_memo_verdicts(), "equal"); }

TEST(LargeNFast, PlantedBugScheduleMemoWithoutChannelsIsCaught) {
  const ScopedFault planted(Fault::schedule_memo_ignores_channels);
  EXPECT_NE(schedule_memo_verdicts(), "equal") << "the planted bug went unnoticed";
}

}  // namespace
}  // namespace dpt::sim
