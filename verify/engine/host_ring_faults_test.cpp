// The host ring under faults, for every collective: injected delays shorter than the
// timeout, a peer that never arrives, a rank that stops part-way through a sequence
// (its later collectives dropped), and a rank that dies (its communicator destroyed)
// with a collective pending or idle. Invariants: delays below the timeout change no
// result; every other fault is a CollectiveError on every surviving rank that names
// the collective, that rank, and the rank at fault, within the stated timeout (and
// at once when the dead rank's communicator can say so). Written to run under TSan
// (threads, mutexes and condition variables only; no sleeps that decide an outcome).
// Shown to fail on planted bugs: the ring-step fault (the delay property); and a ring
// whose timeout names the waiting rank's left neighbour instead of the rank furthest
// behind failed the other three properties.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/host/host_communicator.hpp"

namespace dpt {
namespace {

using Clock = std::chrono::steady_clock;

const std::vector<std::string> kCollectives = {"all_reduce", "broadcast", "reduce",
                                               "all_gather", "reduce_scatter", "barrier"};

// One rank's buffers for any collective: `in` of `len` elements, `out` of len * n
// (all_gather) or len / n (reduce_scatter; len is a multiple of n).
struct Buffers {
  Tensor in, gathered, scattered;
};

Buffers make_buffers(HostBackend& b, int rank, int n, Elements len, double value) {
  Buffers x{Tensor::empty(b.device(rank), {len}, DType::f32), Tensor::zeros(b.device(rank), {len * n}, DType::f32),
            Tensor::zeros(b.device(rank), {len / n}, DType::f32)};
  tensor_fill_from_f64(x.in, std::vector<double>(static_cast<size_t>(len), value));
  return x;
}

WorkPtr issue(Communicator& c, const std::string& name, Buffers& x, Seconds timeout_s) {
  if (name == "all_reduce") return c.all_reduce(x.in, {ReduceOp::sum, timeout_s});
  if (name == "broadcast") return c.broadcast(x.in, {0, timeout_s});
  if (name == "reduce") return c.reduce(x.in, {0, ReduceOp::sum, timeout_s});
  if (name == "all_gather") return c.all_gather(x.gathered, x.in, {timeout_s});
  if (name == "reduce_scatter") return c.reduce_scatter(x.scattered, x.in, {ReduceOp::sum, timeout_s});
  return c.barrier({timeout_s});
}

struct Failure {
  bool failed = false;
  std::string collective, what;
  int rank = -1;
  double after_s = 0;
};

// Waits on `w`, recording a CollectiveError and when it came.
void wait_recording(const WorkPtr& w, Failure& f, Clock::time_point t0) {
  try {
    w->wait();
  } catch (const CollectiveError& e) {
    f = Failure{true, e.collective(), e.what(), e.rank(), std::chrono::duration<double>(Clock::now() - t0).count()};
  }
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

// Random delays (0 to 20 ms) before each rank issues each collective, far below the
// 30 s timeout: every collective completes and all_reduce's sums are exact (integer
// values). Shown to have teeth with the planted ring-step fault: the same check fails.
TEST(HostRingFaults, DelaysBelowTheTimeoutChangeNoResult) {
  for (const bool planted : {false, true}) {
    std::optional<ScopedFault> fault;
    if (planted) fault.emplace(Fault::ring_skips_last_all_gather_step);
    for (int n : {2, 3, 5, 8}) {
      HostBackend backend(n);
      auto comms = make_host_ring_communicators(n);
      const Elements len = 4 * n;
      std::vector<Buffers> x;
      for (int r = 0; r < n; ++r) x.push_back(make_buffers(backend, r, n, len, r + 1));
      std::vector<int> errors(static_cast<size_t>(n), 0);
      backend.parallel_for(n, [&](int r) {
        std::mt19937 rng(static_cast<unsigned>(1000 * n + r));
        std::uniform_int_distribution<int> delay_ms(0, 20);
        for (int round = 0; round < 3; ++round) {
          std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
          try {
            comms[size_t(r)]->all_reduce(x[size_t(r)].in, {ReduceOp::sum, 30.0})->wait();
            comms[size_t(r)]->barrier({30.0})->wait();
          } catch (const CollectiveError&) {
            ++errors[size_t(r)];
          }
        }
      });
      // sum over ranks of (r + 1) = n(n+1)/2, all-reduced three times: multiplied by n twice more.
      const double want = double(n) * (n + 1) / 2 * n * n;
      bool exact = true;
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(errors[size_t(r)], 0) << "rank " << r;
        for (double v : tensor_to_f64_vector(x[size_t(r)].in)) exact = exact && v == want;
      }
      // Invariant: delays below the timeout change no result (and the check catches a wrong ring).
      EXPECT_EQ(exact, !planted) << "n=" << n << (planted ? " with the planted ring-step fault" : "");
    }
  }
}

// A peer that never arrives: rank `absent` never issues the collective. Every other
// rank fails with the collective's name, its own rank and "waiting for rank <absent>",
// no sooner than the 0.3 s timeout and well within a few seconds of it.
TEST(HostRingFaults, PeerThatNeverArrivesTimesOutNamingItOnEveryRank) {
  const Seconds timeout_s = 0.3;
  for (const auto& name : kCollectives) {
    for (int n : {2, 4, 7}) {
      const int absent = (n * 5 + 1) % n;
      HostBackend backend(n);
      auto comms = make_host_ring_communicators(n);
      std::vector<Buffers> x;
      for (int r = 0; r < n; ++r) x.push_back(make_buffers(backend, r, n, 2 * n, 1));
      std::vector<Failure> f(static_cast<size_t>(n));
      const auto t0 = Clock::now();
      backend.parallel_for(n, [&](int r) {
        if (r == absent) return;
        wait_recording(issue(*comms[size_t(r)], name, x[size_t(r)], timeout_s), f[size_t(r)], t0);
      });
      for (int r = 0; r < n; ++r) {
        if (r == absent) continue;
        const Failure& o = f[size_t(r)];
        SCOPED_TRACE(fmt::format("{} with {} ranks, rank {} absent, rank {}", name, n, absent, r));
        EXPECT_TRUE(o.failed);
        EXPECT_EQ(o.collective, name);
        EXPECT_EQ(o.rank, r);
        EXPECT_TRUE(contains(o.what, fmt::format("{} failed on rank {}", name, r))) << o.what;
        EXPECT_TRUE(contains(o.what, fmt::format("timed out after 0.3 s waiting for rank {}", absent))) << o.what;
        EXPECT_GE(o.after_s, timeout_s);
        EXPECT_LT(o.after_s, timeout_s + 5.0);
      }
    }
  }
}

// A rank that stops part-way (its collectives from #2 on are dropped): collectives #0
// and #1 complete everywhere; #2 fails on every other rank naming the stopped rank
// within the timeout; the group stays aborted, so #3 fails at once.
TEST(HostRingFaults, RankThatStopsPartWayFailsTheNextCollectiveEverywhere) {
  const Seconds timeout_s = 0.3;
  const int n = 4, stopped = 2;
  for (const auto& name : kCollectives) {
    HostBackend backend(n);
    auto comms = make_host_ring_communicators(n);
    std::vector<Buffers> x;
    for (int r = 0; r < n; ++r) x.push_back(make_buffers(backend, r, n, 2 * n, 1));
    std::vector<std::vector<Failure>> f(static_cast<size_t>(n), std::vector<Failure>(4));
    const auto t0 = Clock::now();
    backend.parallel_for(n, [&](int r) {
      for (int k = 0; k < 4; ++k) {
        if (r == stopped && k >= 2) return;
        wait_recording(issue(*comms[size_t(r)], name, x[size_t(r)], timeout_s), f[size_t(r)][size_t(k)], t0);
      }
    });
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE(fmt::format("{}, rank {}", name, r));
      EXPECT_FALSE(f[size_t(r)][0].failed) << f[size_t(r)][0].what;
      EXPECT_FALSE(f[size_t(r)][1].failed) << f[size_t(r)][1].what;
      if (r == stopped) continue;
      for (int k : {2, 3}) {
        const Failure& o = f[size_t(r)][size_t(k)];
        EXPECT_TRUE(o.failed) << "collective #" << k;
        EXPECT_EQ(o.collective, name);
        EXPECT_EQ(o.rank, r);
        EXPECT_TRUE(contains(o.what, fmt::format("waiting for rank {}", stopped))) << o.what;
        EXPECT_LT(o.after_s, timeout_s + 5.0);
      }
    }
  }
}

// A rank that dies with a collective pending (its communicator destroyed, as when its
// thread unwinds): the others fail at once, long before their 60 s timeout, naming the
// dead rank; a rank that dies idle is found by the others' timeout, named likewise.
TEST(HostRingFaults, RankThatDiesIsNamedOnEveryOtherRank) {
  const int n = 4, dead = 1;
  for (const bool pending : {true, false}) {
    for (const auto& name : kCollectives) {
      const Seconds timeout_s = pending ? 60.0 : 0.3;
      HostBackend backend(n);
      auto comms = make_host_ring_communicators(n);
      std::vector<Buffers> x;
      for (int r = 0; r < n; ++r) x.push_back(make_buffers(backend, r, n, 2 * n, 1));
      std::vector<Failure> f(static_cast<size_t>(n));
      std::atomic<bool> died{false};
      const auto t0 = Clock::now();
      backend.parallel_for(n, [&](int r) {
        if (r == dead) {
          WorkPtr w;
          if (pending) w = issue(*comms[size_t(r)], name, x[size_t(r)], timeout_s);
          comms[size_t(r)].reset();  // the rank dies: its communicator goes with it
          died.store(true);
          return;
        }
        while (!died.load()) std::this_thread::yield();  // the others arrive after the death
        wait_recording(issue(*comms[size_t(r)], name, x[size_t(r)], timeout_s), f[size_t(r)], t0);
      });
      for (int r = 0; r < n; ++r) {
        if (r == dead) continue;
        const Failure& o = f[size_t(r)];
        SCOPED_TRACE(fmt::format("{} {}, rank {}", name, pending ? "pending" : "idle", r));
        EXPECT_TRUE(o.failed);
        EXPECT_EQ(o.collective, name);
        EXPECT_EQ(o.rank, r);
        if (pending) {
          EXPECT_TRUE(contains(o.what, fmt::format("the communicator of rank {} was destroyed with collectives pending",
                                                   dead)))
              << o.what;
          EXPECT_LT(o.after_s, 5.0);
        } else {
          EXPECT_TRUE(contains(o.what, fmt::format("waiting for rank {}", dead))) << o.what;
          EXPECT_LT(o.after_s, timeout_s + 5.0);
        }
      }
    }
  }
}

}  // namespace dpt
