// Collectives on the twin's modelled links.
//  - Closed form: on a homogeneous switch under the alpha-beta settings, ring all-reduce
//    takes 2(N-1)/N S/B + 2(N-1) a, reduce-scatter and all-gather (N-1)/N S/B + (N-1) a
//    (the expected values come from those formulas, not from dptwin).
//  - The same property run against a planted-bug ring (one step short) fails.
//  - The large-N formulation stays within 1 % of the message-level simulation for
//    N <= 64 and 1 KiB .. 128 MiB within a switched node (rings) and on every hardware
//    file (whole replays); rings where hops differ (NVLink meshes, clusters) 0 .. +30 %
//    above it, and within 1 % for latency-bound calls across nodes; extrapolated
//    broadcast/reduce and tree (larger calls) within 1 % in a node, 10 % (chains) and 2 %
//    (trees) across nodes; the estimates' errors are pinned.
//  - Schedules: ring orders are permutations; the double binary tree is NCCL's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "sim/collectives/collective_exact.hpp"
#include "sim/collectives/large_n/dispatch.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/net/hardware.hpp"
#include "engine/core/fault_injection.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_process.hpp"
#include "verify/support/collective_fixture.hpp"
#include "verify/support/rc_cases.hpp"

namespace sg4 = simgrid::s4u;
using namespace dpt;
using namespace dpt::sim;

namespace {

using test::first_gpus;
using test::kHardwareLibrary;

// One collective, simulated in a child process: its time from the last rank's arrival
// to the last rank's finish, and (same child, same platform) the large-N model's time.
struct Timed {
  Seconds exact_s = 0;
  Seconds model_s = 0;
  std::string algorithm;
  std::string timed_by;  // how the large-N model timed it (LargeNTimedBy)
};

// `model_call` is what the large-N model is asked (the call itself, or a planted bug);
// `method` how it times chains and trees.
Timed time_collective(const HardwareSpec& hw, std::vector<int> gpus, CollectiveCall call, CollectiveSettings s,
                      const std::function<CollectiveCall(CollectiveCall)>& model_call = {},
                      LargeNMethod method = LargeNMethod::automatic) {
  // These tests check the schedules and their formulations on the bare links; NCCL's
  // latency term, protocols and flow bounds are checked in nccl_model_test.
  s.nccl_model = false;
  std::shared_ptr<CollectiveGroup> group;
  auto simulate = [&](const std::function<void(Platform&)>& setup, const std::function<std::string(Platform&)>& finish) {
    return run_simulation(hw, setup, finish);
  };
  const std::string out = simulate(
      [&](Platform& p) {
        plan_collective(p, gpus, call, s);  // a forced algorithm that cannot run throws here, not in an actor
        group = test::start_collective(p, gpus, call, s);
      },
      [&](Platform& p) {
        const auto& rec = group->records().at(0);
        nlohmann::json j;
        j["exact"] = rec.end_s - rec.start_s;
        LargeNTimedBy by{};
        j["model"] = collective_time_large_n(p, gpus, model_call ? model_call(call) : call, rec.plan, s, method, &by);
        j["algorithm"] = collective_algorithm_name(rec.plan.algorithm);
        j["timed_by"] = large_n_timed_by_name(by);
        return j.dump();
      });
  const auto j = nlohmann::json::parse(out);
  return {j["exact"].get<double>(), j["model"].get<double>(), j["algorithm"].get<std::string>(),
          j["timed_by"].get<std::string>()};
}

HardwareSpec any_base() { return load_hardware("dgx-h100", kHardwareLibrary); }

}  // namespace

TEST(SimCollectivesSmoke, RingAllReduceOnHomogeneousSwitch) {
  const double B = 100e9, a = 1e-6;  // a hop crosses two ports: 2 x 0.5 us
  const HardwareSpec hw = homogeneous_switch(any_base(), 8, B, a / 2);
  CollectiveSettings s;
  s.algorithm = CollectiveAlgorithm::ring;
  const Elements count = 64 * kMiB / 4;
  const Timed t = time_collective(hw, first_gpus(8), {CollectiveOp::all_reduce, count, 4, 0}, s);
  // Closed form: 2(N-1)/N S/B + 2(N-1) a.
  const double expected = 2.0 * 7 / 8 * (64.0 * kMiB) / B + 2 * 7 * a;
  EXPECT_NEAR(t.exact_s, expected, expected * 0.005);
  EXPECT_NEAR(t.model_s, expected, expected * 0.005);
}


