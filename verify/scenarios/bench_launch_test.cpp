// The host side of the twin's collective benchmark, as nccl-tests drives the GPUs
// (scenarios/measure/bench_sim.hpp).
//  - Launch order: the thread that drives G GPUs has launched call i on the GPU in slot s
//    after i x G + s + 1 launches (values worked by hand below).
//  - Host bound: with -g G, a call cannot start before its last GPU's launch, so n timed
//    calls take at least n x G launches: the time per call is at least G x the launch cost
//    (8 x 4 us on dgx-a100 with -g 8), whatever the GPUs' speed. The planted fault
//    nccl-tests-launch-free (launches cost nothing) breaks it at 4 KiB, where the GPUs
//    take about 16 us.
//  - Hidden when GPU-bound: with a process per GPU (-g 1), a 256 MiB all-reduce (about 2 ms
//    of GPU time) takes the same time as with free launches, within 0.5 %.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

#include "engine/core/fault_injection.hpp"
#include "scenarios/measure/bench_sim.hpp"
#include "sim/net/hardware.hpp"
#include "verify/support/test_files.hpp"

namespace fs = std::filesystem;
using namespace dpt;

namespace {

using dpt::test::kHardwareLibrary;

Seconds time_per_call(const sim::HardwareSpec& hw, Bytes bytes, int gpus_per_thread, Seconds launch_s = -1) {
  SimBenchRun run;
  for (int r = 0; r < 8; ++r) run.ranks.push_back(r);
  run.calls = {{CollectiveOp::all_reduce, bytes / 4, 4, 0}};
  run.warmup_iters = 1;
  run.timed_iters = 5;
  run.gpus_per_thread = gpus_per_thread;
  run.launch_s = launch_s;
  return run_bench_sim(hw, run).at(0).time_s;
}

TEST(BenchLaunch, LaunchOrderOfOneThread) {
  // Call 0 on slot 0: 1 launch; call 3 on slot 2 of 8 GPUs: 3 x 8 + 2 + 1 = 27 launches.
  EXPECT_DOUBLE_EQ(host_launch_offset_s(0, 0, 8, 4e-6), 4e-6);
  EXPECT_DOUBLE_EQ(host_launch_offset_s(3, 2, 8, 4e-6), 108e-6);
  // One GPU per thread: call i after i + 1 launches.
  EXPECT_DOUBLE_EQ(host_launch_offset_s(4, 0, 1, 5e-6), 25e-6);
  EXPECT_THROW(host_launch_offset_s(0, 8, 8, 4e-6), std::invalid_argument);
  EXPECT_THROW(host_launch_offset_s(0, 0, 0, 4e-6), std::invalid_argument);
}

// Whether a 4 KiB all-reduce with -g 8 on dgx-a100 takes at least 8 launches per call.
bool host_bound_holds() {
  const sim::HardwareSpec hw = sim::load_hardware("dgx-a100", kHardwareLibrary);
  const Seconds launch_s = hw.gpu.kernel_launch_latency_s;
  EXPECT_GT(launch_s, 0);
  return time_per_call(hw, 4096, 8) >= 8 * launch_s * (1 - 1e-9);
}

TEST(BenchLaunch, EightGpusPerThreadCostEightLaunchesPerCall) { EXPECT_TRUE(host_bound_holds()); }

TEST(BenchLaunch, PlantedBugFreeLaunchesIsCaught) {
  const ScopedFault bug(Fault::nccl_tests_launch_free);
  EXPECT_FALSE(host_bound_holds()) << "free launches went unnoticed";
}

TEST(BenchLaunch, OneGpuPerThreadIsHiddenWhenGpuBound) {
  const sim::HardwareSpec hw = sim::load_hardware("dgx-a100", kHardwareLibrary);
  const Seconds with = time_per_call(hw, Bytes{256} << 20, 1);
  const Seconds unlaunched = time_per_call(hw, Bytes{256} << 20, 1, 0.0);
  EXPECT_NEAR(with / unlaunched, 1.0, 0.005) << with << " s with launches, " << unlaunched << " s without";
}

}  // namespace

namespace dpt {
namespace {
using dpt::test::kHardwareLibrary;

// Invariant: one rank moves nothing between GPUs, but out-of-place (nccl-tests' first
// column) NCCL copies the send buffer into the receive buffer on the device, reading and
// writing every byte: a call takes at least 2 x bytes / (memory_bandwidth x
// efficiency.memory_bandwidth) of the hardware file (H200: 4.8 TB/s x its fraction), so
// its algorithm bandwidth never passes half the streaming rate. Planted
// bench-one-rank-free (launch time alone) gave 8 GiB in 4 us: 2,147,483 GB/s.
double one_rank_algbw_over_bound(Bytes bytes) {
  const sim::HardwareSpec hw = sim::load_hardware("h200-1x", kHardwareLibrary);
  SimBenchRun run;
  run.ranks = {0};
  run.calls = {{CollectiveOp::all_reduce, static_cast<Elements>(bytes / 4), 4, 0}};
  run.timed_iters = 5;
  const Seconds t = run_bench_sim(hw, run).at(0).time_s;
  const double bound = hw.gpu.memory_bandwidth * hw.efficiency.memory_bandwidth / 2;
  return static_cast<double>(bytes) / t / bound;
}

TEST(BenchOneRank, CopiesItsBufferAtNoMoreThanTheStreamingRate) {
  for (Bytes b : {Bytes{1} << 20, Bytes{1} << 30, Bytes{8} << 30}) EXPECT_LE(one_rank_algbw_over_bound(b), 1 + 1e-9) << b;
  // Large copies run at that rate (launches hidden behind them).
  EXPECT_GE(one_rank_algbw_over_bound(Bytes{1} << 30), 0.99);
}

TEST(BenchOneRank, PlantedBugFreeOneRankIsCaught) {
  const ScopedFault bug(Fault::bench_one_rank_free);
  EXPECT_GT(one_rank_algbw_over_bound(Bytes{8} << 30), 100.0);
}

}  // namespace
}  // namespace dpt
