// Collectives of the host ring communicator: exactness on integer-valued inputs
// (every partial sum is an integer below 2^24, so f32 arithmetic is exact in any
// order and the expected value can be computed by a plain loop), issue-order
// asynchrony, and failures that surface on every rank.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "engine/core/fault_communicator.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/host/host_communicator.hpp"
#include "verify/support/rc_cases.hpp"

namespace dpt {
namespace {

constexpr int kCases = 100;  // per property; each case runs up to 16 rank threads

// One rank's integer-valued input: values in [-1000, 1000], so sums over 16 ranks stay exact.
std::vector<double> gen_values(Elements n) {
  return *rc::gen::container<std::vector<double>>(static_cast<size_t>(n),
                                                  rc::gen::map(rc::gen::inRange(-1000, 1001), [](int v) { return double(v); }));
}

double fold(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return a + b;
    case ReduceOp::max: return std::max(a, b);
    case ReduceOp::min: return std::min(a, b);
  }
  return 0;
}

// Element-wise reduction of the ranks' inputs with a plain loop: the expected value.
// avg divides in the tensor's dtype, as the sum-then-divide definition states.
std::vector<double> expected_reduction(ReduceOp op, const std::vector<std::vector<double>>& in, DType t) {
  std::vector<double> out = in.at(0);
  for (size_t r = 1; r < in.size(); ++r)
    for (size_t i = 0; i < out.size(); ++i) out[i] = fold(op, out[i], in[r][i]);
  if (op == ReduceOp::avg)
    for (auto& v : out)
      v = t == DType::f32 ? double(float(v) / float(in.size())) : v / double(in.size());
  return out;
}

struct Ranks {
  explicit Ranks(int n) : backend(n), comms(make_host_ring_communicators(n)) {}
  HostBackend backend;
  std::vector<std::unique_ptr<Communicator>> comms;
  int size() const { return static_cast<int>(comms.size()); }
  Tensor tensor(int r, const std::vector<double>& v, DType t = DType::f32) {
    Tensor x = Tensor::empty(backend.device(r), {Elements(v.size())}, t);
    tensor_fill_from_f64(x, v);
    return x;
  }
};

ReduceOp gen_op() { return *rc::gen::element(ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min); }

// Property body shared by the real ring and the planted bug.
void all_reduce_is_exact() {
  const int n = *rc::gen::inRange(1, 17);
  // Lengths from 0 to a few chunks per rank, lengths below the rank count included.
  const Elements len = *rc::gen::inRange<Elements>(0, 4 * n + 9);
  const ReduceOp op = gen_op();
  const DType t = *rc::gen::element(DType::f32, DType::f64);
  std::vector<std::vector<double>> in;
  for (int r = 0; r < n; ++r) in.push_back(gen_values(len));
  Ranks g(n);
  std::vector<Tensor> x;
  for (int r = 0; r < n; ++r) x.push_back(g.tensor(r, in[size_t(r)], t));
  g.backend.parallel_for(n, [&](int r) { g.comms[size_t(r)]->all_reduce(x[size_t(r)], {op, 30.0})->wait(); });
  const auto want = expected_reduction(op, in, t);
  for (int r = 0; r < n; ++r) {
    // Invariant: every rank holds exactly the element-wise reduction of all inputs.
    RC_ASSERT(tensor_to_f64_vector(x[size_t(r)]) == want);
  }
}

TEST(HostRing, AllReduceIsExactForAnyRankCountAndLength) {
  DPT_EXPECT_PROPERTY("ring all_reduce exact, N in 1..16", kCases, [] { all_reduce_is_exact(); });
}

TEST(HostRing, PlantedBugSkippingAChunkIsCaught) {
  const ScopedFault planted(Fault::ring_skips_last_all_gather_step);
  DPT_EXPECT_COUNTEREXAMPLE("ring all_reduce that skips its last all-gather step", kCases,
                            [] { all_reduce_is_exact(); });
}

TEST(HostRing, AllReduceClosedFormSum) {
  // x_r[i] = r + i on N ranks sums to N i + N (N - 1) / 2: a closed form, no loop.
  for (int n : {1, 2, 3, 7, 16}) {
    for (Elements len : {Elements(0), Elements(1), Elements(n - 1), Elements(5 * n + 3)}) {
      Ranks g(n);
      std::vector<Tensor> x;
      for (int r = 0; r < n; ++r) {
        std::vector<double> v(static_cast<size_t>(len));
        for (Elements i = 0; i < len; ++i) v[size_t(i)] = double(r + i);
        x.push_back(g.tensor(r, v));
      }
      g.backend.parallel_for(n, [&](int r) { g.comms[size_t(r)]->all_reduce(x[size_t(r)], {})->wait(); });
      for (int r = 0; r < n; ++r) {
        const auto got = tensor_to_f64_vector(x[size_t(r)]);
        for (Elements i = 0; i < len; ++i) EXPECT_EQ(got[size_t(i)], double(n * i + n * (n - 1) / 2)) << n << " ranks, i " << i;
      }
    }
  }
}

TEST(HostRing, BroadcastCopiesTheRootEverywhere) {
  DPT_EXPECT_PROPERTY("broadcast", kCases, [] {
    const int n = *rc::gen::inRange(1, 17);
    const int root = *rc::gen::inRange(0, n);
    const Elements len = *rc::gen::inRange<Elements>(0, 40);
    std::vector<std::vector<double>> in;
    for (int r = 0; r < n; ++r) in.push_back(gen_values(len));
    Ranks g(n);
    std::vector<Tensor> x;
    for (int r = 0; r < n; ++r) x.push_back(g.tensor(r, in[size_t(r)]));
    g.backend.parallel_for(n, [&](int r) { g.comms[size_t(r)]->broadcast(x[size_t(r)], {root, 30.0})->wait(); });
    // Invariant: every rank holds the root's input.
    for (int r = 0; r < n; ++r) RC_ASSERT(tensor_to_f64_vector(x[size_t(r)]) == in[size_t(root)]);
  });
}

TEST(HostRing, ReduceLeavesTheResultOnTheRootOnly) {
  DPT_EXPECT_PROPERTY("reduce", kCases, [] {
    const int n = *rc::gen::inRange(1, 17);
    const int root = *rc::gen::inRange(0, n);
    const Elements len = *rc::gen::inRange<Elements>(0, 40);
    const ReduceOp op = gen_op();
    std::vector<std::vector<double>> in;
    for (int r = 0; r < n; ++r) in.push_back(gen_values(len));
    Ranks g(n);
    std::vector<Tensor> x;
    for (int r = 0; r < n; ++r) x.push_back(g.tensor(r, in[size_t(r)]));
    g.backend.parallel_for(n, [&](int r) { g.comms[size_t(r)]->reduce(x[size_t(r)], {root, op, 30.0})->wait(); });
    // Invariant: the root holds the reduction; every other rank's tensor is unchanged.
    for (int r = 0; r < n; ++r)
      RC_ASSERT(tensor_to_f64_vector(x[size_t(r)]) ==
                (r == root ? expected_reduction(op, in, DType::f32) : in[size_t(r)]));
  });
}

TEST(HostRing, AllGatherConcatenatesInRankOrder) {
  DPT_EXPECT_PROPERTY("all_gather", kCases, [] {
    const int n = *rc::gen::inRange(1, 17);
    const Elements len = *rc::gen::inRange<Elements>(0, 20);
    std::vector<std::vector<double>> in;
    std::vector<double> want;
    for (int r = 0; r < n; ++r) {
      in.push_back(gen_values(len));
      want.insert(want.end(), in.back().begin(), in.back().end());
    }
    Ranks g(n);
    std::vector<Tensor> x, out;
    for (int r = 0; r < n; ++r) {
      x.push_back(g.tensor(r, in[size_t(r)]));
      out.push_back(Tensor::zeros(g.backend.device(r), {len * n}, DType::f32));
    }
    g.backend.parallel_for(n, [&](int r) { g.comms[size_t(r)]->all_gather(out[size_t(r)], x[size_t(r)], {30.0})->wait(); });
    // Invariant: every rank's output is the ranks' inputs concatenated in rank order.
    for (int r = 0; r < n; ++r) RC_ASSERT(tensor_to_f64_vector(out[size_t(r)]) == want);
  });
}

TEST(HostRing, ReduceScatterGivesEachRankItsReducedBlock) {
  DPT_EXPECT_PROPERTY("reduce_scatter", kCases, [] {
    const int n = *rc::gen::inRange(1, 17);
    const Elements block = *rc::gen::inRange<Elements>(0, 12);
    const ReduceOp op = gen_op();
    std::vector<std::vector<double>> in;
    for (int r = 0; r < n; ++r) in.push_back(gen_values(block * n));
    const auto full = expected_reduction(op, in, DType::f32);
    Ranks g(n);
    std::vector<Tensor> x, out;
    for (int r = 0; r < n; ++r) {
      x.push_back(g.tensor(r, in[size_t(r)]));
      out.push_back(Tensor::zeros(g.backend.device(r), {block}, DType::f32));
    }
    g.backend.parallel_for(n, [&](int r) { g.comms[size_t(r)]->reduce_scatter(out[size_t(r)], x[size_t(r)], {op, 30.0})->wait(); });
    for (int r = 0; r < n; ++r) {
      const std::vector<double> want(full.begin() + r * block, full.begin() + (r + 1) * block);
      // Invariant: rank r holds block r of the reduction, and its input is unchanged.
      RC_ASSERT(tensor_to_f64_vector(out[size_t(r)]) == want);
      RC_ASSERT(tensor_to_f64_vector(x[size_t(r)]) == in[size_t(r)]);
    }
  });
}

TEST(HostRing, BarrierReleasesNoRankBeforeAllArrived) {
  for (int n : {1, 2, 3, 5, 8, 16}) {
    Ranks g(n);
    std::atomic<int> arrived{0};
    std::vector<int> seen(static_cast<size_t>(n), -1);
    g.backend.parallel_for(n, [&](int r) {
      // Later ranks arrive later, so a barrier that lets early ranks go would show it.
      std::this_thread::sleep_for(std::chrono::milliseconds(2 * r));
      ++arrived;
      g.comms[size_t(r)]->barrier({30.0})->wait();
      seen[size_t(r)] = arrived.load();
    });
    // Invariant: after the barrier every rank has seen all n arrivals.
    for (int r = 0; r < n; ++r) EXPECT_EQ(seen[size_t(r)], n) << "rank " << r << " of " << n;
  }
}

TEST(HostRing, CollectivesRunAsynchronouslyInIssueOrder) {
  // Each rank issues three all-reduces on different tensors and a broadcast on the
  // first one before waiting on any: the results show issue order was kept.
  const int n = 4;
  Ranks g(n);
  std::vector<std::vector<Tensor>> x(n);
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < 3; ++k) x[size_t(r)].push_back(g.tensor(r, std::vector<double>(10, double((k + 1) * (r + 1)))));
  g.backend.parallel_for(n, [&](int r) {
    std::vector<WorkPtr> works;
    for (int k = 0; k < 3; ++k) works.push_back(g.comms[size_t(r)]->all_reduce(x[size_t(r)][size_t(k)], {}));
    works.push_back(g.comms[size_t(r)]->all_reduce(x[size_t(r)][0], {}));
    for (auto& w : works) w->wait();
  });
  // sum over ranks of (k+1)(r+1) = (k+1) * 10; the first tensor was reduced twice: 10 * 4.
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(tensor_to_f64_vector(x[size_t(r)][0]), std::vector<double>(10, 40.0));
    EXPECT_EQ(tensor_to_f64_vector(x[size_t(r)][1]), std::vector<double>(10, 20.0));
    EXPECT_EQ(tensor_to_f64_vector(x[size_t(r)][2]), std::vector<double>(10, 30.0));
  }
}