namespace {

// Runs ring reduce-scatter / all-gather / all-reduce `steps_short` steps short of the
// schedule: a planted bug the closed-form property must catch.
Seconds time_short_ring(const HardwareSpec& hw, int n, const CollectiveCall& call, int steps_short) {
  std::shared_ptr<ExactTransport> transport;
  std::shared_ptr<std::vector<double>> finish = std::make_shared<std::vector<double>>(n, 0.0);
  const std::string out = run_simulation(
      hw,
      [&](Platform& p) {
        transport = std::make_shared<ExactTransport>(p);
        const auto gpus = first_gpus(n);
        const auto orders = ring_orders(p, gpus, 1);
        for (int r = 0; r < n; ++r)
          sg4::Actor::create(fmt::format("rank{}", r), p.gpu_host(r), [&p, transport, finish, orders, r, n, call, steps_short]() {
            const auto& o = orders[0];
            const int pos = static_cast<int>(std::find(o.begin(), o.end(), r) - o.begin());
            const int next = o[(pos + 1) % n], prev = o[(pos + n - 1) % n];
            const int steps = (call.op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1) - steps_short;
            for (int s = 0; s < steps; ++s) {
              const Bytes bytes = piece_count(call.count, n, (pos - s + 2 * n) % n) * call.element_bytes;
              auto sent = transport->send({0, 0, r, next, 0}, p.gpu_host(r), p.gpu_host(next), bytes);
              transport->recv({0, 0, prev, r, 0})->wait();
              sent->wait();
            }
            (*finish)[r] = sg4::Engine::get_clock();
          });
      },
      [&](Platform&) { return fmt::format("{}", *std::max_element(finish->begin(), finish->end())); });
  return std::stod(out);
}

// One generated case of the closed-form property.
struct ClosedFormCase {
  int n;
  Elements count;  // f32 elements: S = 4 count bytes, 1 KiB .. 4 GiB
  double bandwidth;
  double port_latency;
};

rc::Gen<ClosedFormCase> closed_form_cases() {
  return rc::gen::apply(
      [](int n, int log2_kib, int frac, int bw_gb, int lat_ns) {
        // S = 2^log2_kib KiB scaled by (1 + frac/1000), whole f32 elements, capped at 4 GiB.
        const double kib = std::ldexp(1.0, log2_kib) * (1.0 + frac / 1000.0);
        const Elements count = std::min<Elements>(static_cast<Elements>(kib * 1024 / 4), kGiB);
        return ClosedFormCase{n, std::max<Elements>(count, 256), bw_gb * 1e9, lat_ns * 1e-9};
      },
      rc::gen::inRange(2, 65), rc::gen::inRange(0, 23), rc::gen::inRange(0, 1000), rc::gen::inRange(10, 901),
      rc::gen::inRange(50, 5001));
}

// The closed form of a ring collective on a homogeneous switch (hop: bandwidth B,
// latency a = two port traversals), straight from the formulas, not from dptwin.
double closed_form(CollectiveOp op, int n, double bytes, double B, double a) {
  if (op == CollectiveOp::all_reduce) return 2.0 * (n - 1) / n * bytes / B + 2.0 * (n - 1) * a;
  return 1.0 * (n - 1) / n * bytes / B + 1.0 * (n - 1) * a;  // reduce_scatter, all_gather
}

using RingRunner = std::function<Seconds(const HardwareSpec&, int n, const CollectiveCall&)>;

Seconds run_ring_exact(const HardwareSpec& hw, int n, const CollectiveCall& call) {
  CollectiveSettings s;
  s.algorithm = CollectiveAlgorithm::ring;
  s.formulation = Formulation::exact;
  return time_collective(hw, first_gpus(n), call, s).exact_s;
}

void check_closed_form(CollectiveOp op, const RingRunner& run) {
  const ClosedFormCase c = *closed_form_cases();
  const HardwareSpec hw = homogeneous_switch(any_base(), c.n, c.bandwidth, c.port_latency);
  const Seconds t = run(hw, c.n, {op, c.count, 4, 0});
  const double expected = closed_form(op, c.n, 4.0 * c.count, c.bandwidth, 2 * c.port_latency);
  RC_LOG() << collective_op_name(op) << " n=" << c.n << " S=" << 4 * c.count << " B " << c.bandwidth << " a "
           << 2 * c.port_latency << ": simulated " << t << " s, closed form " << expected << " s\n";
  // Invariant: the simulated ring equals the closed form within 0.5 %.
  RC_ASSERT(std::abs(t - expected) <= 0.005 * expected);
}

}  // namespace

TEST(SimCollectivesClosedForm, RingAllReduceMatchesAlphaBeta) {
  DPT_EXPECT_PROPERTY("ring all-reduce = 2(N-1)/N S/B + 2(N-1) a", 25,
                      []() { check_closed_form(CollectiveOp::all_reduce, run_ring_exact); });
}

TEST(SimCollectivesClosedForm, RingReduceScatterMatchesAlphaBeta) {
  DPT_EXPECT_PROPERTY("ring reduce-scatter = (N-1)/N S/B + (N-1) a", 15,
                      []() { check_closed_form(CollectiveOp::reduce_scatter, run_ring_exact); });
}

TEST(SimCollectivesClosedForm, RingAllGatherMatchesAlphaBeta) {
  DPT_EXPECT_PROPERTY("ring all-gather = (N-1)/N S/B + (N-1) a", 15,
                      []() { check_closed_form(CollectiveOp::all_gather, run_ring_exact); });
}

TEST(SimCollectivesClosedForm, LargeNRingMatchesAlphaBeta) {
  // The large-N formulation on the same machines holds the same closed form.
  DPT_EXPECT_PROPERTY("large-N ring all-reduce = 2(N-1)/N S/B + 2(N-1) a", 25, []() {
    check_closed_form(CollectiveOp::all_reduce, [](const HardwareSpec& hw, int n, const CollectiveCall& call) {
      CollectiveSettings s;
      s.algorithm = CollectiveAlgorithm::ring;
      s.formulation = Formulation::large_n;
      return time_collective(hw, first_gpus(n), call, s).exact_s;
    });
  });
}

TEST(SimCollectivesClosedForm, PlantedBugRingOneStepShortIsCaught) {
  DPT_EXPECT_COUNTEREXAMPLE("ring all-reduce one step short", 25, []() {
    check_closed_form(CollectiveOp::all_reduce, [](const HardwareSpec& hw, int n, const CollectiveCall& call) {
      return time_short_ring(hw, n, call, 1);
    });
  });
  DPT_EXPECT_COUNTEREXAMPLE("ring all-gather one step short", 25, []() {
    check_closed_form(CollectiveOp::all_gather, [](const HardwareSpec& hw, int n, const CollectiveCall& call) {
      return time_short_ring(hw, n, call, 1);
    });
  });
}

TEST(SimCollectivesClosedForm, UnplantedShortRingRunnerIsCorrect) {
  // The planted-bug runner with nothing planted passes: the counterexample above is the bug's.
  DPT_EXPECT_PROPERTY("hand-written ring, full step count", 10, []() {
    check_closed_form(CollectiveOp::all_reduce, [](const HardwareSpec& hw, int n, const CollectiveCall& call) {
      return time_short_ring(hw, n, call, 0);
    });
  });
}

// ---- large-N against exact on every hardware file ---------------------------------------

