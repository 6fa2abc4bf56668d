// gloo's ring all-reduce (sim/collectives/gloo_model.hpp): how it cuts a buffer, which
// bytes each rank moves, and the time the twin charges for it on a host platform.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <sstream>

#include <rapidcheck/detail/Configuration.h>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/gloo_model.hpp"
#include "sim/net/hardware.hpp"
#include "verify/support/rc_property.hpp"

namespace dpt::sim {
namespace {

using test::expect_property_holds;
using test::property_fails;

// Invariant (gloo/allreduce.cc): segments are a multiple of the ranks and at least two per
// rank (one in flight while another is reduced); a segment is whole elements and at most
// 1 MiB; together they cover the buffer, and one element less per segment would not.
auto shape_property() {
  return [] {
    const int ranks = *rc::gen::inRange(1, 17);
    const Bytes element = *rc::gen::element<Bytes>(2, 4, 8);
    const Bytes total = element * *rc::gen::inRange<Bytes>(1, 8 * 1024 * 1024);
    const GlooRingShape s = gloo_ring_shape(total, ranks, element);
    RC_ASSERT(s.segments % ranks == 0);
    RC_ASSERT(s.segments_per_rank >= 2);
    RC_ASSERT(s.segment_bytes % element == 0);
    RC_ASSERT(s.segment_bytes <= kGlooMaxSegmentBytes);
    RC_ASSERT(s.segments * s.segment_bytes >= total);
    RC_ASSERT(s.segments * (s.segment_bytes - element) < total);
    RC_ASSERT(s.steps_per_phase == s.segments - s.segments_per_rank);
  };
}

TEST(GlooRing, ShapeAsGlooCutsTheBuffer) { expect_property_holds(shape_property(), 300); }

TEST(GlooRing, PlantedBugOneSegmentPerRankIsCaught) {
  ScopedFault f(Fault::gloo_one_segment_per_rank);
  EXPECT_TRUE(property_fails(shape_property(), 300));
}

// Invariant: in each phase every segment crosses N - 1 hops of the ring, so the bytes
// sent by all ranks over all steps are (N - 1) x S, and each rank receives exactly what
// its right neighbour sends it.
TEST(GlooRing, EachPhaseMovesNMinusOneBuffers) {
  expect_property_holds(
      [] {
        const int ranks = *rc::gen::inRange(2, 9);
        const Bytes total = 4 * *rc::gen::inRange<Bytes>(1, 2 * 1024 * 1024);
        const GlooRingShape s = gloo_ring_shape(total, ranks, 4);
        for (bool rs : {true, false}) {
          Bytes sent = 0;
          for (int r = 0; r < ranks; ++r)
            for (std::int64_t step = 0; step < s.steps_per_phase; ++step) {
              sent += gloo_step_bytes(s, total, r, step, rs, true);
              RC_ASSERT(gloo_step_bytes(s, total, r, step, rs, false) ==
                        gloo_step_bytes(s, total, (r + 1) % ranks, step, rs, true));
            }
          RC_ASSERT(sent == (ranks - 1) * total);
        }
      },
      200);
}

// Hand-computed from gloo's rules. 8 MiB on 2 ranks: max(8 MiB / 1 MiB, 2 x 2) = 8
// segments of 1 MiB, 4 per rank, 4 steps per phase; each step 20 us + 1 MiB / 1 GB/s,
// plus 1 MiB / 4 GB/s in the reduce-scatter.
// 4 KiB on 2 ranks: the 2N minimum gives 4 segments of 1 KiB, 2 steps per phase.
TEST(GlooRing, TimeFromRatesByHand) {
  const GlooSpec rates{1e9, 20e-6, 4e9};
  const double mib = 1024.0 * 1024.0;
  const double big = 4 * (20e-6 + mib / 1e9 + mib / 4e9) + 4 * (20e-6 + mib / 1e9);
  EXPECT_NEAR(gloo_allreduce_time(rates, 8 * 1024 * 1024, 2, 4), big, 1e-12);
  const double small = 2 * (20e-6 + 1024 / 1e9 + 1024 / 4e9) + 2 * (20e-6 + 1024 / 1e9);
  EXPECT_NEAR(gloo_allreduce_time(rates, 4096, 2, 4), small, 1e-12);
  EXPECT_EQ(gloo_allreduce_time(rates, 4096, 1, 4), 0.0);
  EXPECT_EQ(gloo_allreduce_time(rates, 0, 2, 4), 0.0);
  const CollectiveCall call{CollectiveOp::all_reduce, 1024, 4, 0};
  EXPECT_NEAR(gloo_collective_time(rates, call, 2), small, 1e-12);
}

TEST(GlooRing, BadInputIsAnError) {
  EXPECT_THROW(gloo_ring_shape(100, 0, 4), std::invalid_argument);
  EXPECT_THROW(gloo_ring_shape(-4, 2, 4), std::invalid_argument);
  EXPECT_THROW(gloo_ring_shape(100, 2, 0), std::invalid_argument);
}

// The library's host platform selects gloo and holds its three rates.
TEST(GlooRing, HostPlatformFileSelectsGloo) {
  const HardwareSpec hw = load_hardware_file(DPT_SOURCE_DIR "/scenarios/hardware/host-cpu-gloo.yaml");
  ASSERT_TRUE(hw.gloo.has_value());
  EXPECT_GT(hw.gloo->tcp_bandwidth, 0.0);
  EXPECT_GT(hw.gloo->message_latency_s, 0.0);
  EXPECT_GT(hw.gloo->reduce_bandwidth, 0.0);
}

}  // namespace
}  // namespace dpt::sim