// Runs `collectives` all-reduces on every rank of a faulty group and records, per
// rank, the CollectiveError of the first failing one (or nothing).
struct Outcome {
  bool failed = false;
  int failed_at = -1;
  std::string collective, what;
  int rank = -1;
};
std::vector<Outcome> run_faulty(int n, const FaultPlan& plan, int collectives, Seconds timeout_s) {
  HostBackend backend(n);
  auto comms = wrap_with_faults(make_host_ring_communicators(n), plan);
  std::vector<Outcome> out(static_cast<size_t>(n));
  backend.parallel_for(n, [&](int r) {
    Tensor t = Tensor::zeros(backend.device(r), {8}, DType::f32);
    for (int k = 0; k < collectives; ++k) {
      try {
        comms[size_t(r)]->all_reduce(t, {ReduceOp::sum, timeout_s})->wait();
      } catch (const CollectiveError& e) {
        out[size_t(r)] = Outcome{true, k, e.collective(), e.what(), e.rank()};
        return;
      }
    }
  });
  return out;
}

TEST(FaultCommunicator, InjectedFailureSurfacesOnEveryRank) {
  for (int n : {1, 2, 4, 7}) {
    for (int bad = 0; bad < n; bad += 2) {
      FaultPlan plan;
      plan.kind = FaultPlan::Kind::fail;
      plan.rank = bad;
      plan.collective_index = 2;
      plan.cause = "simulated link failure";
      const auto t0 = std::chrono::steady_clock::now();
      const auto out = run_faulty(n, plan, 4, 60.0);
      // The abort wakes every rank at once: nobody waits for the 60 s timeout.
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
      for (int r = 0; r < n; ++r) {
        const Outcome& o = out[size_t(r)];
        // Invariant: collective #2 fails on every rank, naming all_reduce, the rank and the cause.
        EXPECT_TRUE(o.failed) << "rank " << r;
        EXPECT_EQ(o.failed_at, 2) << "rank " << r;
        EXPECT_EQ(o.collective, "all_reduce");
        EXPECT_EQ(o.rank, r);
        EXPECT_NE(o.what.find(fmt::format("all_reduce failed on rank {}", r)), std::string::npos) << o.what;
        EXPECT_NE(o.what.find("simulated link failure"), std::string::npos) << o.what;
      }
    }
  }
}