namespace {

// Library machines with at most 64 GPUs (clusters at 8 nodes) whose collectives are NCCL's
// (a host platform's are gloo's: one timed activity, no exact or large-N schedule), and
// at least two GPUs (a one-GPU machine, h200-1x, has no collective to schedule).
std::vector<HardwareSpec> library_machines() {
  std::vector<HardwareSpec> out;
  for (const auto& name : list_hardware(kHardwareLibrary)) {
    HardwareSpec hw = load_hardware(name, kHardwareLibrary);
    if (hw.gloo || hw.gpu_count() < 2) continue;
    if (hw.network && hw.nodes > 1) hw = with_nodes(hw, 8);
    out.push_back(hw);
  }
  return out;
}

void check_large_n_against_exact(const HardwareSpec& hw, CollectiveAlgorithm algo, std::vector<CollectiveOp> ops,
                                 int min_ranks, double tolerance,
                                 const std::function<CollectiveCall(CollectiveCall)>& model_call = {},
                                 LargeNMethod method = LargeNMethod::automatic, int max_ranks = 64,
                                 int min_log2_elements = 8, int max_log2_elements = 24,
                                 double tolerance_below = -1) {
  const int max_n = std::min(max_ranks, hw.gpu_count());
  const int n = *rc::gen::inRange(min_ranks, max_n + 1);
  // NVLS-tree needs 2 GPUs on every node (NCCL's NVLS does).
  if (algo == CollectiveAlgorithm::nvls_tree) RC_PRE(n % hw.gpus_per_node != 1);
  const CollectiveOp op = *rc::gen::elementOf(ops);
  // By default 1 KiB .. 128 MiB, whole f32 elements.
  const Elements count = std::max<Elements>(
      256, static_cast<Elements>(std::ldexp(1.0, *rc::gen::inRange(min_log2_elements, max_log2_elements + 1)) *
                                 (1.0 + *rc::gen::inRange(0, 1001) / 1000.0)));
  CollectiveSettings s;
  s.algorithm = algo;
  s.formulation = Formulation::exact;
  const bool rooted = op == CollectiveOp::broadcast || op == CollectiveOp::reduce;
  const int root = rooted ? *rc::gen::inRange(0, n) : 0;
  const Timed t = time_collective(hw, first_gpus(n), {op, count, 4, root}, s, model_call, method);
  RC_LOG() << hw.name << " " << collective_op_name(op) << " " << collective_algorithm_name(algo) << " n=" << n
           << " root=" << root << " S=" << 4 * count
           << (method == LargeNMethod::estimate ? " (estimate)" : method == LargeNMethod::extrapolate ? " (extrapolated)" : "") << ": exact " << t.exact_s << " s, large-N "
           << t.model_s << " s\n";
  // DPT_PRINT_ERR=1 prints every case's relative error: how the figures quoted below were gathered.
  if (std::getenv("DPT_PRINT_ERR")) std::fprintf(stderr, "ERR%s %s %s n=%d S=%lld %+.4f %%\n", method == LargeNMethod::estimate ? "-EST" : method == LargeNMethod::extrapolate ? "-EXT" : "", hw.name.c_str(), collective_op_name(op), n, (long long)(4 * count), 100 * (t.model_s - t.exact_s) / t.exact_s);
  // Invariant: the large-N formulation is within `tolerance` of the message-level simulation
  // (below it within `tolerance_below` when that is given).
  RC_ASSERT(t.model_s - t.exact_s <= tolerance * t.exact_s);
  RC_ASSERT(t.exact_s - t.model_s <= (tolerance_below >= 0 ? tolerance_below : tolerance) * t.exact_s);
}

CollectiveCall eighth_of_the_buffer(CollectiveCall c) {
  c.count /= 8;
  return c;
}

}  // namespace

namespace {

// The ring's large-N formulation (ring_channel_path over each hop's drain under one step's
// load) follows the exact one's waits: a rank forwards a chunk once it arrived, and a
// channel's sends leave a hop's drain apart. Where every hop of a ring is alike (a node on
// NVSwitch or a PCIe switch) the two agree within 1 %. Where hops differ (DGX-1's NVLink
// pairs of one or two links; the network hops of a cluster) the channels of the exact
// simulation drift apart and share the links less than one step's load says, so the
// large-N time is an upper bound: over 200 cases per file (2026-12-07, DPT_PRINT_ERR)
// dgx1-v100 0 .. +7.1 % (190 within 1 %), dgx-a100-cluster 0 .. +24.9 % and
// dgx-h100-cluster 0 .. +27.1 % (178 of 200 within 1 %, 194 within 10 %; the largest at
// 5-45 MB on 3-8 nodes), never below. The lock-step ring before it was further above
// still (every step paid the network hop's latency).
std::vector<HardwareSpec> switched_single_nodes() {
  std::vector<HardwareSpec> out;
  for (const HardwareSpec& hw : library_machines())
    if (hw.nodes == 1 && !hw.nvlink) out.push_back(hw);
  return out;
}
std::vector<HardwareSpec> meshes_and_clusters() {
  std::vector<HardwareSpec> out;
  for (const HardwareSpec& hw : library_machines())
    if (hw.nodes > 1 || hw.nvlink) out.push_back(hw);
  return out;
}
const std::vector<CollectiveOp> kRingOps = {CollectiveOp::all_reduce, CollectiveOp::reduce_scatter,
                                            CollectiveOp::all_gather};

}  // namespace

TEST(SimCollectivesLargeN, RingWithinOnePercentOfExactWithinASwitchedNode) {
  for (const HardwareSpec& hw : switched_single_nodes()) {
    DPT_EXPECT_PROPERTY("large-N ring within 1 % of exact on " + hw.name, 8,
                        [&]() { check_large_n_against_exact(hw, CollectiveAlgorithm::ring, kRingOps, 2, 0.01); });
  }
}

