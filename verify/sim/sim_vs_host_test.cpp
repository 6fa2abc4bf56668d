// Predicted against measured: the twin, given a "host platform" whose rates come
// from microbenchmarks run here and now (GEMM rate at the model's shapes, memcpy
// bandwidth, the fixed cost of one tiny kernel), predicts the step times the host
// backend measures for DataParallel and DDP on a small MLP, on 1 and 2 devices (this
// machine has 2 cores: one worker per core) and on 4 (two workers per core: the twin
// gives each worker an even share of the cores measured free).
//
// The rates are microbenchmarks, never step times: the step is what is predicted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>
#include <thread>

#include "engine/host/host_backend.hpp"
#include "engine/core/kernels.hpp"
#include "engine/nn/model.hpp"
#include "engine/optim/optim.hpp"
#include "engine/parallel/strategy.hpp"
#include "verify/support/sim_test_support.hpp"

namespace dpt {
namespace {

// Built with a sanitizer (the CI asan and tsan stages): the program still runs every step
// and microbenchmark, which is what a sanitizer checks, but its timings are not judged.
// Instrumentation slows each kind of work by its own factor (a streaming loop about 10x,
// OpenBLAS's uninstrumented GEMM not at all), so rates measured here do not predict a step
// measured here; a fresh-clone CI run at 4b8bae7 failed on exactly that (dp on 2 devices
// +60.8 %, its streaming rate 0.64 GB/s).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

const MlpSpec kSpec = parse_mlp_spec("mlp:256-512-512-16");
constexpr std::int64_t kBatch = 128;  // global batch of every step

struct HostRates {
  FlopsPerSecond gemm = 0;          // at the model's GEMM shapes, one thread
  BytesPerSecond memcpy_bytes = 0;  // bytes copied per second
  BytesPerSecond stream_bytes = 0;  // bytes read and written per second by a streaming kernel (axpy)
  Seconds op_overhead_s = 0;        // one kernel on one element: the per-op fixed cost
  Seconds worker_start_s = 0;       // starting and joining one thread
  double parallel_cores = 1;        // how many GEMMs run at full speed side by side right now
};

// Rates and steps alternate over rounds and each keeps its best: on a machine shared
// with other work, the least disturbed run of each is the one to compare.
HostRates best_of(const HostRates& a, const HostRates& b) {
  return {std::max(a.gemm, b.gemm), std::max(a.memcpy_bytes, b.memcpy_bytes), std::max(a.stream_bytes, b.stream_bytes),
          std::min(a.op_overhead_s, b.op_overhead_s), std::min(a.worker_start_s, b.worker_start_s),
          std::max(a.parallel_cores, b.parallel_cores)};
}

// The fastest of `reps` timings of fn: on a machine shared with other work the least
// disturbed run is the one closest to what the code costs (for rates and steps alike).
template <typename F> double best_time(int reps, F&& fn) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    fn();
    best = std::min(best, seconds_since(start));
  }
  return best;
}

// Every forward and backward GEMM of the MLP at `rows` rows, on its own buffers.
class GemmSet {
 public:
  explicit GemmSet(std::int64_t rows) : rows_(rows) {
    for (size_t l = 0; l + 1 < kSpec.widths.size(); ++l) {
      const std::int64_t in = kSpec.widths[l], out = kSpec.widths[l + 1];
      layers_.push_back({in, out, std::vector<float>(static_cast<size_t>(rows * in), 0.5f),
                         std::vector<float>(static_cast<size_t>(out * in), 0.25f),
                         std::vector<float>(static_cast<size_t>(rows * out), 0.0f),
                         std::vector<float>(static_cast<size_t>(out * in), 0.0f),
                         std::vector<float>(static_cast<size_t>(rows * in), 0.0f)});
      flops_ += 3 * 2.0 * static_cast<double>(rows * in * out);
    }
  }
  void run() {
    Kernels& k = host_kernels();
    for (auto& L : layers_) {
      k.gemm(DType::f32, false, true, rows_, L.out, L.in, 1.0, L.x.data(), L.w.data(), 0.0, L.y.data());
      k.gemm(DType::f32, true, false, L.out, L.in, rows_, 1.0, L.y.data(), L.x.data(), 1.0, L.dw.data());
      k.gemm(DType::f32, false, false, rows_, L.in, L.out, 1.0, L.y.data(), L.w.data(), 0.0, L.dx.data());
    }
  }
  double flops() const { return flops_; }

 private:
  struct Layer {
    std::int64_t in, out;
    std::vector<float> x, w, y, dw, dx;
  };
  std::int64_t rows_;
  std::vector<Layer> layers_;
  double flops_ = 0;
};

