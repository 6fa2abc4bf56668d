// gloo's ring all-reduce as a pure function of the buffer, the ranks and the host's rates
// (see gloo_model.hpp for the algorithm and its sources).
#include "sim/collectives/gloo_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"

namespace dpt::sim {

namespace {

std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  const std::int64_t rem = value % multiple;
  return rem == 0 ? value : value + multiple - rem;
}

// One phase of the ring: every step waits for the slowest rank's send and receive
// (and, in the reduce-scatter, its sum of the received segment).
Seconds phase_time(const GlooSpec& rates, const GlooRingShape& shape, Bytes total_bytes, int ranks,
                   bool reduce_scatter) {
  const BytesPerSecond tcp = gloo_tcp_bandwidth(rates, total_bytes);
  Seconds t = 0;
  for (std::int64_t step = 0; step < shape.steps_per_phase; ++step) {
    Seconds slowest = 0;
    for (int r = 0; r < ranks; ++r) {
      const Bytes sent = gloo_step_bytes(shape, total_bytes, r, step, reduce_scatter, true);
      const Bytes received = gloo_step_bytes(shape, total_bytes, r, step, reduce_scatter, false);
      if (sent == 0 && received == 0) continue;
      Seconds s = rates.message_latency_s + static_cast<double>(std::max(sent, received)) / tcp;
      if (reduce_scatter) s += static_cast<double>(received) / rates.reduce_bandwidth;
      slowest = std::max(slowest, s);
    }
    t += slowest;
  }
  return t;
}

}  // namespace

BytesPerSecond gloo_tcp_bandwidth(const GlooSpec& rates, Bytes buffer_bytes) {
  const auto& table = rates.tcp_bandwidth_by_buffer;
  if (table.empty() || fault_active(Fault::gloo_cache_warm_rate)) return rates.tcp_bandwidth;
  if (buffer_bytes <= table.front().buffer_bytes) return table.front().bandwidth;
  if (buffer_bytes >= table.back().buffer_bytes) return table.back().bandwidth;
  const auto hi = std::upper_bound(table.begin(), table.end(), buffer_bytes,
                                   [](Bytes b, const GlooSpec::BufferRate& p) { return b < p.buffer_bytes; });
  const auto lo = hi - 1;
  const double x = std::log2(static_cast<double>(buffer_bytes) / static_cast<double>(lo->buffer_bytes)) /
                   std::log2(static_cast<double>(hi->buffer_bytes) / static_cast<double>(lo->buffer_bytes));
  return lo->bandwidth + x * (hi->bandwidth - lo->bandwidth);
}

GlooRingShape gloo_ring_shape(Bytes total_bytes, int ranks, Bytes element_bytes, Bytes max_segment_bytes) {
  if (ranks < 1) throw std::invalid_argument(fmt::format("gloo ring: {} ranks (at least 1)", ranks));
  if (total_bytes < 0) throw std::invalid_argument(fmt::format("gloo ring: {} bytes is negative", total_bytes));
  if (element_bytes < 1) throw std::invalid_argument(fmt::format("gloo ring: element size {} bytes", element_bytes));
  GlooRingShape s;
  // The largest segment is a whole number of elements (at least one).
  const Bytes max_segment = element_bytes * std::max<Bytes>(1, max_segment_bytes / element_bytes);
  const std::int64_t min_segments = fault_active(Fault::gloo_one_segment_per_rank) ? ranks : 2 * ranks;
  s.segments = round_up(std::max<std::int64_t>((total_bytes + max_segment - 1) / max_segment, min_segments), ranks);
  s.segments_per_rank = s.segments / ranks;
  s.segment_bytes = round_up((total_bytes + s.segments - 1) / s.segments, element_bytes);
  s.steps_per_phase = s.segments - s.segments_per_rank;
  return s;
}

Bytes gloo_step_bytes(const GlooRingShape& shape, Bytes total_bytes, int rank, std::int64_t step,
                      bool reduce_scatter, bool send) {
  // Segment indices as gloo computes its offsets: the reduce-scatter sends from rank + 1's
  // chunk and receives into rank + 2's; the all-gather sends rank's and receives rank + 1's.
  const std::int64_t chunk = rank + (reduce_scatter ? 1 : 0) + (send ? 0 : 1);
  const std::int64_t segment = (chunk * shape.segments_per_rank + step) % shape.segments;
  const Bytes offset = segment * shape.segment_bytes;
  return std::clamp<Bytes>(total_bytes - offset, 0, shape.segment_bytes);
}

Seconds gloo_allreduce_time(const GlooSpec& rates, Bytes total_bytes, int ranks, Bytes element_bytes) {
  if (ranks < 2 || total_bytes == 0) return 0;
  const GlooRingShape shape = gloo_ring_shape(total_bytes, ranks, element_bytes);
  return phase_time(rates, shape, total_bytes, ranks, true) + phase_time(rates, shape, total_bytes, ranks, false);
}

Seconds gloo_collective_time(const GlooSpec& rates, const CollectiveCall& call, int ranks) {
  const Bytes bytes = call.bytes();
  if (ranks < 2 || bytes == 0) return 0;
  const GlooRingShape shape = gloo_ring_shape(bytes, ranks, call.element_bytes);
  switch (call.op) {
    case CollectiveOp::all_reduce: return gloo_allreduce_time(rates, bytes, ranks, call.element_bytes);
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::reduce: return phase_time(rates, shape, bytes, ranks, true);
    default: return phase_time(rates, shape, bytes, ranks, false);
  }
}

}  // namespace dpt::sim
