// Measured timing in the twin's formats: intervals recorded on a real backend
// (CUDA events around every op, engine/cuda/cuda_timeline.hpp) become the step
// report's breakdown and per-device busy time (sim/step_report.hpp) and a Chrome
// trace with one process per device and one thread per stream
// (sim/chrome_trace.hpp), so measured and predicted steps lie side by side.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "engine/core/timed_interval.hpp"
#include "sim/twin/chrome_trace.hpp"
#include "sim/twin/step_report.hpp"

namespace dpt {

// Total length covered by a set of [start, end) intervals (overlaps counted once).
Seconds union_length(std::vector<std::pair<Seconds, Seconds>> spans);

// The breakdown on the busiest device (largest covered time), by the report's
// rule: compute first (forward, loss, backward kernels), then the optimizer's
// update kernels not under compute, then copies and collectives not under either
// (exposed communication); dispatch is the rest of the step when no device work ran.
// Optimizer kernels are the ops named "sgd_step" and "adamw_step".
StepBreakdown measured_breakdown(const MeasuredStep& step);

// Fills `report`'s step time, breakdown, throughput (from batch_global) and each
// device's busy time; memory fields are left to the caller (MemoryTracker).
void fill_measured_report(StepReport& report, const MeasuredStep& step);

// One complete event per op interval; phases (is_phase) go on thread 2 of their device.
ChromeTrace measured_trace(const MeasuredStep& step);

}  // namespace dpt