TEST(SimCollectivesLargeN, RingAnUpperBoundWithinThirtyPercentOnNvlinkMeshesAndClusters) {
  for (const HardwareSpec& hw : meshes_and_clusters()) {
    DPT_EXPECT_PROPERTY("large-N ring within 0 .. +30 % of exact on " + hw.name, 8, [&]() {
      check_large_n_against_exact(hw, CollectiveAlgorithm::ring, kRingOps, 2, 0.30, {}, LargeNMethod::automatic, 64, 8,
                                  24, 0.005);
    });
  }
}

// Latency-bound calls (256 B .. 16 KiB) across nodes: the route latencies of the chunk's
// path (each network hop it crosses, not steps x the slowest hop) within 1 %; a lock-step
// ring fails it (on 2 nodes of 8 GPUs an all_gather pays 15 network hops instead of 2).
TEST(SimCollectivesLargeN, RingLatencyAlongTheChunksPathAcrossNodes) {
  for (const HardwareSpec& hw : meshes_and_clusters()) {
    if (hw.nodes == 1) continue;
    DPT_EXPECT_PROPERTY("large-N small ring within 1 % of exact on " + hw.name, 8, [&]() {
      check_large_n_against_exact(hw, CollectiveAlgorithm::ring, kRingOps, 9, 0.01, {}, LargeNMethod::automatic, 64, 6,
                                  12);
    });
  }
}

TEST(SimCollectivesLargeN, PlantedBugLockStepRingIsCaught) {
  const ScopedFault planted(Fault::ring_lock_step_latency);
  const HardwareSpec hw = with_nodes(load_hardware("dgx-h100-cluster", kHardwareLibrary), 2);
  DPT_EXPECT_COUNTEREXAMPLE("lock-step large-N ring (every step pays the network hop)", 30, [&]() {
    check_large_n_against_exact(hw, CollectiveAlgorithm::ring, kRingOps, 9, 0.01, {}, LargeNMethod::automatic, 64, 6, 12);
  });
}

// Ring broadcast and reduce (pipelined chains): for N <= 64 and up to 128 MiB every call
// is within kLargeNReplayMaxChainTransfers and replayed under the sharing rule the exact
// formulation's SimGrid solver applies (large_n/replay.hpp). Within one node (every
// single-node file) measured over ~1,400 random cases within 0.001 %.
TEST(SimCollectivesLargeN, ChainWithinOneTenthPercentOfExactOnSingleNodes) {
  for (const HardwareSpec& hw : library_machines()) {
    if (hw.nodes > 1) continue;
    DPT_EXPECT_PROPERTY("large-N broadcast/reduce within 0.1 % of exact on " + hw.name, 8, [&]() {
      check_large_n_against_exact(hw, CollectiveAlgorithm::ring, {CollectiveOp::broadcast, CollectiveOp::reduce}, 2,
                                  0.001);
    });
  }
}

// Across nodes, chains of more than a few MiB contend on NIC and PCIe links, and the
// phase pattern their hops settle into depends on the order of near-simultaneous events.
// With SimGrid's event times at 1 ps (sim_process.cpp; at its default 1 ns the exact
// simulation moved 2 % for 0.0014 % more bytes and differed from the replay by up to
// 3.8 %) the replay follows it: measured within 1e-5 over ~480 random cases. A scan of
// round sizes found two cases apart, by 0.74 % (N = 64, 128 MB) and 1.13 % (N = 16,
// 128 MB), where the two simulations' floating-point event orders diverge; changing
// SimGrid's precision from 1e-11 to 1e-10 s moves the exact time of the first by 0.5 %.
// A random case of a later run diverged by 2.65 % (dgx-a100-cluster, N = 61, broadcast from
// rank 58 of 46,976,204 B: exact 956.1 us, replay 930.7 us; RapidCheck seed
// 8778780450714265067). The property holds 3 %; the planted bug below is off by 87.5 %.
TEST(SimCollectivesLargeN, ChainWithinThreePercentOfExactOnClusters) {
  for (const HardwareSpec& hw : library_machines()) {
    if (hw.nodes < 2) continue;
    DPT_EXPECT_PROPERTY("large-N broadcast/reduce within 3 % of exact on " + hw.name, 8, [&]() {
      check_large_n_against_exact(hw, CollectiveAlgorithm::ring, {CollectiveOp::broadcast, CollectiveOp::reduce}, 2,
                                  0.03);
    });
  }
}

TEST(SimCollectivesLargeN, ChainPlantedBugEighthOfTheBufferIsCaught) {
  const HardwareSpec hw = with_nodes(load_hardware("dgx-h100-cluster", kHardwareLibrary), 2);
  DPT_EXPECT_COUNTEREXAMPLE("replayed broadcast fed an eighth of the buffer", 30, [&]() {
    check_large_n_against_exact(hw, CollectiveAlgorithm::ring, {CollectiveOp::broadcast}, 2, 0.001,
                                eighth_of_the_buffer);
  });
}

// The chain estimate (calls above the replay bound whose head is too short to
// extrapolate from: across nodes from about 20 GPUs) is NOT within 1 % of the exact
// simulation: measured over ~1,400 random cases (N up to 64, 1 KiB .. 128 MiB), -0.8 % ..
// +13 % within a node, -3.9 % .. +36 % on the clusters. It overestimates because it drains each link at its full
// (overlap-weighted) load, where max-min sharing gives the share of flows bottlenecked
// elsewhere to the others. The property pins 60 % so a regression shows; DDP uses chains
// only for its construction-time parameter broadcast, not inside the predicted step.
TEST(SimCollectivesLargeN, ChainEstimateWithinSixtyPercentOfExactOnEveryHardwareFile) {
  for (const HardwareSpec& hw : library_machines()) {
    DPT_EXPECT_PROPERTY("large-N broadcast/reduce estimate within 60 % of exact on " + hw.name, 6, [&]() {
      check_large_n_against_exact(hw, CollectiveAlgorithm::ring, {CollectiveOp::broadcast, CollectiveOp::reduce}, 2,
                                  0.60, {}, LargeNMethod::estimate);
    });
  }
}

