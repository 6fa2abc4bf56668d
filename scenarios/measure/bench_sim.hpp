// The twin's collective benchmark, as `dptwin bench --backend sim` runs it and as
// the fidelity table predicts its collective entries: one actor per rank runs every
// size's warm-up then timed calls; a size's time is from its first timed call's start
// to its last one's end, over the timed calls (nccl-tests' window).
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
  // Prefixed to the message of a plan that cannot run (a forced algorithm, say), so
  // the error names the caller's flag or file line.
  std::string plan_error_prefix;
};

// Simulates `run` on `hw` in its own SimGrid process; one row per call. Throws
// std::invalid_argument when a call cannot be planned, before any actor runs.
std::vector<SimBenchRow> run_bench_sim(const sim::HardwareSpec& hw, const SimBenchRun& run);

// nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md) by the engine's op.
double busbw_factor(CollectiveOp op, int ranks);

}  // namespace dpt