HostRates measure_host_rates(std::int64_t rows) {
  Kernels& k = host_kernels();
  HostRates r;
  GemmSet a_set(rows), b_set(rows);
  const Seconds one = best_time(15, [&] { a_set.run(); });
  r.gemm = a_set.flops() / one;
  // Cores available now: the same GEMMs on two threads at once against one thread.
  // 2 on an idle 2-core machine; less while other work holds a core.
  const Seconds two = best_time(5, [&] {
    std::thread t([&] { b_set.run(); });
    a_set.run();
    t.join();
  });
  r.parallel_cores = std::clamp(2.0 * one / two, 0.25, 2.0);
  std::vector<char> a(8 * kMiB, 1), b(8 * kMiB, 0);
  r.memcpy_bytes = static_cast<double>(a.size()) / best_time(15, [&] { std::memcpy(b.data(), a.data(), a.size()); });
  // A streaming kernel of the host library at the model's activation size: axpy reads
  // two vectors and writes one.
  const Elements n = rows * 512;
  std::vector<float> sx(static_cast<size_t>(n), 1.0f), sy(static_cast<size_t>(n), 2.0f);
  r.stream_bytes = 3.0 * 4.0 * static_cast<double>(n) /
                   best_time(15, [&] { k.axpy(DType::f32, n, 0.5, sx.data(), sy.data()); });
  float scalar = 0;
  r.worker_start_s = best_time(20, [] { std::thread([] {}).join(); });
  r.op_overhead_s = best_time(15, [&] {
                      for (int i = 0; i < 1000; ++i) k.fill(DType::f32, 1, 1.0, &scalar);
                    }) /
                    1000;
  return r;
}

OptimizerBuilder sgd() {
  return [](std::vector<NamedParameter> p) { return make_sgd(std::move(p), SgdOptions{0.01, 0.9}); };
}

std::pair<Tensor, Tensor> batch_on(Backend& b) {
  Tensor x = Tensor::zeros(b.host_memory(), {kBatch, kSpec.widths.front()}, DType::f32, MemoryCategory::inputs);
  Tensor y = Tensor::zeros(b.host_memory(), {kBatch, kSpec.widths.back()}, DType::f32, MemoryCategory::inputs);
  return {x, y};
}

StrategyOptions options_for(StrategyKind kind, int devices) {
  StrategyOptions so;
  so.kind = kind;
  for (int i = 0; i < devices; ++i) so.device_ids.push_back(i);
  return so;
}

// The host backend's measured step: the fastest of 10 steps after 3 warm-up steps.
double measured_step(StrategyKind kind, int devices) {
  HostBackend host(devices);
  auto s = make_strategy(host, options_for(kind, devices),
                         [](Device& d) { return make_mlp(kSpec, d, DType::f32, 3); }, sgd());
  // Not a structured binding: clang 14 (the sanitizer build) cannot capture one in a lambda.
  const auto batch = batch_on(host);
  const auto& x = batch.first;
  const auto& y = batch.second;
  for (int i = 0; i < 3; ++i) s->train_step(x, y);
  return best_time(10, [&] { s->train_step(x, y); });
}



// The twin's prediction on the host platform: each device a worker over host memory
// (GEMM at the measured rate, streaming kernels at memcpy speed), copies and ring
// steps at memcpy bandwidth, kernels synchronous for the calling thread.
double predicted_step(StrategyKind kind, int devices, const HostRates& rates) {
  // Oversubscription: `devices` workers share the cores measured free, each getting at
  // most one core's rates.
  const double share = std::min(1.0, rates.parallel_cores / devices);
  test::TestMachineOptions o;
  o.gpus = devices;
  o.link_bandwidth = rates.memcpy_bytes;
  o.link_latency = 0;
  o.peak_flops = rates.gemm * share;
  o.memory_bandwidth = rates.stream_bytes * share;
  o.worker_start_cost = rates.worker_start_s;
  o.launch_latency = rates.op_overhead_s;
  SimBackendOptions bo;
  bo.numeric = true;
  bo.synchronous = true;
  bo.workers = kind == StrategyKind::ddp ? SimWorkerModel::process_per_worker : SimWorkerModel::threads_of_one_process;
  return std::stod(test::simulate(o, bo, [&](SimBackend& b) {
    auto s = make_strategy(b, options_for(kind, devices), [](Device& d) { return make_mlp(kSpec, d, DType::f32, 3); },
                           sgd());
    auto [x, y] = batch_on(b);
    s->train_step(x, y);
    for (int i = 0; i < devices; ++i) b.device(i).synchronize();
    const Seconds t0 = b.now();
    s->train_step(x, y);
    for (int i = 0; i < devices; ++i) b.device(i).synchronize();
    return fmt::format("{:.17g}", b.now() - t0);
  }));
}