TEST(SimCollectivesLargeN, ChainEstimatePlantedBugEighthOfTheBufferIsCaught) {
  const HardwareSpec hw = with_nodes(load_hardware("dgx-h100-cluster", kHardwareLibrary), 2);
  // Small broadcasts are latency-bound, where an eighth of the bytes moves the estimate less
  // than its 60 % tolerance: the counterexample takes about 20-30 random cases to find
  // (a CI run missed it within 30), so the search gets 200.
  DPT_EXPECT_COUNTEREXAMPLE("estimated broadcast fed an eighth of the buffer", 200, [&]() {
    check_large_n_against_exact(hw, CollectiveAlgorithm::ring, {CollectiveOp::broadcast}, 2, 0.60,
                                eighth_of_the_buffer, LargeNMethod::estimate);
  });
}

TEST(SimCollectivesLargeN, PlantedBugHalfTheBufferIsCaught) {
  // A model that reads the buffer as half as many elements (a bytes/elements slip).
  const HardwareSpec hw = with_nodes(load_hardware("dgx-h100-cluster", kHardwareLibrary), 2);
  DPT_EXPECT_COUNTEREXAMPLE("large-N ring fed half the buffer", 30, [&]() {
    check_large_n_against_exact(hw, CollectiveAlgorithm::ring, {CollectiveOp::all_reduce}, 2, 0.01,
                                [](CollectiveCall c) {
                                  c.count /= 2;
                                  return c;
                                });
  });
}

// Tree all_reduce across nodes: for N <= 64 and up to 128 MiB every call is within
// kLargeNReplayMaxTreeTransfers and replayed (large_n/replay.hpp); measured over ~480
// random cases within 0.02 %.
TEST(SimCollectivesLargeN, TreeWithinOneTenthPercentOfExactOnClusters) {
  for (const HardwareSpec& hw : library_machines()) {
    if (hw.nodes < 2) continue;
    DPT_EXPECT_PROPERTY("large-N tree within 0.1 % of exact on " + hw.name, 8, [&]() {
      check_large_n_against_exact(hw, CollectiveAlgorithm::tree, {CollectiveOp::all_reduce}, hw.gpus_per_node + 1,
                                  0.001);
    });
  }
}

TEST(SimCollectivesLargeN, TreePlantedBugQuarterOfTheBufferIsCaught) {
  const HardwareSpec hw = with_nodes(load_hardware("dgx-a100-cluster", kHardwareLibrary), 4);
  DPT_EXPECT_COUNTEREXAMPLE("replayed tree fed a quarter of the buffer", 30, [&]() {
    check_large_n_against_exact(hw, CollectiveAlgorithm::tree, {CollectiveOp::all_reduce}, 9, 0.001,
                                [](CollectiveCall c) {
                                  c.count /= 4;
                                  return c;
                                });
  });
}

// The tree estimate (calls above the replay bound whose head is too short to extrapolate
// from, e.g. 16 MiB and more at 1,024 GPUs) is NOT within 1 % of the exact simulation:
// measured over ~480 random cases on the cluster files (N = 9..64, 1 KiB .. 128 MiB)
// -9.1 % .. +5.6 %, largest with partially filled nodes and pipelines of a few pieces. The property pins 12 % so a regression
// shows; tightening it is open work.
TEST(SimCollectivesLargeN, TreeEstimateWithinTwelvePercentOfExactOnClusters) {
  for (const HardwareSpec& hw : library_machines()) {
    if (hw.nodes < 2) continue;
    DPT_EXPECT_PROPERTY("large-N tree estimate within 12 % of exact on " + hw.name, 8, [&]() {
      check_large_n_against_exact(hw, CollectiveAlgorithm::tree, {CollectiveOp::all_reduce}, hw.gpus_per_node + 1, 0.12,
                                  {}, LargeNMethod::estimate);
    });
  }
}

// NVLS-tree all_reduce across nodes of NVLink SHARP switches (dgx-h100-cluster, the one
// library file with them): trees like the tree algorithm's, on 2 x heads channels whose
// nodes' other ranks hang off the head (collectives.hpp). Replayed up to the replay bound:
// within 0.1 % of exact as the tree is (40 random cases within 0.0001 %). The estimate
// (past the replay bound, e.g. at 32,768 ranks; rail-folded on whole nodes): measured over
// 40 random cases (N = 10..64, 1 KiB .. 128 MiB) -5.4 % .. +0.8 % (whole nodes, folded:
// -1.4 % .. -0.05 %). Pinned at 15 %: a later random case overestimated by 12.02 % (11
// ranks, a node of 8 and one of 3, 42,010,148 B: exact 361.7 us, estimate 405.2 us; the
// same at 7ea77b4, before this stop's changes), past the 12 % the tree's estimate holds.
TEST(SimCollectivesLargeN, NvlsTreeWithinOneTenthPercentOfExactOnNvlinkSharpClusters) {
  const HardwareSpec hw = with_nodes(load_hardware("dgx-h100-cluster", kHardwareLibrary), 8);
  DPT_EXPECT_PROPERTY("large-N nvls_tree within 0.1 % of exact on " + hw.name, 8, [&]() {
    check_large_n_against_exact(hw, CollectiveAlgorithm::nvls_tree, {CollectiveOp::all_reduce}, hw.gpus_per_node + 2,
                                0.001);
  });
}

TEST(SimCollectivesLargeN, NvlsTreeEstimateWithinFifteenPercentOfExactOnNvlinkSharpClusters) {
  const HardwareSpec hw = with_nodes(load_hardware("dgx-h100-cluster", kHardwareLibrary), 8);
  DPT_EXPECT_PROPERTY("large-N nvls_tree estimate within 15 % of exact on " + hw.name, 8, [&]() {
    check_large_n_against_exact(hw, CollectiveAlgorithm::nvls_tree, {CollectiveOp::all_reduce}, hw.gpus_per_node + 2,
                                0.15, {}, LargeNMethod::estimate);
  });
}

