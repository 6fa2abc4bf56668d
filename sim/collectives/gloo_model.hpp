// Collectives as gloo runs them on a host (PyTorch's CPU backend, ProcessGroupGloo):
// ring all-reduce over TCP between processes, timed from microbenchmarked rates
// (hardware.hpp GlooSpec), not from NCCL's model.
//
// gloo's ring (gloo/allreduce.cc, `ring`; ProcessGroupGloo leaves the algorithm
// UNSPECIFIED, which runs the ring): the buffer of S bytes is cut into
//   segments = roundUp(max(ceil(S / max_segment), 2N), N)
// equal segments of ceil(S / segments) bytes (rounded up to the element size; the last
// ones short or empty), segments / N of them per rank. Reduce-scatter then all-gather
// each run segments - segments / N steps; in a step every rank sends one segment to its
// left neighbour and receives one from its right (in the reduce-scatter it then sums the
// received segment into its output). At least 2N segments, so that one segment is in
// flight while another is reduced; max_segment is gloo's kMaxSegmentSize, 1 MiB
// (gloo/allreduce.h, AllreduceOptionsImpl).
//
// Time: each step costs message_latency + the longest of its send and receive at
// tcp_bandwidth, plus, in the reduce-scatter, the received bytes at reduce_bandwidth,
// the slowest rank setting the step. Transfer and reduction are charged one after the
// other: over loopback the kernel's TCP copies and the sum run on the same cores as the
// ranks' own work, so they do not overlap in wall time.
#pragma once
#include <cstdint>

#include "engine/core/collective.hpp"
#include "engine/core/units.hpp"
#include "sim/net/hardware.hpp"

namespace dpt::sim {

// gloo's kMaxSegmentSize (gloo/allreduce.h): the largest send or receive of the ring.
constexpr Bytes kGlooMaxSegmentBytes = 1024 * 1024;

// How gloo's ring cuts one buffer (see above).
struct GlooRingShape {
  std::int64_t segments = 0;           // segments of the whole buffer, a multiple of the ranks
  std::int64_t segments_per_rank = 0;  // segments / ranks
  Bytes segment_bytes = 0;             // every segment's size but the short last ones
  std::int64_t steps_per_phase = 0;    // sends per rank in reduce-scatter, and again in all-gather
};

// Throws std::invalid_argument for ranks < 1, negative bytes or element_bytes < 1.
GlooRingShape gloo_ring_shape(Bytes total_bytes, int ranks, Bytes element_bytes,
                              Bytes max_segment_bytes = kGlooMaxSegmentBytes);

// Bytes rank `rank` sends (send = true) or receives in step `step` of a phase: the segment's
// size, short or zero past the buffer's end (gloo's offsets, reduce-scatter phase when
// reduce_scatter, else all-gather).
Bytes gloo_step_bytes(const GlooRingShape& shape, Bytes total_bytes, int rank, std::int64_t step,
                      bool reduce_scatter, bool send);

// Seconds one all-reduce of total_bytes takes on `ranks` ranks (0 for one rank or no bytes).
Seconds gloo_allreduce_time(const GlooSpec& rates, Bytes total_bytes, int ranks, Bytes element_bytes);

// Seconds of `call` on `ranks` ranks: all_reduce as above; reduce_scatter the ring's first
// phase, all_gather its second; broadcast and reduce (once per DDP run, at construction)
// charged as one phase of the ring as well (gloo runs them as a tree of point-to-point
// sends; an approximation).
Seconds gloo_collective_time(const GlooSpec& rates, const CollectiveCall& call, int ranks);

}  // namespace dpt::sim