TEST(SimVsHost, PredictsTheHostBackendsMeasuredStepTimes) {
  // The comparison needs the machine's two cores: with other work holding one, the
  // measured two-worker steps say more about that work than about dptwin.
  const double cores = measure_host_rates(kBatch).parallel_cores;
  if (cores < 1.6)
    GTEST_SKIP() << fmt::format("machine busy: two GEMM threads ran at {:.2f} cores' speed (needs >= 1.6 of 2); "
                                "step times measured now would not be this machine's",
                                cores);
  struct Row {
    StrategyKind kind;
    int devices;
    std::int64_t rows_per_device;
    HostRates rates;
    double measured = 1e300;
    double predicted = 0;
    double cores() const { return rates.parallel_cores; }  // two GEMM threads' speed around the measurements
  };
  // One more round of a row: its rates and its step measured again, each keeping its best.
  auto measure_round = [](Row& r) {
    r.rates = best_of(r.rates, measure_host_rates(r.rows_per_device));
    r.measured = std::min(r.measured, measured_step(r.kind, r.devices));
  };
  std::vector<Row> rows;
  // 1 and 2 devices: one worker per core. 4: two workers per core (oversubscribed).
  for (StrategyKind kind : {StrategyKind::data_parallel, StrategyKind::ddp})
    for (int n : {1, 2, 4}) {
      Row r{kind, n, kind == StrategyKind::ddp ? kBatch / n : (kBatch + n - 1) / n, {}};
      r.rates = measure_host_rates(r.rows_per_device);
      r.measured = measured_step(kind, n);
      for (int round = 1; round < 3; ++round) measure_round(r);
      r.predicted = predicted_step(kind, n, r.rates);
      rows.push_back(r);
    }
  // Tolerances (why: below).
  auto tolerance = [](const Row& r) { return r.devices <= 2 ? 0.40 : 0.60; };
  auto misses = [&](const Row& r) { return std::abs(r.predicted - r.measured) > tolerance(r) * r.measured; };
  // A row that misses is measured again, up to 6 more rounds, later than the first three:
  // a burst of other work on a shared machine (a neighbour's, or the suite's own next test)
  // slows every step of a few rounds, and the best of more rounds spread over time is the
  // step without it. Only the measured side can be disturbed upwards this way; a step that
  // stays slow or fast through all nine rounds is what dptwin costs, and is judged.
  for (auto& r : rows)
    for (int extra = 0; extra < 6 && misses(r); ++extra) {
      measure_round(r);
      r.predicted = predicted_step(r.kind, r.devices, r.rates);
    }
  for (const auto& r : rows)
    std::printf("%-4s %d device(s): measured %.3f ms, predicted %.3f ms, error %+.1f %% "
                "(GEMM %.2f GFLOP/s, memcpy %.2f GB/s, streaming %.2f GB/s, per-op %.2f us, thread %.1f us, "
                "cores %.2f)\n",
                strategy_kind_name(r.kind), r.devices, 1e3 * r.measured, 1e3 * r.predicted,
                100 * (r.predicted - r.measured) / r.measured, r.rates.gemm / 1e9, r.rates.memcpy_bytes / 1e9,
                r.rates.stream_bytes / 1e9, 1e6 * r.rates.op_overhead_s, 1e6 * r.rates.worker_start_s, r.cores());
  // Tolerance, 40 % with one worker per core and 60 % oversubscribed, because: the rates are
  // microbenchmarks taken moments apart from the steps on a machine that may run other
  // work (each side keeps its best of several alternated rounds); the twin charges each
  // op a GEMM or streaming rate where kernels of a few microseconds reach neither; the
  // host backend allocates every step's activations (page faults) where the twin's
  // allocations cost nothing; and DDP's per-rank communication threads compete with the
  // ranks for the cores, which the twin's even share per worker does not see (hence the
  // wider bound with 4 workers on 2 cores). Errors beyond these would mean a missing or
  // double-counted part of the step, not noise.
  // A row whose measurements saw the machine busy (other work took a core) is reported
  // above, not judged: its measured step says more about that work than about dptwin.
  if (kSanitized) GTEST_SKIP() << "built with a sanitizer: the rows above ran, their timings are not judged";
  int judged = 0;
  for (const auto& r : rows) {
    if (r.cores() < 1.6) {
      std::printf("not judged: %s on %d device(s) measured while two GEMM threads reached %.2f cores\n",
                  strategy_kind_name(r.kind), r.devices, r.cores());
      continue;
    }
    ++judged;
    EXPECT_NEAR(r.predicted, r.measured, tolerance(r) * r.measured)
        << strategy_kind_name(r.kind) << " on " << r.devices << " device(s)";
  }
  if (judged == 0) GTEST_SKIP() << "machine busy during every row's measurements; nothing judged";
}

}  // namespace
}  // namespace dpt
