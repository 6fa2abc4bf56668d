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
#include "engine/parallel/trainer.hpp"
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

// The measured step report's description of the run, in predict's terms: one optimizer
// step of K = accumulate micro-batches counts all K in batch_global (its time covers them
// all) and one micro-batch per GPU in batch_per_device; `per_device` is each GPU's samples
// over the whole step (K micro-batches). Until 2026-12-07 batch_global was one micro-batch's,
// so a measured throughput with --accumulate K read K times too low against predict's.
StepReport measured_run_report(const TrainConfig& c, const std::string& backend, const std::string& model,
                               const std::string& strategy, int devices, const std::vector<std::int64_t>& per_device,
                               DType dtype);

// One complete event per op interval; phases (is_phase) go on thread 2 of their device.
ChromeTrace measured_trace(const MeasuredStep& step);

}  // namespace dpt
