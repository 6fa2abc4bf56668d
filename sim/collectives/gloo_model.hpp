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
// Time: each step costs message_latency + the longest of its send and receive at the
// TCP rate, plus, in the reduce-scatter, the received bytes at reduce_bandwidth, the
// slowest rank setting the step. Transfer and reduction are charged one after the
// other: over loopback the kernel's TCP copies and the sum run on the same cores as the
// ranks' own work, so they do not overlap in wall time.
//
// The TCP rate depends on the buffer. Over loopback every byte is copied twice by the CPU
// (the sender's write into the socket, the receiver's read out of it); a ring walks the
// whole buffer, so once the buffer no longer stays in cache those copies stream from
// memory and run slower than the cache-warm exchange (measured here: 2.43 GB/s for a
// 2 MiB buffer, 2.06-2.14 GB/s from 4 MiB on, verify/oracle/host_microbench.py). The rate for
// a buffer of S bytes is GlooSpec::tcp_bandwidth_by_buffer at S: linear in log2(S)
// between its points, the first point's rate below it, the last one's above it.
//
// Contention: those copies and sums are CPU work on the rank's own core (one core per
// rank), so a collective that overlaps the rank's backward takes a share of the core
// from it: GlooSpec::core_share, measured (host_microbench.py core_share: a GEMM loop
// while gloo exchanges 64 MiB in the background runs at about 12 % of its pace alone;
// loopback TCP's receive work runs in softirq, ahead of the scheduler's fair share). The
// twin charges it through the interference model (sim_device.hpp).
#pragma once
#include <cstdint>

#include "engine/core/collective.hpp"
#include "engine/core/units.hpp"
#include "sim/net/hardware.hpp"

namespace dpt::sim {

// gloo's kMaxSegmentSize (gloo/allreduce.h): the largest send or receive of the ring.
constexpr Bytes kGlooMaxSegmentBytes = 1024 * 1024;

// The TCP exchange rate for a buffer of buffer_bytes (see above); tcp_bandwidth without a table.
BytesPerSecond gloo_tcp_bandwidth(const GlooSpec& rates, Bytes buffer_bytes);

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
