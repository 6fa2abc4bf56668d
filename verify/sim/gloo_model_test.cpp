// gloo's ring all-reduce (sim/collectives/gloo_model.hpp): how it cuts a buffer, which
// bytes each rank moves, and the time the twin charges for it on a host platform.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include <rapidcheck/detail/Configuration.h>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/gloo_model.hpp"
#include "sim/net/hardware.hpp"
#include "sim/twin/predict.hpp"
#include "sim/twin/sim_device.hpp"
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

// A rate table as host_microbench.py writes one: ascending buffers (1 KiB .. 1 GiB), each
// rate 0.1 .. 10 GB/s; tcp_bandwidth (the cache-warm rate) far outside that range, so a
// model that ignores the table cannot pass by chance.
rc::Gen<GlooSpec> gen_rate_table() {
  return rc::gen::exec([] {
    GlooSpec g{100e9, 20e-6, 4e9};
    const int points = *rc::gen::inRange(1, 8);
    Bytes buffer = Bytes{1024} << *rc::gen::inRange(0, 8);
    for (int i = 0; i < points; ++i) {
      g.tcp_bandwidth_by_buffer.push_back({buffer, *rc::gen::inRange(1, 101) * 0.1e9});
      buffer <<= *rc::gen::inRange(1, 4);
    }
    return g;
  });
}

// Invariant: the rate for a buffer on a table point is that point's rate; between two
// points it lies between their rates; below the first and above the last it is theirs.
auto rate_table_property() {
  return [] {
    const GlooSpec g = *gen_rate_table();
    const auto& t = g.tcp_bandwidth_by_buffer;
    for (size_t i = 0; i < t.size(); ++i) {
      RC_ASSERT(std::abs(gloo_tcp_bandwidth(g, t[i].buffer_bytes) - t[i].bandwidth) <= 1e-6 * t[i].bandwidth);
      if (i + 1 < t.size()) {
        const Bytes mid = t[i].buffer_bytes + *rc::gen::inRange<Bytes>(0, t[i + 1].buffer_bytes - t[i].buffer_bytes);
        const BytesPerSecond r = gloo_tcp_bandwidth(g, mid);
        RC_ASSERT(r >= std::min(t[i].bandwidth, t[i + 1].bandwidth) * (1 - 1e-9));
        RC_ASSERT(r <= std::max(t[i].bandwidth, t[i + 1].bandwidth) * (1 + 1e-9));
      }
    }
    RC_ASSERT(gloo_tcp_bandwidth(g, 1) == t.front().bandwidth);
    RC_ASSERT(gloo_tcp_bandwidth(g, t.back().buffer_bytes * 4) == t.back().bandwidth);
  };
}

TEST(GlooRing, RateFollowsTheBufferTable) { expect_property_holds(rate_table_property(), 300); }

TEST(GlooRing, PlantedBugCacheWarmRateForEveryBufferIsCaught) {
  ScopedFault f(Fault::gloo_cache_warm_rate);
  EXPECT_TRUE(property_fails(rate_table_property(), 300));
}

// Hand-computed: table {2 MiB: 2 GB/s, 32 MiB: 0.5 GB/s}; 8 MiB is half-way in log2
// (2 of 4 doublings), so 1.25 GB/s; every step of the 8 MiB ring moves 1 MiB at that rate.
// Without a table every buffer moves at tcp_bandwidth (1 GB/s here).
TEST(GlooRing, TimeAtTheBuffersRateByHand) {
  GlooSpec rates{1e9, 20e-6, 4e9};
  const double mib = 1024.0 * 1024.0;
  rates.tcp_bandwidth_by_buffer = {{2 * 1024 * 1024, 2e9}, {32 * 1024 * 1024, 0.5e9}};
  EXPECT_NEAR(gloo_tcp_bandwidth(rates, 8 * 1024 * 1024), 1.25e9, 1e-3);
  const double big = 4 * (20e-6 + mib / 1.25e9 + mib / 4e9) + 4 * (20e-6 + mib / 1.25e9);
  EXPECT_NEAR(gloo_allreduce_time(rates, 8 * 1024 * 1024, 2, 4), big, 1e-12);
  // 64 MiB: past the last point, 0.5 GB/s; 64 segments of 1 MiB, 32 steps per phase.
  const double huge = 32 * (20e-6 + mib / 0.5e9 + mib / 4e9) + 32 * (20e-6 + mib / 0.5e9);
  EXPECT_NEAR(gloo_allreduce_time(rates, 64 * 1024 * 1024, 2, 4), huge, 1e-12);
}

