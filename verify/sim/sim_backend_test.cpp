// The twin's backend: the kernel cost model, streams, host dispatch (lazy and
// under a GIL), copies on the modelled links, capacity, parallel_for's failures,
// and the communicator's numerics, which must equal the host ring's bit for bit.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "engine/host/host_backend.hpp"
#include "engine/host/host_communicator.hpp"
#include "engine/core/kernels.hpp"
#include "sim/twin/sim_communicator.hpp"
#include "verify/support/sim_test_support.hpp"

namespace dpt {
namespace {

using test::simulate;
using test::TestMachineOptions;

double parse_double(const std::string& s) { return std::stod(s); }

TEST(SimKernelTime, MaxOfComputeAndMemoryPlusLaunch) {
  SimGpuRates r;
  r.model = "g";
  r.peak_flops = {{DType::f32, 1e12}};
  r.compute_efficiency = 0.5;
  r.memory_bandwidth = 1e9;
  r.memory_efficiency = 0.25;
  r.launch_latency_s = 3e-6;
  // flops-bound: 2e12 flops / (1e12 x 0.5) = 4 s; bytes 1e8 / (1e9 x 0.25) = 0.4 s.
  EXPECT_DOUBLE_EQ(sim_kernel_time_s({"gemm", OpKind::compute, 2e12, 50'000'000, 50'000'000}, r, DType::f32), 4.0 + 3e-6);
  // memory-bound: 1e3 flops; 1e9 bytes / 2.5e8 = 4 s.
  EXPECT_DOUBLE_EQ(sim_kernel_time_s({"relu", OpKind::memory, 1e3, 500'000'000, 500'000'000}, r, DType::f32), 4.0 + 3e-6);
  // No peak for f64 on this GPU: an error naming the model and dtype.
  EXPECT_THROW(sim_kernel_time_s({"gemm", OpKind::compute, 1, 0, 0}, r, DType::f64), std::invalid_argument);
  EXPECT_TRUE(sim_op_is_optimizer({"sgd_step", OpKind::memory, 0, 0, 0}));
  EXPECT_FALSE(sim_op_is_optimizer({"gemm_fwd", OpKind::compute, 0, 0, 0}));
}

// Kernels on one shape-only device run back to back on the compute stream: with no
// dispatch cost the device is done after exactly the sum of their times.
TEST(SimDevice, KernelsRunBackToBackOnTheComputeStream) {
  TestMachineOptions o;
  o.launch_latency = 2e-6;
  const std::string out = simulate(o, {.numeric = false}, [](SimBackend& b) {
    Device& d = b.device(0);
    Tensor x = Tensor::empty(d, {64, 128}, DType::f32);
    Tensor w = Tensor::empty(d, {256, 128}, DType::f32);
    Tensor y = Tensor::empty(d, {64, 256}, DType::f32);
    const Seconds t0 = b.now();
    kernel_linear_forward(x, w, nullptr, y);  // 2*64*256*128 flops
    kernel_fill(y, 0.0);                      // 64*256*4 bytes written
    d.synchronize();
    return fmt::format("{:.17g} {}", b.now() - t0, x.data() == nullptr ? 1 : 0);
  });
  std::istringstream in(out);
  double elapsed;
  int null_data;
  in >> elapsed >> null_data;
  EXPECT_EQ(null_data, 1);  // shape-only: no memory behind tensors
  const double gemm = std::max(2.0 * 64 * 256 * 128 / 1e12, (64.0 * 128 + 256.0 * 128 + 64.0 * 256) * 4 / 100e9) + 2e-6;
  const double fill = 64.0 * 256 * 4 / 100e9 + 2e-6;
  EXPECT_NEAR(elapsed, gemm + fill, 1e-12);
}

// Dispatch: with tiny kernels the host is the bottleneck; k ops cost k x dispatch.
// Two workers of one process under a GIL take twice as long as two processes.
TEST(SimBackend, DispatchIsSerialisedUnderTheGilOnlyWithinAProcess) {
  TestMachineOptions o;
  o.dispatch_cost = 10e-6;
  o.gil = true;
  auto run = [&](SimWorkerModel workers) {
    return parse_double(simulate(o, {.numeric = false, .workers = workers}, [](SimBackend& b) {
      const Seconds t0 = b.now();
      b.parallel_for(2, [&](int i) {
        Tensor x = Tensor::empty(b.device(i), {4}, DType::f32);
        for (int k = 0; k < 100; ++k) kernel_fill(x, 1.0);
        b.device(i).synchronize();
      });
      return fmt::format("{:.17g}", b.now() - t0);
    }));
  };
  const double threads = run(SimWorkerModel::threads_of_one_process);
  const double processes = run(SimWorkerModel::process_per_worker);
  // Each worker dispatches 100 fills (the tensor's allocation dispatches nothing).
  EXPECT_NEAR(processes, 100 * 10e-6 + 16.0 / 100e9, 1e-9);
  EXPECT_NEAR(threads, 200 * 10e-6 + 16.0 / 100e9, 2e-6);
}

// A peer copy of n bytes on an idle route {l_a, l_b} takes 2 x latency + n / bandwidth;
// staged through host memory the two legs run together (pipelined) on distinct links.
TEST(SimBackend, CopiesCostLatencyPlusBytesOverBandwidth) {
  TestMachineOptions o;
  const Bytes n = 64 * kMiB;
  auto elapsed = [&](bool p2p) {
    o.peer_to_peer = p2p;
    return parse_double(simulate(o, {.numeric = true}, [&](SimBackend& b) {
      Tensor a = Tensor::zeros(b.device(0), {n / 4}, DType::f32);
      Tensor c = Tensor::empty(b.device(1), {n / 4}, DType::f32);
      b.device(0).synchronize();
      const Seconds t0 = b.now();
      b.copy(a, c);
      b.device(1).synchronize();
      return fmt::format("{:.17g}", b.now() - t0);
    }));
  };
  EXPECT_NEAR(elapsed(true), 2e-6 + n / 10e9, 1e-9);
  // Staged: gpu0 -> cpu and cpu -> gpu1 share the cpu's link l2 (two flows): n / (B/2).
  EXPECT_NEAR(elapsed(false), 2e-6 + n / 5e9, 1e-9);
  // Invariant: a staged copy takes at least n over the machine's staged one-way rate (the
  // driver's pipelined staging, below the links' rate); a rate above the links' leaves the
  // links' time, and a peer copy is not bounded by it.
  o.staged_copy_rate = 2e9;
  EXPECT_NEAR(elapsed(false), n / 2e9, 1e-9);
  EXPECT_NEAR(elapsed(true), 2e-6 + n / 10e9, 1e-9);
  o.staged_copy_rate = 20e9;
  EXPECT_NEAR(elapsed(false), 2e-6 + n / 5e9, 1e-9);
}

// Invariant: staged copies through one GPU share its staged rate: two copies out of GPU 0
// at once (DataParallel's broadcast to two replicas) end after 2n over the rate, not n
// (each had been capped alone while the links carried both at their own rate).
TEST(SimBackend, StagedCopiesThroughOneGpuShareItsStagedRate) {
  TestMachineOptions o;
  o.gpus = 3;
  o.peer_to_peer = false;
  o.staged_copy_rate = 2e9;
  const Bytes n = 64 * kMiB;
  const double elapsed = parse_double(simulate(o, {.numeric = true}, [&](SimBackend& b) {
    Tensor a = Tensor::zeros(b.device(0), {n / 4}, DType::f32);
    std::vector<Tensor> to;
    for (int d : {1, 2}) to.push_back(Tensor::empty(b.device(d), {n / 4}, DType::f32));
    b.device(0).synchronize();
    const Seconds t0 = b.now();
    b.parallel_for(2, [&](int i) { b.copy(a, to[static_cast<size_t>(i)]); });
    for (int d : {1, 2}) b.device(d).synchronize();
    return fmt::format("{:.17g}", b.now() - t0);
  }));
  EXPECT_NEAR(elapsed, 2.0 * n / 2e9, 1e-6);
}

TEST(SimBackend, AllocationBeyondCapacityNamesTheDevice) {
  TestMachineOptions o;
  o.capacity = 1 * kMiB;
  const std::string out = simulate(o, {.numeric = false}, [](SimBackend& b) {
    Tensor keep = Tensor::empty(b.device(1), {128 * 1024}, DType::f32, MemoryCategory::parameters);  // 512 KiB
    try {
      Tensor more = Tensor::empty(b.device(1), {192 * 1024}, DType::f32, MemoryCategory::activations);
    } catch (const OutOfMemory& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  });
  EXPECT_NE(out.find("out of memory on sim:gpu1"), std::string::npos) << out;
  EXPECT_NE(out.find("parameters="), std::string::npos) << out;
}

TEST(SimBackend, ParallelForRethrowsTheLowestFailingWorker) {
  const std::string out = simulate({.gpus = 4}, {.numeric = false}, [](SimBackend& b) {
    std::vector<int> ran(4, 0);
    try {
      b.parallel_for(4, [&](int i) {
        ran[static_cast<size_t>(i)] = 1;
        if (i == 1 || i == 3) throw std::invalid_argument(fmt::format("worker {} failed", i));
      });
    } catch (const std::invalid_argument& e) {
      return fmt::format("{} {}{}{}{}", e.what(), ran[0], ran[1], ran[2], ran[3]);
    }
    return std::string("no error");
  });
  EXPECT_EQ(out, "worker 1 failed 1111");
}

// Collectives wait for the slowest rank: an all-reduce issued after a rank's long
// kernel ends after that kernel plus the ring's time, on every rank.
TEST(SimCommunicator, CollectiveStartsWhenEveryRanksDataIsReady) {
  TestMachineOptions o;
  const std::string out = simulate(o, {.numeric = false, .workers = SimWorkerModel::process_per_worker}, [](SimBackend& b) {
    auto comms = b.make_communicators({0, 1});
    std::vector<double> ends(2);
    const Seconds t0 = b.now();
    b.parallel_for(2, [&](int r) {
      Tensor t = Tensor::empty(b.device(r), {1024 * 1024}, DType::f32);
      if (r == 1) kernel_charge(b.device(r), {"long", OpKind::compute, 1e9, 0, 0});  // 1 ms
      auto w = comms[static_cast<size_t>(r)]->all_reduce(t, {});
      w->wait();
      ends[static_cast<size_t>(r)] = b.now() - t0;
    });
    return fmt::format("{:.17g} {:.17g}", ends[0], ends[1]);
  });
  std::istringstream in(out);
  double e0, e1;
  in >> e0 >> e1;
  // Ring of 2: 2 steps of 2 MiB each way on disjoint link directions... both ranks' flows
  // cross both links (l0, l1 are shared, not split), so each step moves 2 flows of 2 MiB
  // over 10 GB/s links: 2 MiB / 5 GB/s + 2 us per step.
  const double ring = 2 * (2.0 * kMiB / 5e9 + 2e-6);
  EXPECT_NEAR(e0, 1e-3 + ring, 1e-9);
  EXPECT_NEAR(e1, 1e-3 + ring, 1e-9);
}

// Numeric collectives equal the host ring's results bit for bit (the same
// summation order), for random sizes, rank counts, values and ops.
std::vector<std::vector<float>> random_buffers(int ranks, int n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<float>> out(static_cast<size_t>(ranks), std::vector<float>(static_cast<size_t>(n)));
  for (auto& b : out)
    for (auto& x : b) x = dist(gen) * 1000.0f;
  return out;
}

std::string hex_of(const std::vector<float>& v) {
  std::string s;
  for (float x : v) {
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    s += fmt::format("{:08x}", u);
  }
  return s;
}

std::vector<std::vector<float>> host_ring_all_reduce(std::vector<std::vector<float>> bufs, ReduceOp op) {
  const int ranks = static_cast<int>(bufs.size());
  HostBackend host(ranks);
  auto comms = host.make_communicators([&] {
    std::vector<int> d;
    for (int r = 0; r < ranks; ++r) d.push_back(r);
    return d;
  }());
  std::vector<Tensor> ts;
  for (int r = 0; r < ranks; ++r) {
    ts.push_back(Tensor::empty(host.device(r), {static_cast<std::int64_t>(bufs[0].size())}, DType::f32));
    if (!bufs[0].empty())  // memcpy's pointers must not be null, even for 0 bytes
      std::memcpy(ts.back().data(), bufs[static_cast<size_t>(r)].data(), bufs[0].size() * 4);
  }
  host.parallel_for(ranks, [&](int r) { comms[static_cast<size_t>(r)]->all_reduce(ts[static_cast<size_t>(r)], {op})->wait(); });
  for (int r = 0; r < ranks && !bufs[0].empty(); ++r)
    std::memcpy(bufs[static_cast<size_t>(r)].data(), ts[static_cast<size_t>(r)].data(), bufs[0].size() * 4);
  return bufs;
}

TEST(SimCommunicator, RingOrderValuesEqualTheHostRingBitwise) {
  // Invariant: for every rank count, length and op, the pure ring-order all-reduce
  // gives exactly the host ring communicator's bits on every rank.
  rc::check([](void) {
    const int ranks = *rc::gen::inRange(1, 6);
    const int n = *rc::gen::inRange(0, 40);
    const unsigned seed = *rc::gen::arbitrary<unsigned>();
    const ReduceOp op = *rc::gen::element(ReduceOp::sum, ReduceOp::avg, ReduceOp::max);
    auto bufs = random_buffers(ranks, n, seed);
    const auto expected = host_ring_all_reduce(bufs, op);
    std::vector<void*> ptrs;
    for (auto& b : bufs) ptrs.push_back(b.data());
    ring_all_reduce_values(DType::f32, op, n, ptrs);
    for (int r = 0; r < ranks; ++r) RC_ASSERT(hex_of(bufs[static_cast<size_t>(r)]) == hex_of(expected[static_cast<size_t>(r)]));
  });
}

TEST(SimCommunicator, PlantedWrongSummationOrderIsCaught) {
  // The planted bug: summing every chunk from rank 0 instead of along the ring. Float
  // addition is not associative, so for 3+ ranks some input must differ in its bits.
  bool differs = false;
  for (unsigned seed = 0; seed < 20 && !differs; ++seed) {
    auto bufs = random_buffers(4, 16, seed);
    const auto expected = host_ring_all_reduce(bufs, ReduceOp::sum);
    std::vector<float> naive(16, 0.0f);
    for (auto& b : bufs)
      for (int i = 0; i < 16; ++i) naive[static_cast<size_t>(i)] += b[static_cast<size_t>(i)];
    differs = hex_of(naive) != hex_of(expected[0]);
  }
  EXPECT_TRUE(differs);
}

// The whole path: numeric all_reduce through SimCommunicators inside a simulation.
TEST(SimCommunicator, SimulatedAllReduceEqualsHostRingBitwise) {
  const int ranks = 3, n = 1000;
  auto bufs = random_buffers(ranks, n, 7);
  const auto expected = host_ring_all_reduce(bufs, ReduceOp::avg);
  const std::string out = simulate({.gpus = ranks}, {.numeric = true, .workers = SimWorkerModel::process_per_worker},
                                   [&](SimBackend& b) {
                                     auto comms = b.make_communicators({0, 1, 2});
                                     std::vector<Tensor> ts;
                                     for (int r = 0; r < ranks; ++r) {
                                       ts.push_back(Tensor::empty(b.device(r), {n}, DType::f32));
                                       std::memcpy(ts.back().data(), bufs[static_cast<size_t>(r)].data(), n * 4);
                                     }
                                     b.parallel_for(ranks, [&](int r) {
                                       comms[static_cast<size_t>(r)]->all_reduce(ts[static_cast<size_t>(r)], {ReduceOp::avg})->wait();
                                     });
                                     std::string s;
                                     for (auto& t : ts) {
                                       std::vector<float> v(n);
                                       std::memcpy(v.data(), t.data(), n * 4);
                                       s += hex_of(v) + "\n";
                                     }
                                     return s;
                                   });
  std::string want;
  for (auto& e : expected) want += hex_of(e) + "\n";
  EXPECT_EQ(out, want);
}

}  // namespace
}  // namespace dpt