TEST(FaultCommunicator, LateRankTimesOutOnEveryRank) {
  const int n = 4;
  FaultPlan plan;
  plan.kind = FaultPlan::Kind::delay;
  plan.rank = 1;
  plan.collective_index = 1;
  plan.delay_s = 1.0;
  const auto out = run_faulty(n, plan, 3, 0.2);
  for (int r = 0; r < n; ++r) {
    const Outcome& o = out[size_t(r)];
    // Invariant: the late collective (#1) times out and every rank reports it.
    EXPECT_TRUE(o.failed) << "rank " << r;
    EXPECT_EQ(o.failed_at, 1);
    EXPECT_EQ(o.rank, r);
    EXPECT_NE(o.what.find(fmt::format("all_reduce failed on rank {}", r)), std::string::npos) << o.what;
    EXPECT_NE(o.what.find("timed out after 0.2 s waiting for rank 1"), std::string::npos) << o.what;
  }
}

TEST(HostRing, MismatchedCollectivesFailOnBothRanks) {
  const int n = 2;
  Ranks g(n);
  std::vector<std::string> errors(2);
  g.backend.parallel_for(n, [&](int r) {
    Tensor t = Tensor::zeros(g.backend.device(r), {4}, DType::f32);
    try {
      if (r == 0) g.comms[0]->all_reduce(t, {ReduceOp::sum, 10.0})->wait();
      else g.comms[1]->broadcast(t, {0, 10.0})->wait();
    } catch (const CollectiveError& e) {
      errors[size_t(r)] = e.what();
    }
  });
  for (const auto& e : errors) EXPECT_NE(e.find("mismatched collectives"), std::string::npos) << e;
}