// Contention on a host worker: a collective is CPU work on the rank's own core and keeps
// its pace, so compute that overlaps it for o seconds gets 1 - s of the core and takes
// o x s longer (s = 0.88: 0.6 ms of overlap costs 0.528 ms), whatever the kernel's kind.
TEST(GlooRing, CollectiveTakesTheRanksCoreFromOverlappingCompute) {
  SimGpuRates r;
  r.memory_bandwidth = 20e9;
  r.collective_core_share = 0.88;
  const double expect = 0.528e-3;
  // A kernel [0, 1 ms) under a collective [0.4, 2 ms): 0.6 ms of overlap; tiny byte count, so
  // a bandwidth share would be negligible.
  EXPECT_NEAR(sim_interference_s({{0.0, 1e-3, false}}, {{0.4e-3, 2e-3, 8}}, r), expect, 1e-12);
  EXPECT_NEAR(sim_interference_s({{0.0, 1e-3, true}}, {{0.4e-3, 2e-3, 8}}, r), expect, 1e-12);
  EXPECT_EQ(sim_interference_s({{0.0, 1e-3, false}}, {{1e-3, 2e-3, 8}}, r), 0.0);
}

TEST(GlooRing, PlantedBugContentionOmittedIsCaught) {
  ScopedFault f(Fault::gloo_core_contention_omitted);
  SimGpuRates r;
  r.memory_bandwidth = 20e9;
  r.collective_core_share = 0.88;
  EXPECT_LT(sim_interference_s({{0.0, 1e-3, false}}, {{0.4e-3, 2e-3, 8}}, r), 0.5e-3);
}

// The library's host platform: gloo collectives, its core share on the workers, a rate table.
TEST(GlooRing, HostPlatformRatesCarryTheCoreShare) {
  const HardwareSpec hw = load_hardware_file(DPT_SOURCE_DIR "/scenarios/hardware/host-cpu-gloo.yaml");
  EXPECT_GT(hw.gloo->core_share, 0.0);
  EXPECT_EQ(sim_gpu_rates(hw).collective_core_share, hw.gloo->core_share);
  EXPECT_FALSE(hw.gloo->tcp_bandwidth_by_buffer.empty());
}

// A table whose buffers do not ascend is an error naming the key.
TEST(GlooRing, RateTableOutOfOrderIsAnError) {
  const std::string text = R"(name: t
nodes: 1
gpus_per_node: 2
gpu: {name: cpu, peak_flops: {f32: 100 GFLOPS, f64: 10 GFLOPS}, memory: 8 GiB, memory_bandwidth: 20 GB/s, kernel_launch_latency: 1 ns}
pcie: {generation: 4, lanes: 16, latency: 1 us, peer_to_peer: true}
host: {cpu: x, sockets: 1, cores: 2, memory_bandwidth: 20 GB/s, dispatch_cost: 1 us, gil: false}
gloo:
  tcp_bandwidth: 2 GB/s
  message_latency: 30 us
  reduce_bandwidth: 20 GB/s
  tcp_bandwidth_by_buffer:
    - {buffer: 8 MiB, bandwidth: 1 GB/s}
    - {buffer: 4 MiB, bandwidth: 2 GB/s}
)";
  try {
    (void)parse_hardware_yaml(text, "t.yaml");
    FAIL() << "accepted a descending table";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gloo.tcp_bandwidth_by_buffer[1].buffer"), std::string::npos) << e.what();
  }
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
