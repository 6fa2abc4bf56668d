// One measured interval of work on a device stream: what real backends record
// (CUDA events) to produce the same step report and Chrome trace as the twin.
// Plain C++ so the report code builds without CUDA.
#pragma once
#include <string>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/core/units.hpp"

namespace dpt {

struct TimedInterval {
  std::string name;        // op name ("gemm_fwd", "all_reduce") or phase name ("forward")
  OpKind kind = OpKind::compute;
  bool is_phase = false;   // a phase spans many ops
  int device = 0;
  int stream = 0;          // 0 compute, 1 communication
  Seconds start_s = 0;     // since the timeline's origin
  Seconds end_s = 0;
  double flops = 0;
  Bytes bytes = 0;         // read + written
};

// The intervals of one measured step on every device, with the step's wall time.
struct MeasuredStep {
  std::vector<TimedInterval> intervals;   // every device, seconds from one origin
  Seconds step_time_s = 0;                // the step's wall time (host clock, devices synchronised)
  std::vector<std::string> device_names;  // "cuda:0", ...; index = TimedInterval::device
};

}  // namespace dpt