TEST(HostRing, GroupStaysAbortedAfterAFailure) {
  HostBackend backend(2);
  auto comms = make_host_ring_communicators(2);
  Tensor t = Tensor::zeros(backend.device(0), {4}, DType::f32);
  dynamic_cast<AbortableCommunicator&>(*comms[1]).abort("operator request");
  try {
    comms[0]->all_reduce(t, {})->wait();
    FAIL() << "expected CollectiveError";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("operator request"), std::string::npos) << e.what();
  }
}

TEST(HostRing, BadArgumentsAreRejectedAtIssue) {
  HostBackend backend(2);
  auto comms = make_host_ring_communicators(2);
  Tensor t = Tensor::zeros(backend.device(0), {4}, DType::f32);
  EXPECT_THROW(comms[0]->broadcast(t, {5, 1.0}), std::invalid_argument);
  EXPECT_THROW(comms[0]->all_reduce(t, {ReduceOp::sum, 0.0}), std::invalid_argument);
  Tensor wrong = Tensor::zeros(backend.device(0), {5}, DType::f32);
  EXPECT_THROW(comms[0]->all_gather(wrong, t, {}), std::invalid_argument);
  EXPECT_THROW(make_host_ring_communicators(0), std::invalid_argument);
}

}  // namespace
}  // namespace dpt
