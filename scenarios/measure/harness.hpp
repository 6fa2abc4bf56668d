// The one measurement harness behind `dptwin bench` (device_bench.hpp) and
// `dptwin verify` (measure.hpp): timing loops and the figures both take through
// the Backend interface only (GEMM, on-device memory copy, host-device and peer
// copies, nccl-tests' bus bandwidth factor), so a real machine and the twin are
// measured by the same code.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "engine/core/backend.hpp"

namespace dpt {

// How a figure is timed. Two policies, one per caller's convention:
//  - mean (bench, as nccl-tests): `warmup` untimed runs, then the mean of `iters`
//    runs timed back to back; the backend's clock waits for the devices;
//  - best (verify): one untimed run, then the shortest of `iters` runs, each
//    timed between synchronisations of the device the figure belongs to, so
//    other processes on shared cores inflate it least.
struct Timing {
  enum class Policy { mean, best };
  Policy policy = Policy::mean;
  int warmup = 1;  // untimed runs first (the best policy always runs exactly one)
  int iters = 1;   // timed runs
  static Timing mean_of(int warmup, int iters) { return {Policy::mean, warmup, iters}; }
  static Timing best_of(int repeats) { return {Policy::best, 1, repeats}; }
};

// Times `op` under `timing`; `device` is the one synchronised by the best policy.
Seconds time_op(Backend& backend, Device& device, const Timing& timing, const std::function<void()>& op);

struct GemmFigure {
  std::string dtype;              // "f32", "f64", "tf32" (f32 data on TF32 tensor cores)
  int device = 0;
  std::int64_t m = 0, n = 0, k = 0;
  Seconds time_s = 0;             // one GEMM, averaged over the timed iterations
  FlopsPerSecond flops_per_s = 0; // 2 M N K / time
};

struct BandwidthFigure {
  std::string kind;               // "memory" (on-device copy), "h2d", "d2h", "peer"
  int src = 0, dst = 0;           // device indices (-1: host memory)
  Bytes bytes = 0;                // buffer size copied
  Seconds time_s = 0;             // one copy, averaged
  // bytes / time; for "memory" (bytes read + written) / time = 2 x bytes / time.
  BytesPerSecond bytes_per_s = 0;
};

// Flops of one M x K by K x N GEMM: 2 M N K.
double gemm_flops(std::int64_t m, std::int64_t n, std::int64_t k);

// One copy of `bytes` (f32 zeros) from `from` to `to` through Backend::copy.
BandwidthFigure bench_copy(Backend& backend, const std::string& kind, Device& from, Device& to, Bytes bytes,
                           const Timing& timing);
// One on-device copy (kernel_copy) of `bytes`: bandwidth counts bytes read + written.
BandwidthFigure bench_memory(Backend& backend, Device& device, Bytes bytes, const Timing& timing);

// nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md): all_reduce 2(n-1)/n,
// all_gather and reduce_scatter (n-1)/n, broadcast and reduce 1.
// Throws std::invalid_argument for an unknown collective.
double bench_busbw_factor(const std::string& collective, int ranks);

}  // namespace dpt