TEST(SimCollectivesLargeN, TreeEstimatePlantedBugQuarterOfTheBufferIsCaught) {
  const HardwareSpec hw = with_nodes(load_hardware("dgx-a100-cluster", kHardwareLibrary), 4);
  DPT_EXPECT_COUNTEREXAMPLE("estimated tree fed a quarter of the buffer", 30, [&]() {
    check_large_n_against_exact(hw, CollectiveAlgorithm::tree, {CollectiveOp::all_reduce}, 9, 0.12,
                                [](CollectiveCall c) {
                                  c.count /= 4;
                                  return c;
                                },
                                LargeNMethod::estimate);
  });
}

// Above the replay bounds (large_n/replay.hpp) the first K pieces of every channel are
// replayed and the rest extrapolated from the head's steady period. Here K is forced to
// the smallest head the automatic path accepts (2 x pipeline depth + 33: its worst
// case) and the call has k = K + 1 .. 2 K pieces per channel, the last one partly full,
// at N <= 16 so the exact simulation stays affordable (up to ~1.4 GiB).
void check_extrapolated_against_exact(const HardwareSpec& hw, CollectiveAlgorithm algo, std::vector<CollectiveOp> ops,
                                      int min_ranks, int max_ranks, double tolerance,
                                      const std::function<CollectiveCall(CollectiveCall)>& model_call = {}) {
  const int n = *rc::gen::inRange(min_ranks, std::min(max_ranks, hw.gpu_count()) + 1);
  const CollectiveOp op = *rc::gen::elementOf(ops);
  const int nodes = (n + hw.gpus_per_node - 1) / hw.gpus_per_node;
  // The default channel count (asked of the platform) and an upper bound on the
  // pipeline's depth (chain: n - 1 hops; tree: up and down through a node's chain and
  // the tree over nodes), so that k exceeds the head.
  const int channels = std::stoi(run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    const int c = default_channels(*p, first_gpus(n));
    engine.release();
    return std::to_string(c);
  }));
  const int depth = algo == CollectiveAlgorithm::tree
                        ? 2 * (hw.gpus_per_node + static_cast<int>(std::ceil(std::log2(nodes))) + 1)
                        : n - 1;
  const Elements piece = CollectiveSettings{}.pipeline_chunk_bytes / 4;
  const Elements head = 2 * depth + kLargeNExtrapolateMinSteadyPieces + 1;
  const Elements k = head + 1 + *rc::gen::inRange<Elements>(0, head);
  const Elements count = k * channels * piece - *rc::gen::inRange<Elements>(0, channels * piece);
  CollectiveSettings s;
  s.algorithm = algo;
  s.formulation = Formulation::exact;
  const int root = op == CollectiveOp::all_reduce ? 0 : *rc::gen::inRange(0, n);
  const Timed t = time_collective(hw, first_gpus(n), {op, count, 4, root}, s, model_call, LargeNMethod::extrapolate);
  RC_LOG() << hw.name << " " << collective_op_name(op) << " " << collective_algorithm_name(algo) << " n=" << n
           << " root=" << root << " S=" << 4 * count << " k=" << k << " (" << t.timed_by << "): exact " << t.exact_s
           << " s, large-N " << t.model_s << " s\n";
  if (std::getenv("DPT_PRINT_ERR")) std::fprintf(stderr, "ERR-EXT %s %s n=%d S=%lld %+.4f %%\n", hw.name.c_str(), collective_op_name(op), n, (long long)(4 * count), 100 * (t.model_s - t.exact_s) / t.exact_s);
  RC_ASSERT(t.timed_by == std::string("extrapolation"));
  // Invariant: the extrapolated time is within `tolerance` of the message-level simulation.
  RC_ASSERT(std::abs(t.model_s - t.exact_s) <= tolerance * t.exact_s);
}

// Within one node (every file's first node): measured over ~330 random cases 0 .. +0.24 %.
TEST(SimCollectivesLargeN, ExtrapolatedChainWithinOnePercentOfExactWithinANode) {
  for (const HardwareSpec& hw : library_machines()) {
    DPT_EXPECT_PROPERTY("extrapolated broadcast/reduce within 1 % of exact in a node of " + hw.name, 4, [&]() {
      check_extrapolated_against_exact(hw, CollectiveAlgorithm::ring, {CollectiveOp::broadcast, CollectiveOp::reduce},
                                       2, hw.gpus_per_node, 0.01);
    });
  }
}

// Across nodes the message-level simulation is chaotic: the per-piece period of a long
// chain or tree fluctuates by a few percent from piece to piece and can lock into a
// different pattern partway (seen: a 12-GPU tree all-reduce's period ran 27.6 +/- 0.7 us
// for 140 pieces, dipped to 8 us for five, then held 27.5753 us exactly to the end). A
// head of 2 x depth + 129 pieces does not always see the pattern the whole call ends
// in. Measured over ~80 random chains (N = 9..16) -8.1 % .. +3.2 %, most within 1 %,
// and ~300 random trees -1.7 % .. +0.15 %; the chain estimate these calls used before
// was up to +36 % off, the tree estimate -9 .. +7 %. The properties hold 10 % and 2 %.
TEST(SimCollectivesLargeN, ExtrapolatedChainWithinTenPercentOfExactAcrossNodes) {
  for (const HardwareSpec& hw : library_machines()) {
    if (hw.nodes < 2) continue;
    DPT_EXPECT_PROPERTY("extrapolated broadcast/reduce within 10 % of exact across nodes of " + hw.name, 3, [&]() {
      check_extrapolated_against_exact(hw, CollectiveAlgorithm::ring, {CollectiveOp::broadcast, CollectiveOp::reduce},
                                       hw.gpus_per_node + 1, 16, 0.10);
    });
  }
}

