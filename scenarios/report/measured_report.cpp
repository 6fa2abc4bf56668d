#include "scenarios/report/measured_report.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace dpt {
namespace {

bool is_optimizer(const TimedInterval& t) { return t.name == "sgd_step" || t.name == "adamw_step"; }
bool is_communication(const TimedInterval& t) { return t.kind == OpKind::collective || t.kind == OpKind::copy; }

using Spans = std::vector<std::pair<Seconds, Seconds>>;

// Length of `a` not covered by `b`: |a ∪ b| - |b|.
Seconds uncovered(const Spans& a, const Spans& b) {
  Spans both = a;
  both.insert(both.end(), b.begin(), b.end());
  return std::max(0.0, union_length(both) - union_length(b));
}

}  // namespace

Seconds union_length(Spans spans) {
  std::sort(spans.begin(), spans.end());
  Seconds total = 0, cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& [s, e] : spans) {
    if (e <= s) continue;
    if (!open || s > cur_end) {
      if (open) total += cur_end - cur_start;
      cur_start = s;
      cur_end = e;
      open = true;
    } else {
      cur_end = std::max(cur_end, e);
    }
  }
  if (open) total += cur_end - cur_start;
  return total;
}

StepBreakdown measured_breakdown(const MeasuredStep& step) {
  std::map<int, Spans> all;
  for (const auto& t : step.intervals)
    if (!t.is_phase) all[t.device].push_back({t.start_s, t.end_s});
  StepBreakdown b;
  if (all.empty()) {
    b.dispatch = step.step_time_s;
    return b;
  }
  int busiest = all.begin()->first;
  Seconds most = -1;
  for (const auto& [d, spans] : all)
    if (const Seconds u = union_length(spans); u > most) {
      most = u;
      busiest = d;
    }
  Spans compute, optimizer, comm;
  for (const auto& t : step.intervals) {
    if (t.is_phase || t.device != busiest) continue;
    if (is_optimizer(t)) optimizer.push_back({t.start_s, t.end_s});
    else if (is_communication(t)) comm.push_back({t.start_s, t.end_s});
    else compute.push_back({t.start_s, t.end_s});
  }
  b.compute = union_length(compute);
  b.optimizer = uncovered(optimizer, compute);
  Spans compute_or_opt = compute;
  compute_or_opt.insert(compute_or_opt.end(), optimizer.begin(), optimizer.end());
  b.exposed_communication = uncovered(comm, compute_or_opt);
  b.dispatch = std::max(0.0, step.step_time_s - most);
  return b;
}

void fill_measured_report(StepReport& report, const MeasuredStep& step) {
  report.source = "measured";
  report.step_time_s = step.step_time_s;
  report.breakdown_s = measured_breakdown(step);
  if (step.step_time_s > 0 && report.batch_global > 0)
    report.throughput_samples_per_s = static_cast<double>(report.batch_global) / step.step_time_s;
  std::map<int, Spans> busy;
  for (const auto& t : step.intervals)
    if (!t.is_phase) busy[t.device].push_back({t.start_s, t.end_s});
  report.devices_detail.resize(std::max(report.devices_detail.size(), step.device_names.size()));
  for (size_t d = 0; d < step.device_names.size(); ++d) {
    auto& dr = report.devices_detail[d];
    if (dr.device.empty()) dr.device = step.device_names[d];
    dr.busy_s = union_length(busy[static_cast<int>(d)]);
  }
}

ChromeTrace measured_trace(const MeasuredStep& step) {
  ChromeTrace trace;
  for (size_t d = 0; d < step.device_names.size(); ++d) {
    const int pid = static_cast<int>(d);
    trace.name_process(pid, step.device_names[d]);
    trace.name_thread(pid, 0, "compute stream");
    trace.name_thread(pid, 1, "communication stream");
    trace.name_thread(pid, 2, "phases");
  }
  for (const auto& t : step.intervals)
    trace.add(TraceEvent{t.name, t.is_phase ? "phase" : trace_category(t.kind), t.device, t.is_phase ? 2 : t.stream,
                         t.start_s, std::max(0.0, t.end_s - t.start_s)});
  return trace;
}

StepReport measured_run_report(const TrainConfig& c, const std::string& backend, const std::string& model,
                               const std::string& strategy, int devices, const std::vector<std::int64_t>& per_device,
                               DType dtype) {
  const int k = std::max(1, c.strategy.accumulate);
  StepReport r;
  r.backend = backend;
  r.hardware = "measured";
  r.model = model;
  r.strategy = strategy;
  r.devices = devices;
  r.dtype = std::string(dtype_name(dtype));
  r.batch_global = c.batch * k;
  if (k > 1) r.accumulate = k;
  const std::int64_t most = per_device.empty() ? c.batch * k : *std::max_element(per_device.begin(), per_device.end());
  r.batch_per_device = most / k;
  return r;
}

}  // namespace dpt
