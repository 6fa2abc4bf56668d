#include "scenarios/measure/harness.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "engine/core/kernels.hpp"

namespace dpt {
namespace {

Tensor device_buffer(Device& d, Bytes bytes) { return Tensor::zeros(d, {std::max<Bytes>(1, bytes / 4)}, DType::f32); }

}  // namespace

Seconds time_op(Backend& b, Device& device, const Timing& timing, const std::function<void()>& op) {
  if (timing.policy == Timing::Policy::mean) {
    for (int i = 0; i < timing.warmup; ++i) op();
    const Seconds t0 = b.now();
    for (int i = 0; i < timing.iters; ++i) op();
    return (b.now() - t0) / timing.iters;
  }
  op();
  device.synchronize();
  Seconds best = std::numeric_limits<Seconds>::infinity();
  for (int r = 0; r < timing.iters; ++r) {
    const Seconds t0 = b.now();
    op();
    device.synchronize();
    best = std::min(best, b.now() - t0);
  }
  return best;
}

double gemm_flops(std::int64_t m, std::int64_t n, std::int64_t k) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}

BandwidthFigure bench_copy(Backend& b, const std::string& kind, Device& from, Device& to, Bytes bytes,
                           const Timing& timing) {
  Tensor src = device_buffer(from, bytes), dst = device_buffer(to, bytes);
  BandwidthFigure f;
  f.kind = kind;
  f.src = from.index();
  f.dst = to.index();
  f.bytes = src.size_bytes();
  f.time_s = time_op(b, to, timing, [&] { b.copy(src, dst); });
  f.bytes_per_s = static_cast<double>(f.bytes) / f.time_s;
  return f;
}

BandwidthFigure bench_memory(Backend& b, Device& d, Bytes bytes, const Timing& timing) {
  Tensor src = device_buffer(d, bytes), dst = device_buffer(d, bytes);
  BandwidthFigure f;
  f.kind = "memory";
  f.src = f.dst = d.index();
  f.bytes = src.size_bytes();
  f.time_s = time_op(b, d, timing, [&] { kernel_copy(src, dst); });
  f.bytes_per_s = 2.0 * static_cast<double>(f.bytes) / f.time_s;  // read + written, as STREAM's copy counts
  return f;
}

double bench_busbw_factor(const std::string& c, int n) {
  if (c == "all_reduce") return 2.0 * (n - 1) / n;
  if (c == "all_gather" || c == "reduce_scatter") return static_cast<double>(n - 1) / n;
  if (c == "broadcast" || c == "reduce") return 1.0;
  throw std::invalid_argument("Invalid collective: " + c);
}

}  // namespace dpt