TEST(SimCollectivesLargeN, ExtrapolatedTreeWithinTwoPercentOfExactOnClusters) {
  for (const HardwareSpec& hw : library_machines()) {
    if (hw.nodes < 2) continue;
    DPT_EXPECT_PROPERTY("extrapolated tree within 2 % of exact on " + hw.name, 3, [&]() {
      check_extrapolated_against_exact(hw, CollectiveAlgorithm::tree, {CollectiveOp::all_reduce},
                                       hw.gpus_per_node + 1, 16, 0.02);
    });
  }
}

TEST(SimCollectivesLargeN, ExtrapolatedPlantedBugsAreCaught) {
  // Within a node: a model told 10 % fewer bytes (the size of the chain estimate's
  // typical error) fails the 1 % property.
  const HardwareSpec node = load_hardware("dgx-h100", kHardwareLibrary);
  DPT_EXPECT_COUNTEREXAMPLE("extrapolated broadcast fed 90 % of the buffer", 10, [&]() {
    check_extrapolated_against_exact(node, CollectiveAlgorithm::ring, {CollectiveOp::broadcast}, 2, 8, 0.01,
                                     [](CollectiveCall c) {
                                       c.count = c.count * 9 / 10;
                                       return c;
                                     });
  });
  // Across nodes: 90 % of the buffer fails the tree's 2 %, 3/4 of it the chain's 10 %.
  const HardwareSpec cluster = with_nodes(load_hardware("dgx-h100-cluster", kHardwareLibrary), 2);
  DPT_EXPECT_COUNTEREXAMPLE("extrapolated tree fed 90 % of the buffer", 10, [&]() {
    check_extrapolated_against_exact(cluster, CollectiveAlgorithm::tree, {CollectiveOp::all_reduce}, 9, 16, 0.02,
                                     [](CollectiveCall c) {
                                       c.count = c.count * 9 / 10;
                                       return c;
                                     });
  });
  DPT_EXPECT_COUNTEREXAMPLE("extrapolated broadcast across nodes fed 3/4 of the buffer", 10, [&]() {
    check_extrapolated_against_exact(cluster, CollectiveAlgorithm::ring, {CollectiveOp::broadcast}, 9, 16, 0.10,
                                     [](CollectiveCall c) {
                                       c.count = c.count * 3 / 4;
                                       return c;
                                     });
  });
}

// ---- schedules ---------------------------------------------------------------------------

TEST(SimCollectiveSchedules, DoubleBinaryTreeIsNcclsFor14) {
  // NCCL's trees.cc comment: for 14 ranks, 0 -> 8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 13;
  // 2 -> 1, 3; 6 -> 5, 7; 10 -> 9, 11.
  const auto t = double_binary_tree(14);
  const std::vector<int> parent{-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 12};
  EXPECT_EQ(t[0].parent, parent);
  EXPECT_EQ(t[0].root, 0);
  // Tree 1 is the mirror (14 is even): i -> 13 - i.
  for (int r = 0; r < 14; ++r)
    EXPECT_EQ(t[1].parent[13 - r], parent[r] < 0 ? -1 : 13 - parent[r]);
}

namespace {

void check_double_tree(bool planted) {
  const int n = 2 * *rc::gen::inRange(1, 150);  // even: NCCL mirrors tree 0
  const auto t = double_binary_tree(n);
  const TreeShape t1 = planted ? t[0] : t[1];  // planted bug: tree 1 is tree 0 again
  for (const TreeShape* tree : {&t[0], &t1}) {
    int edges = 0;
    for (int r = 0; r < n; ++r) {
      edges += tree->parent[r] >= 0;
      int hops = 0;
      for (int x = r; tree->parent[x] >= 0 && hops <= n; x = tree->parent[x]) ++hops;
      // Invariant: every index reaches the root (a spanning tree, no cycles).
      RC_ASSERT(hops <= n);
    }
    RC_ASSERT(edges == n - 1);
  }
  for (int r = 0; r < n; ++r) {
    // Invariant: no index has children in both trees, so each one forwards (sends twice)
    // in at most one tree -- why NCCL uses two trees.
    RC_ASSERT(t[0].children[r].empty() || t1.children[r].empty());
  }
}

}  // namespace

TEST(SimCollectiveSchedules, DoubleBinaryTreeInteriorInAtMostOneTree) {
  DPT_EXPECT_PROPERTY("double binary tree (even n): spanning, interiors disjoint", 200, []() { check_double_tree(false); });
  DPT_EXPECT_COUNTEREXAMPLE("tree 1 not mirrored (a copy of tree 0)", 200, []() { check_double_tree(true); });
}

TEST(SimCollectiveSchedules, RingOrdersArePermutations) {
  const HardwareSpec hw = with_nodes(load_hardware("dgx-a100-cluster", kHardwareLibrary), 4);
  const std::string out = run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    nlohmann::json j = nlohmann::json::array();
    for (int n : {2, 7, 8, 9, 20, 32})
      for (int c : {1, 2, 8}) {
        const auto orders = ring_orders(*p, first_gpus(n), c);
        bool ok = static_cast<int>(orders.size()) == c;
        for (const auto& o : orders) {
          std::set<int> seen(o.begin(), o.end());
          ok = ok && static_cast<int>(o.size()) == n && static_cast<int>(seen.size()) == n && *seen.begin() == 0 &&
               *seen.rbegin() == n - 1;
        }
        j.push_back(ok);
      }
    // With one channel per NIC, each node's NICs carry exactly one channel out.
    const auto orders = ring_orders(*p, first_gpus(32), 8);
    std::set<int> exits;
    for (const auto& o : orders)
      for (size_t i = 0; i < o.size(); ++i) {
        const int a = o[i], b = o[(i + 1) % o.size()];
        if (a / 8 == 0 && b / 8 != 0) exits.insert(a % 8);
      }
    j.push_back(exits.size() == 8);
    engine.release();
    return j.dump();
  });
  for (const auto& ok : nlohmann::json::parse(out)) EXPECT_TRUE(ok.get<bool>());
}

