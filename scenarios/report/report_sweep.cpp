#include "scenarios/report/report_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/precision.hpp"
#include "scenarios/report/report_assumptions.hpp"
#include "scenarios/report/report_axes.hpp"
#include "scenarios/report/report_format.hpp"

namespace dpt::report {
namespace {

using scenario::PointResult;
using scenario::PointStatus;
using scenario::SweepResult;

// The charts' x-axis: the GPU count, a numeric swept field, or none (one bar per
// configuration) when neither varies.
struct XAxis {
  std::optional<SweptField> field;  // empty: the GPU count
  bool categories = false;          // neither varies: bars
  double x(const PointResult& p) const {
    return field ? leading_number(axis_value(p, field->axis)).value_or(0) : static_cast<double>(p.gpus());
  }
  std::string label() const { return field ? field->label : "GPUs"; }
  std::string axis() const { return field ? field->axis : ""; }
};

XAxis choose_x_axis(const SweepResult& r) {
  XAxis a;
  a.field = x_axis_field(r);
  a.categories = !a.field && !gpu_count_varies(r);
  return a;
}

struct Series {
  std::string label;
  std::vector<const PointResult*> points;  // ok points, by x
};

std::vector<Series> group_series(const SweepResult& r, const XAxis& x) {
  std::vector<Series> out;
  for (const auto& p : r.points) {
    if (!point_ok(p)) continue;
    const std::string label = series_label(p, x.axis());
    auto it = std::find_if(out.begin(), out.end(), [&](const Series& s) { return s.label == label; });
    if (it == out.end()) it = out.insert(out.end(), Series{label, {}});
    it->points.push_back(&p);
  }
  for (auto& s : out)
    std::stable_sort(s.points.begin(), s.points.end(),
                     [&](const PointResult* a, const PointResult* b) { return x.x(*a) < x.x(*b); });
  return out;
}

// A point as a bar's label: its series and its x value.
// With a single series its name is left out (the chart's legend or title says it).
std::string point_label(const Series& s, const PointResult& p, const XAxis& x, bool single_series = false) {
  if (x.categories) return s.label;
  const std::string value = x.field ? field_value_text(x.field->axis, axis_value(p, x.field->axis))
                                    : fmt::format("{} GPU{}", p.gpus(), p.gpus() == 1 ? "" : "s");
  return single_series ? value : fmt::format("{}, {}", s.label, value);
}

std::optional<double> ideal_throughput(const PointResult& p) {
  const auto& rep = *p.report;
  if (!rep.single_device_step_time_s || *rep.single_device_step_time_s <= 0) return std::nullopt;
  return static_cast<double>(p.gpus()) * static_cast<double>(p.batch_per_device) / *rep.single_device_step_time_s;
}

std::string point_status_text(const PointResult& p) {
  if (p.status == PointStatus::ok) return "ok";
  // An out-of-memory reason already says so ("out of memory on sim:gpu0: ..."): not twice.
  const std::string name = scenario::point_status_name(p.status);
  std::string spoken = name;
  std::replace(spoken.begin(), spoken.end(), '_', ' ');
  if (p.reason.rfind(spoken, 0) == 0) return p.reason;
  return fmt::format("{}: {}", name, p.reason);
}

Bytes gpu0_peak(const PointResult& p) {
  return p.report && !p.report->devices_detail.empty() ? p.report->devices_detail[0].peak_memory_bytes : 0;
}
Bytes max_other_peak(const PointResult& p) {
  Bytes m = 0;
  if (!p.report) return 0;
  for (size_t i = 1; i < p.report->devices_detail.size(); ++i)
    m = std::max(m, p.report->devices_detail[i].peak_memory_bytes);
  return m;
}

// One bar per configuration when neither the GPU count nor a numeric field varies.
Chart throughput_bars(const std::vector<Series>& series) {
  Chart c{"throughput", "Throughput by configuration", "", "samples/s", ChartKind::clustered_bars, false, {}, {}, ""};
  ChartSeries bars{"samples/s", {}, {}, false, 0};
  for (const auto& s : series)
    for (const auto* p : s.points) {
      c.categories.push_back(s.label);
      bars.values.push_back(point_throughput(*p));
    }
  c.series = {bars};
  c.caption = "Predicted samples per second of each configuration.";
  return c;
}

// Throughput against a swept field (bucket size, PCIe generation), a line per series.
Chart throughput_against_field(const std::vector<Series>& series, const XAxis& x) {
  Chart c{"throughput", "Throughput against " + swept_field_label(x.field->axis, {}), x.label(), "samples/s",
          ChartKind::lines, false, {}, {}, ""};
  std::set<double> tics;
  for (size_t i = 0; i < series.size(); ++i) {
    ChartSeries cs{series[i].label, {}, {}, false, static_cast<int>(i)};
    for (const auto* p : series[i].points) {
      cs.points.emplace_back(x.x(*p), point_throughput(*p));
      tics.insert(x.x(*p));
    }
    c.series.push_back(cs);
  }
  c.x_tics.assign(tics.begin(), tics.end());
  // Values spanning more than a decade (bucket sizes 1-100 MiB) read best on a log axis.
  c.log10_x = !tics.empty() && *tics.begin() > 0 && *tics.rbegin() / *tics.begin() >= 10;
  c.caption = fmt::format("Predicted samples per second at each value of the swept field ({}).", x.label());
  return c;
}

Chart throughput_chart(const std::vector<Series>& series, bool log2_x, const XAxis& x) {
  if (x.categories) return throughput_bars(series);
  if (x.field) return throughput_against_field(series, x);
  Chart c{"throughput", "Throughput against GPU count", "GPUs", "samples/s", ChartKind::lines, log2_x, {}, {}, ""};
  std::vector<std::vector<std::pair<double, double>>> ideals;
  for (size_t i = 0; i < series.size(); ++i) {
    ChartSeries s{series[i].label, {}, {}, false, static_cast<int>(i)};
    std::vector<std::pair<double, double>> ideal;
    for (const auto* p : series[i].points) {
      s.points.emplace_back(p->gpus(), point_throughput(*p));
      if (auto v = ideal_throughput(*p)) ideal.emplace_back(p->gpus(), *v);
    }
    c.series.push_back(s);
    for (auto [gx, gy] : s.points) c.x_tics.push_back(gx);
    // One dashed ideal line per distinct ideal (DataParallel and DDP on the same
    // hardware with the same per-device batch share theirs).
    const bool seen = std::any_of(ideals.begin(), ideals.end(), [&](const auto& other) {
      if (other.size() != ideal.size()) return false;
      for (size_t k = 0; k < ideal.size(); ++k)
        if (other[k].first != ideal[k].first || std::fabs(other[k].second - ideal[k].second) > 1e-9 * ideal[k].second)
          return false;
      return true;
    });
    if (!ideal.empty() && !seen) {
      ideals.push_back(ideal);
      c.series.push_back({"ideal, " + series[i].points.front()->hardware, ideal, {}, true, static_cast<int>(i)});
    }
  }
  std::sort(c.x_tics.begin(), c.x_tics.end());
  c.x_tics.erase(std::unique(c.x_tics.begin(), c.x_tics.end()), c.x_tics.end());
  c.caption = "Predicted samples per second; dashed: the single-GPU throughput times the GPU count (linear scaling).";
  return c;
}

Chart efficiency_chart(const std::vector<Series>& series, bool log2_x) {
  Chart c{"efficiency", "Scaling efficiency", "GPUs", "% of linear scaling", ChartKind::lines, log2_x, {}, {}, ""};
  for (size_t i = 0; i < series.size(); ++i) {
    ChartSeries s{series[i].label, {}, {}, false, static_cast<int>(i)};
    for (const auto* p : series[i].points)
      if (p->report->scaling_efficiency) {
        s.points.emplace_back(p->gpus(), 100.0 * *p->report->scaling_efficiency);
        c.x_tics.push_back(p->gpus());
      }
    if (!s.points.empty()) c.series.push_back(s);
  }
  std::sort(c.x_tics.begin(), c.x_tics.end());
  c.x_tics.erase(std::unique(c.x_tics.begin(), c.x_tics.end()), c.x_tics.end());
  c.caption = "Throughput divided by GPU count times single-GPU throughput at the same per-GPU batch.";
  return c;
}

Chart breakdown_chart(const std::vector<Series>& series, const XAxis& x) {
  Chart c{"breakdown", "Where the step time goes", "", "ms per step", ChartKind::stacked_bars, false, {}, {}, ""};
  std::vector<const PointResult*> shown;
  size_t total = 0;
  for (const auto& s : series) total += s.points.size();
  for (const auto& s : series) {
    if (total <= 24) shown.insert(shown.end(), s.points.begin(), s.points.end());
    else shown.push_back(s.points.back());  // too many bars: each series at its largest GPU count
  }
  ChartSeries compute{"compute", {}, {}, false, 0}, comm{"exposed communication", {}, {}, false, 1},
      dispatch{"dispatch", {}, {}, false, 2}, interference{"interference", {}, {}, false, 3},
      optim{"optimizer", {}, {}, false, 4};
  for (const auto* p : shown) {
    const auto& owner = *std::find_if(series.begin(), series.end(), [&](const Series& s) {
      return std::find(s.points.begin(), s.points.end(), p) != s.points.end();
    });
    c.categories.push_back(point_label(owner, *p, x, series.size() == 1));
    const auto& b = p->report->breakdown_s;
    compute.values.push_back(b.compute * 1e3);
    comm.values.push_back(b.exposed_communication * 1e3);
    dispatch.values.push_back(b.dispatch * 1e3);
    interference.values.push_back(b.interference * 1e3);
    optim.values.push_back(b.optimizer * 1e3);
  }
  c.series = {compute, comm, dispatch, interference, optim};
  c.caption = total <= 24 ? fmt::format("Each bar is one point (series and {}).", x.categories ? "configuration" : x.label())
                          : "Each series at its largest x value (the CSV has every point).";
  return c;
}

// Per-GPU peak memory of each series at its largest single-node point.
std::optional<Chart> memory_chart(const std::vector<Series>& series) {
  Chart c{"memory", "Peak memory per GPU", "", "GiB", ChartKind::clustered_bars, false, {}, {}, ""};
  size_t gpus = 0;
  for (const auto& s : series) {
    const PointResult* best = nullptr;
    for (const auto* p : s.points)
      if (p->nodes == 1 && !p->report->devices_detail.empty()) best = p;
    if (!best || c.series.size() >= 4) continue;
    ChartSeries cs{fmt::format("{} ({} GPUs)", s.label, best->gpus()), {}, {}, false,
                   static_cast<int>(&s - series.data())};
    for (const auto& d : best->report->devices_detail)
      cs.values.push_back(static_cast<double>(d.peak_memory_bytes) / static_cast<double>(kGiB));
    gpus = std::max(gpus, cs.values.size());
    c.series.push_back(cs);
  }
  if (c.series.empty()) return std::nullopt;
  for (size_t i = 0; i < gpus; ++i) c.categories.push_back(fmt::format("GPU {}", i));
  // Each distinct GPU capacity as a line: 3 GiB of 80 GiB must not look full.
  std::set<Bytes> capacities;
  for (const auto& s : series)
    for (const auto* p : s.points)
      if (!p->report->devices_detail.empty() && p->report->devices_detail[0].capacity_bytes)
        capacities.insert(*p->report->devices_detail[0].capacity_bytes);
  for (Bytes cap : capacities)
    c.y_lines.push_back({static_cast<double>(cap) / static_cast<double>(kGiB), "capacity " + format_gib(cap)});
  c.caption = "Highest live memory of each GPU during the step; dashed: the GPU's memory capacity. DataParallel's GPU 0 "
              "also holds the gathered outputs, the loss, the reduced gradients and the optimizer state.";
  return c;
}

}  // namespace

std::string strategy_display_name(const std::string& strategy) {
  if (strategy == "dp") return "DataParallel";
  if (strategy == "ddp") return "DDP";
  return strategy;
}

bool sweep_meets_target(const SweepResult& r) {
  if (!r.target) return true;
  const double need = r.target->required_samples_per_s();
  return std::any_of(r.points.begin(), r.points.end(),
                     [&](const PointResult& p) { return point_ok(p) && point_throughput(p) >= need; });
}

std::string sweep_csv(const SweepResult& r) {
  std::string out =
      "index,hardware,gpu,model,strategy,devices_per_node,nodes,gpus,batch_global,batch_per_device,dtype,"
      "bucket_cap_mb,optimizer,status,step_time_s,compute_s,exposed_communication_s,dispatch_s,optimizer_s,"
      "throughput_samples_per_s,single_device_step_time_s,scaling_efficiency,gpu0_peak_memory_bytes,"
      "max_other_gpu_peak_memory_bytes,trace,reason,interference_s,precision,tokens_per_s,exposed_host_copy_s,"
      "accumulate,comm_hook,checkpoint_layers";
  // Swept fields without a column above (hardware overrides, memory_format, inputs,
  // checkpoint, comm_hook, ...): one each, named as the scenario names it, so that every
  // point's row says what it ran.
  const std::set<std::string> has_column = {"model",     "batch",      "batch_per_device", "dtype",     "bucket_cap_mb",
                                            "optimizer", "precision",  "accumulate",       "comm_hook", "checkpoint"};
  std::vector<std::string> override_axes;
  for (const auto& f : extra_swept_fields(r))
    if (!has_column.count(f.axis)) {
      override_axes.push_back(f.axis);
      out += "," + csv_field(f.axis);
    }
  out += "\n";
  auto opt = [](const std::optional<double>& v) { return v ? fmt::format("{:.9g}", *v) : std::string(); };
  for (const auto& p : r.points) {
    const bool has = p.report.has_value();
    std::vector<std::string> f = {std::to_string(p.index), p.hardware, p.gpu_name, p.model, p.strategy,
                                  std::to_string(p.devices), std::to_string(p.nodes), std::to_string(p.gpus()),
                                  std::to_string(p.batch_global), std::to_string(p.batch_per_device), p.dtype,
                                  fmt::format("{:g}", p.bucket_cap_mb), p.optimizer, scenario::point_status_name(p.status)};
    if (has && p.report->step_time_s) {
      const auto& b = p.report->breakdown_s;
      f.push_back(opt(p.report->step_time_s));
      for (double v : {b.compute, b.exposed_communication, b.dispatch, b.optimizer}) f.push_back(fmt::format("{:.9g}", v));
    } else {
      f.insert(f.end(), 5, "");
    }
    f.push_back(has ? opt(p.report->throughput_samples_per_s) : "");
    f.push_back(has ? opt(p.report->single_device_step_time_s) : "");
    f.push_back(has ? opt(p.report->scaling_efficiency) : "");
    f.push_back(has && !p.report->devices_detail.empty() ? std::to_string(gpu0_peak(p)) : "");
    f.push_back(has && p.report->devices_detail.size() > 1 ? std::to_string(max_other_peak(p)) : "");
    f.push_back(has ? p.report->trace : "");
    f.push_back(p.reason);
    // Appended, so that the columns before it keep their places for existing readers.
    f.push_back(has && p.report->step_time_s ? fmt::format("{:.9g}", p.report->breakdown_s.interference) : "");
    f.push_back(!p.precision.empty() ? p.precision : has && p.report->precision ? *p.report->precision : "");
    // Appended too: tokens/s for token models, the batch's host copy apart from the exposed
    // communication, and the DDP settings a point ran with (the swept value where the
    // point has no report: out of memory, skipped).
    f.push_back(has && p.report->throughput_samples_per_s && p.report->tokens_per_sample
                    ? fmt::format("{:.9g}", *p.report->throughput_samples_per_s * *p.report->tokens_per_sample)
                    : "");
    f.push_back(has && p.report->step_time_s ? fmt::format("{:.9g}", p.report->breakdown_s.exposed_host_copy) : "");
    const auto setting = [&](const std::string& axis, const std::string& from_report) {
      return has ? from_report : axis_value(p, axis);
    };
    f.push_back(setting("accumulate", has ? std::to_string(p.report->accumulate.value_or(1)) : ""));
    f.push_back(setting("comm_hook", has ? p.report->comm_hook.value_or("none") : ""));
    // Layers per checkpointed segment, as the report records them: a swept "none" is 0,
    // "every" 1 (each layer its own segment), so the column holds numbers only.
    std::string checkpoint = setting("checkpoint", has ? std::to_string(p.report->checkpoint_layers.value_or(0)) : "");
    if (checkpoint == "none") checkpoint = "0";
    if (checkpoint == "every") checkpoint = "1";
    f.push_back(checkpoint);
    for (const auto& axis : override_axes) f.push_back(axis_value(p, axis));
    std::string line;
    for (size_t i = 0; i < f.size(); ++i) line += fmt::format("{}{}", i ? "," : "", csv_field(f[i]));
    out += line + "\n";
  }
  return out;
}

void move_trace_paths(SweepResult& r, const std::string& from_dir, const std::string& to_dir) {
  namespace fs = std::filesystem;
  for (auto& p : r.points) {
    if (!p.report || p.report->trace.empty()) continue;
    const auto rel = fs::path(p.report->trace).lexically_relative(from_dir);
    if (!rel.empty() && *rel.begin() != "..") p.report->trace = (fs::path(to_dir) / rel).string();
  }
}

namespace {

// GPU 0's peak against the busiest other GPU, per multi-GPU point of the series.
ReportTable memory_table(const std::vector<Series>& series, const XAxis& x) {
  ReportTable t{"Peak memory: GPU 0 against the busiest other GPU", {"configuration", "GPU 0", "other GPUs (max)",
                                                                    "GPU 0 extra", "capacity"},
                {}, {false, true, true, true, true}};
  for (const auto& s : series)
    for (const auto* p : s.points) {
      if (p->report->devices_detail.size() < 2) continue;
      const auto cap = p->report->devices_detail[0].capacity_bytes;
      t.rows.push_back({x.field ? point_label(s, *p, x) : fmt::format("{} ({} GPUs)", s.label, p->gpus()),
                        format_gib(gpu0_peak(*p)),
                        format_gib(max_other_peak(*p)), format_gib(gpu0_peak(*p) - max_other_peak(*p)),
                        cap ? format_gib(*cap) : "n/a"});
    }
  return t;
}

// The chart sections: throughput (and scaling efficiency against the GPU count),
// the step time's breakdown, and memory when any point has more than one GPU.
void add_chart_sections(const SweepResult& r, ReportDocument& doc) {
  const XAxis x = choose_x_axis(r);
  const auto series = group_series(r, x);
  if (series.empty()) return;
  int max_gpus = 1;
  for (const auto& p : r.points) max_gpus = std::max(max_gpus, p.gpus());
  const bool log2_x = max_gpus > 8;
  ReportSection scaling{x.field ? "Throughput against " + x.label() : x.categories ? "Throughput" : "Scaling",
                        {}, {throughput_chart(series, log2_x, x)}, {}, {}};
  if (!x.field && !x.categories)
    if (auto eff = efficiency_chart(series, log2_x); !eff.series.empty()) scaling.charts.push_back(eff);
  doc.sections.push_back(scaling);
  doc.sections.push_back({"Step time", {"The step time split into compute, communication not hidden behind it, host "
                                        "dispatch not hidden behind device work, and the optimizer's update."},
                          {breakdown_chart(series, x)}, {}, {}});
  if (auto mem = memory_chart(series)) doc.sections.push_back({"Memory", {}, {*mem}, {memory_table(series, x)}, {}});
}

// One row per point: the fixed columns, then one per swept field that none of them
// shows (with its unit), then the figures and the status.
ReportTable every_point_table(const SweepResult& r) {
  const auto extra = extra_swept_fields(r);
  ReportTable all{"", {"#", "hardware", "strategy", "GPUs"}, {}, {true, false, false, true}};
  for (const auto& f : extra) {
    all.headers.push_back(f.label);
    all.right_aligned.push_back(f.numeric);
  }
  for (const char* h : {"batch (global / per GPU)", "step time", "samples/s", "efficiency", "GPU 0 peak"}) {
    all.headers.push_back(h);
    all.right_aligned.push_back(true);
  }
  all.headers.push_back("status");
  all.right_aligned.push_back(false);
  for (const auto& p : r.points) {
    const bool has = point_ok(p);
    std::vector<std::string> row = {std::to_string(p.index), p.hardware, strategy_display_name(p.strategy),
                                    p.gpus() ? std::to_string(p.gpus()) : ""};
    for (const auto& f : extra) row.push_back(axis_value(p, f.axis));
    for (auto cell : {p.batch_global ? fmt::format("{} / {}", p.batch_global, p.batch_per_device) : "",
                      has ? format_duration(*p.report->step_time_s) : "", has ? format_figure(point_throughput(p)) : "",
                      has && p.report->scaling_efficiency ? format_percent(*p.report->scaling_efficiency) : "",
                      p.report && !p.report->devices_detail.empty() ? format_gib(gpu0_peak(p)) : ""})
      row.push_back(cell);
    row.push_back(point_status_text(p));
    all.rows.push_back(row);
  }
  return all;
}

// A link to each point's Chrome trace, relative to the report's folder when known.
std::vector<ReportLink> trace_links(const SweepResult& r, const std::string& report_dir) {
  namespace fs = std::filesystem;
  std::vector<ReportLink> traces;
  for (const auto& p : r.points) {
    if (!p.report || p.report->trace.empty()) continue;
    std::string href = p.report->trace;
    if (!report_dir.empty()) {
      std::error_code ec;
      auto rel = fs::relative(fs::absolute(p.report->trace), fs::absolute(report_dir), ec);
      if (!ec && !rel.empty()) href = rel.string();
    }
    traces.push_back({fmt::format("point {}: {} {} on {} GPU{}", p.index, p.hardware, strategy_display_name(p.strategy),
                                  p.gpus(), p.gpus() == 1 ? "" : "s"),
                      href});
  }
  return traces;
}

}  // namespace

ReportDocument build_sweep_report(const SweepResult& r, const SweepReportOptions& options) {
  ReportDocument doc;
  doc.title = fmt::format("dptwin report: {}", r.scenario_name);
  doc.question = r.question;
  doc.answer = sweep_answer(r);
  doc.generated_by = options.generated_by;
  doc.csv = sweep_csv(r);
  doc.files["results.json"] = scenario::sweep_result_to_json(r).dump(1) + "\n";
  if (!options.scenario_text.empty()) doc.files["scenario.yaml"] = options.scenario_text;
  add_chart_sections(r, doc);
  doc.sections.push_back({"Every point", {"Skipped points are configurations the hardware cannot run; out-of-memory "
                                          "points name the device and what filled it."},
                          {}, {every_point_table(r)}, {}});
  std::set<std::string> warnings;
  for (const auto& p : r.points)
    if (p.report)
      for (const auto& w : p.report->warnings) warnings.insert(w);
  if (!warnings.empty()) doc.sections.push_back({"Warnings", {warnings.begin(), warnings.end()}, {}, {}, {}});
  if (options.assumptions) doc.sections.push_back(assumptions_section(r, *options.assumptions));
  const auto traces = trace_links(r, options.report_dir);
  if (!traces.empty())
    doc.sections.push_back({"Traces", {"Chrome traces (one process per GPU, one thread per stream); open them in "
                                       "Perfetto (ui.perfetto.dev) or chrome://tracing."},
                            {}, {}, traces});
  return doc;
}

}  // namespace dpt::report
