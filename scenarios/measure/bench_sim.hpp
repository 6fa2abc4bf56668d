// The twin's collective benchmark, as `dptwin bench --backend sim` runs it and as
// the fidelity table predicts its collective entries: one actor per rank runs every
// size's warm-up then timed calls; a size's time is from its first timed call's start
// to its last one's end, over the timed calls (nccl-tests' window).
//
// The host side is timed as nccl-tests runs it: one host thread drives gpus_per_thread
// GPUs (its -g; 1 under mpirun or torchrun, a process per GPU) and, for every call, enqueues
// the collective's kernel on each of its GPUs in turn, one kernel launch each. The thread
// runs ahead of the GPUs (launches are asynchronous) and synchronises before each size's
// warm-up and before its timed loop, where the window starts. A call starts on a GPU no
// sooner than its launch, and the collective only when its last GPU has launched: with
// -g 8 a small call costs about 8 launches however fast the GPUs are.
#pragma once
#include <string>
#include <vector>

#include "engine/core/collective.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/net/hardware.hpp"

namespace dpt {

struct SimBenchRow {
  Seconds time_s = 0;     // one call, averaged over the timed calls
  std::string algorithm;  // what ran: "ring", "tree", "nvls", ...
  std::string protocol;   // "LL", "LL128", "Simple"
  int channels = 0;       // NCCL channels of the plan
};

struct SimBenchRun {
  std::vector<int> ranks;                   // the GPUs taking part
  std::vector<CollectiveCall> calls;        // one per size, in order
  int warmup_iters = 0;                     // untimed calls per size first
  int timed_iters = 1;                      // timed calls per size (>= 1)
  sim::CollectiveSettings settings;         // a forced algorithm or protocol, if any
  int gpus_per_thread = 1;                  // nccl-tests -g: GPUs one host thread launches for
  // Host time of one kernel launch (the GPU's kernel_launch_latency when negative).
  Seconds launch_s = -1;
  // Prefixed to the message of a plan that cannot run (a forced algorithm, say), so
  // the error names the caller's flag or file line.
  std::string plan_error_prefix;
};

// Simulates `run` on `hw` in its own SimGrid process; one row per call. Throws
// std::invalid_argument when a call cannot be planned, before any actor runs.
std::vector<SimBenchRow> run_bench_sim(const sim::HardwareSpec& hw, const SimBenchRun& run);

// When the host thread of a rank has launched that rank's kernel for call `call_index`
// (0-based, counted from the thread's last synchronisation): the thread launches each call
// on its GPUs in slot order, `launch_s` each, so after call_index x gpus_per_thread + slot + 1
// launches. Throws std::invalid_argument unless 0 <= slot < gpus_per_thread.
Seconds host_launch_offset_s(int call_index, int slot, int gpus_per_thread, Seconds launch_s);

// nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md) by the engine's op.
double busbw_factor(CollectiveOp op, int ranks);

}  // namespace dpt