TEST(SimCollectiveSchedules, DgxOneRingFollowsNvlink) {
  const HardwareSpec hw = load_hardware("dgx1-v100", kHardwareLibrary);
  const std::string out = run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    const auto o = ring_orders(*p, first_gpus(8), 1)[0];
    int nvlink_hops = 0;
    for (size_t i = 0; i < o.size(); ++i) nvlink_hops += hw.nvlink->links_between(o[i], o[(i + 1) % o.size()]) > 0;
    engine.release();
    return std::to_string(nvlink_hops);
  });
  EXPECT_EQ(out, "8");  // every hop of the ring is an NVLink hop (the cube-mesh has a Hamiltonian cycle)
}

// NCCL's ring search uses every NVLink of a DGX-1V GPU (six, datasheet): the default
// channels are link-disjoint NVLink cycles in both directions, so no link direction
// carries two channels and all 6 x 8 = 48 link directions carry one.
TEST(SimCollectiveSchedules, DgxOneChannelsUseEveryNvlinkOnce) {
  const HardwareSpec hw = load_hardware("dgx1-v100", kHardwareLibrary);
  const std::string out = run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    const int channels = default_channels(*p, first_gpus(8));
    std::map<std::pair<int, int>, int> use;  // directed GPU pair -> channels sending over it
    bool all_nvlink = true;
    for (const auto& o : ring_orders(*p, first_gpus(8), channels))
      for (size_t i = 0; i < o.size(); ++i) {
        const int a = o[i], b = o[(i + 1) % o.size()];
        all_nvlink = all_nvlink && hw.nvlink->links_between(a, b) > 0;
        ++use[{a, b}];
      }
    int over = 0, directions = 0;
    for (const auto& [pair, n] : use) {
      over += n > hw.nvlink->links_between(pair.first, pair.second);
      directions += n;
    }
    engine.release();
    return fmt::format("channels {} all_nvlink {} over {} directions {}", channels, all_nvlink, over, directions);
  });
  EXPECT_EQ(out, "channels 6 all_nvlink true over 0 directions 48");
}

TEST(SimCollectivesSelection, ForcedAlgorithmThatCannotRunIsRejected) {
  const HardwareSpec hw = load_hardware("dgx-a100", kHardwareLibrary);
  const std::string out = run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    std::string msgs;
    for (auto a : {CollectiveAlgorithm::tree, CollectiveAlgorithm::nvls}) {
      CollectiveSettings s;
      s.algorithm = a;
      try {
        plan_collective(*p, first_gpus(8), {CollectiveOp::all_reduce, 1024, 4, 0}, s);
      } catch (const std::invalid_argument& e) {
        msgs += std::string(e.what()) + "\n";
      }
    }
    engine.release();
    return msgs;
  });
  EXPECT_EQ(out,
            "algorithm tree cannot run all_reduce here: tree needs ranks on at least 2 nodes\n"
            "algorithm nvls cannot run all_reduce here: nvls needs all ranks on one node whose NVSwitch reduces "
            "in-switch (hardware dgx-a100)\n");
}

// Invariant: a call the group runs untimed (CollectiveGroup::set_timed(false), what a
// prediction does with DDP's construction broadcast) completes when its last rank
// arrives and puts no bytes on any link, and the calls after timing is turned back on
// are timed and accounted as ever: the second of two equal all-reduces lasts the large-N
// model's time plus the plan's extra latency, and the links carry one call's bytes.
// Fails when set_timed is ignored (checked by removing its test in CollectiveGroup::run:
// the first call then lasts as long as the second and the links carry twice the bytes).
TEST(SimCollectivesLargeN, UntimedCallsCompleteAtArrivalAndAccountNoTraffic) {
  const HardwareSpec hw = load_hardware("dgx-h100", kHardwareLibrary);
  const std::vector<int> gpus = first_gpus(8);
  const CollectiveCall call{CollectiveOp::all_reduce, 16 * kMiB / 4, 4, 0};
  CollectiveSettings s;
  s.formulation = Formulation::large_n;
  s.algorithm = CollectiveAlgorithm::ring;
  std::shared_ptr<CollectiveGroup> group;
  const std::string out = run_simulation(
      hw,
      [&](Platform& p) {
        group = std::make_shared<CollectiveGroup>(p, gpus, s);
        group->set_timed(false);
        for (int r = 0; r < group->size(); ++r)
          simgrid::s4u::Actor::create(fmt::format("rank{}", r), p.gpu_host(gpus[static_cast<size_t>(r)]), [r, &group, call] {
            group->run(r, call);
            if (r == 0) group->set_timed(true);  // before rank 0 (and so the last rank) arrives at the second
            group->run(r, call);
          });
      },
      [&](Platform& p) {
        const auto& recs = group->records();
        nlohmann::json j;
        j["untimed_s"] = recs.at(0).end_s - recs.at(0).start_s;
        j["timed_s"] = recs.at(1).end_s - recs.at(1).start_s;
        j["model_s"] = collective_time_large_n(p, gpus, call, recs.at(1).plan, s) + recs.at(1).plan.extra_latency_s;
        Bytes on_links = 0, one_call = 0;
        for (const auto& u : p.link_usage()) on_links += u.bytes;
        for (const auto& [link, bytes] : large_n_traffic(p, gpus, call, recs.at(1).plan, s)) one_call += bytes;
        j["on_links"] = on_links;
        j["one_call"] = one_call;
        return j.dump();
      });
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["untimed_s"].get<double>(), 0.0);
  EXPECT_GT(j["model_s"].get<double>(), 0.0);
  EXPECT_NEAR(j["timed_s"].get<double>(), j["model_s"].get<double>(), 1e-12);
  EXPECT_GT(j["one_call"].get<Bytes>(), 0);
  EXPECT_EQ(j["on_links"].get<Bytes>(), j["one_call"].get<Bytes>());
}
