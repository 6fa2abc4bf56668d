#include "scenarios/report/report_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/precision.hpp"
#include "scenarios/report/report_format.hpp"

namespace dpt::report {
namespace {

using scenario::PointResult;
using scenario::PointStatus;
using scenario::SweepResult;

bool is_count_axis(const std::string& a) { return a == "devices" || a == "nodes" || a == "gpus"; }

bool ok(const PointResult& p) {
  return p.status == PointStatus::ok && p.report && p.report->step_time_s && p.report->throughput_samples_per_s;
}
double throughput(const PointResult& p) { return *p.report->throughput_samples_per_s; }

// The series a point belongs to: every swept value except the GPU count.
std::string series_label(const PointResult& p) {
  std::vector<std::string> parts;
  for (const auto& [axis, value] : p.axes) {
    if (is_count_axis(axis)) continue;
    parts.push_back(axis == "strategy" ? strategy_display_name(value) : value);
  }
  if (parts.empty()) return p.hardware + " " + strategy_display_name(p.strategy);
  std::string out;
  for (const auto& s : parts) out += fmt::format("{}{}", out.empty() ? "" : " ", s);
  return out;
}

struct Series {
  std::string label;
  std::vector<const PointResult*> points;  // ok points, by GPU count
};

std::vector<Series> group_series(const SweepResult& r) {
  std::vector<Series> out;
  for (const auto& p : r.points) {
    if (!ok(p)) continue;
    const std::string label = series_label(p);
    auto it = std::find_if(out.begin(), out.end(), [&](const Series& s) { return s.label == label; });
    if (it == out.end()) it = out.insert(out.end(), Series{label, {}});
    it->points.push_back(&p);
  }
  for (auto& s : out)
    std::stable_sort(s.points.begin(), s.points.end(),
                     [](const PointResult* a, const PointResult* b) { return a->gpus() < b->gpus(); });
  return out;
}

std::optional<double> ideal_throughput(const PointResult& p) {
  const auto& rep = *p.report;
  if (!rep.single_device_step_time_s || *rep.single_device_step_time_s <= 0) return std::nullopt;
  return static_cast<double>(p.gpus()) * static_cast<double>(p.batch_per_device) / *rep.single_device_step_time_s;
}

std::string config_phrase(const PointResult& p) {
  return fmt::format("{}x {} with {}", p.gpus(), p.gpu_name.empty() ? p.hardware : p.gpu_name,
                     strategy_display_name(p.strategy));
}

std::string point_status_text(const PointResult& p) {
  if (p.status == PointStatus::ok) return "ok";
  return fmt::format("{}: {}", scenario::point_status_name(p.status), p.reason);
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

Chart throughput_chart(const std::vector<Series>& series, bool log2_x) {
  Chart c{"throughput", "Throughput against GPU count", "GPUs", "samples/s", ChartKind::lines, log2_x, {}, {}, ""};
  std::vector<std::vector<std::pair<double, double>>> ideals;
  for (size_t i = 0; i < series.size(); ++i) {
    ChartSeries s{series[i].label, {}, {}, false, static_cast<int>(i)};
    std::vector<std::pair<double, double>> ideal;
    for (const auto* p : series[i].points) {
      s.points.emplace_back(p->gpus(), throughput(*p));
      if (auto v = ideal_throughput(*p)) ideal.emplace_back(p->gpus(), *v);
    }
    c.series.push_back(s);
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
  c.caption = "Predicted samples per second; dashed: the single-GPU throughput times the GPU count (linear scaling).";
  return c;
}

Chart efficiency_chart(const std::vector<Series>& series, bool log2_x) {
  Chart c{"efficiency", "Scaling efficiency", "GPUs", "% of linear scaling", ChartKind::lines, log2_x, {}, {}, ""};
  for (size_t i = 0; i < series.size(); ++i) {
    ChartSeries s{series[i].label, {}, {}, false, static_cast<int>(i)};
    for (const auto* p : series[i].points)
      if (p->report->scaling_efficiency) s.points.emplace_back(p->gpus(), 100.0 * *p->report->scaling_efficiency);
    if (!s.points.empty()) c.series.push_back(s);
  }
  c.caption = "Throughput divided by GPU count times single-GPU throughput at the same per-GPU batch.";
  return c;
}

Chart breakdown_chart(const std::vector<Series>& series) {
  Chart c{"breakdown", "Where the step time goes", "", "ms per step", ChartKind::stacked_bars, false, {}, {}, ""};
  std::vector<const PointResult*> shown;
  size_t total = 0;
  for (const auto& s : series) total += s.points.size();
  for (const auto& s : series) {
    if (total <= 24) shown.insert(shown.end(), s.points.begin(), s.points.end());
    else shown.push_back(s.points.back());  // too many bars: each series at its largest GPU count
  }
  ChartSeries compute{"compute", {}, {}, false, 0}, comm{"exposed communication", {}, {}, false, 1},
      dispatch{"dispatch", {}, {}, false, 2}, optim{"optimizer", {}, {}, false, 4};
  for (const auto* p : shown) {
    c.categories.push_back(fmt::format("{} {}", series_label(*p), p->gpus()));
    const auto& b = p->report->breakdown_s;
    compute.values.push_back(b.compute * 1e3);
    comm.values.push_back(b.exposed_communication * 1e3);
    dispatch.values.push_back(b.dispatch * 1e3);
    optim.values.push_back(b.optimizer * 1e3);
  }
  c.series = {compute, comm, dispatch, optim};
  c.caption = total <= 24 ? "Each bar is one point (series and GPU count)."
                          : "Each series at its largest GPU count (the CSV has every point).";
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
  c.caption = "Highest live memory of each GPU during the step. DataParallel's GPU 0 also holds the gathered outputs, "
              "the loss, the reduced gradients and the optimizer state.";
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
  return std::any_of(r.points.begin(), r.points.end(), [&](const PointResult& p) { return ok(p) && throughput(p) >= need; });
}

std::string sweep_answer(const SweepResult& r) {
  const PointResult* best = nullptr;
  for (const auto& p : r.points)
    if (ok(p) && (!best || throughput(p) > throughput(*best))) best = &p;
  if (!best) {
    std::map<std::string, int> reasons;
    for (const auto& p : r.points) reasons[scenario::point_status_name(p.status)]++;
    std::string why;
    for (const auto& [k, n] : reasons) why += fmt::format("{}{} {}", why.empty() ? "" : ", ", n, k);
    return fmt::format("No configuration could be predicted ({}); see the table of points.", why);
  }
  std::string s = fmt::format("{} reach{} {} samples/s", config_phrase(*best), best->gpus() == 1 ? "es" : "",
                              format_figure(throughput(*best)));
  if (best->report->scaling_efficiency && best->gpus() > 1)
    s += fmt::format(" at {} scaling efficiency", format_percent(*best->report->scaling_efficiency));
  if (const auto& p = best->report->precision) {  // the number depends on it: say which
    try {
      s += fmt::format(" in {}", precision_description(precision_from_name(*p)));
    } catch (const std::invalid_argument&) {
      s += fmt::format(" in precision {}", *p);
    }
  }
  if (r.target) {
    const double need = r.target->required_samples_per_s();
    const PointResult* smallest = nullptr;
    for (const auto& p : r.points)
      if (ok(p) && throughput(p) >= need &&
          (!smallest || p.gpus() < smallest->gpus() ||
           (p.gpus() == smallest->gpus() && throughput(p) > throughput(*smallest))))
        smallest = &p;
    if (smallest)
      s += fmt::format("; {} meet{} the target of {}", config_phrase(*smallest), smallest->gpus() == 1 ? "s" : "",
                       r.target->describe());
    else
      s += fmt::format("; no configuration meets the target of {}", r.target->describe());
  }
  // DataParallel against DDP at the largest GPU count where both ran on the same hardware.
  const PointResult *dp = nullptr, *ddp = nullptr;
  for (const auto& a : r.points) {
    if (!ok(a) || a.strategy != "dp" || a.gpus() < 2) continue;
    for (const auto& b : r.points) {
      if (!ok(b) || b.strategy != "ddp" || b.hardware != a.hardware || b.gpus() != a.gpus() || b.model != a.model ||
          b.batch_per_device != a.batch_per_device)
        continue;
      if (!dp || a.gpus() > dp->gpus() || (a.gpus() == dp->gpus() && a.hardware == best->hardware)) {
        dp = &a;
        ddp = &b;
      }
    }
  }
  if (dp && ddp)
    s += fmt::format("; DataParallel reaches {} of DDP's throughput on {}x {}", format_percent(throughput(*dp) / throughput(*ddp)),
                     dp->gpus(), dp->gpu_name.empty() ? dp->hardware : dp->gpu_name);
  return s + ".";
}

std::string sweep_csv(const SweepResult& r) {
  std::string out =
      "index,hardware,gpu,model,strategy,devices_per_node,nodes,gpus,batch_global,batch_per_device,dtype,"
      "bucket_cap_mb,optimizer,status,step_time_s,compute_s,exposed_communication_s,dispatch_s,optimizer_s,"
      "throughput_samples_per_s,single_device_step_time_s,scaling_efficiency,gpu0_peak_memory_bytes,"
      "max_other_gpu_peak_memory_bytes,trace,reason\n";
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
    std::string line;
    for (size_t i = 0; i < f.size(); ++i) line += fmt::format("{}{}", i ? "," : "", csv_field(f[i]));
    out += line + "\n";
  }
  return out;
}

ReportDocument build_sweep_report(const SweepResult& r, const SweepReportOptions& options) {
  namespace fs = std::filesystem;
  ReportDocument doc;
  doc.title = fmt::format("dptwin report: {}", r.scenario_name);
  doc.question = r.question;
  doc.answer = sweep_answer(r);
  doc.generated_by = options.generated_by;
  doc.csv = sweep_csv(r);
  doc.files["results.json"] = scenario::sweep_result_to_json(r).dump(1) + "\n";
  if (!options.scenario_text.empty()) doc.files["scenario.yaml"] = options.scenario_text;

  const auto series = group_series(r);
  int max_gpus = 1;
  for (const auto& p : r.points) max_gpus = std::max(max_gpus, p.gpus());
  const bool log2_x = max_gpus > 8;
  if (!series.empty()) {
    ReportSection scaling{"Scaling", {}, {throughput_chart(series, log2_x)}, {}, {}};
    if (auto eff = efficiency_chart(series, log2_x); !eff.series.empty()) scaling.charts.push_back(eff);
    doc.sections.push_back(scaling);
    doc.sections.push_back({"Step time", {"The step time split into compute, communication not hidden behind it, host "
                                          "dispatch not hidden behind device work, and the optimizer's update."},
                            {breakdown_chart(series)}, {}, {}});
    if (auto mem = memory_chart(series)) {
      ReportTable t{"Peak memory: GPU 0 against the busiest other GPU", {"configuration", "GPU 0", "other GPUs (max)",
                                                                        "GPU 0 extra", "capacity"},
                    {}, {false, true, true, true, true}};
      for (const auto& s : series)
        for (const auto* p : s.points) {
          if (p->report->devices_detail.size() < 2) continue;
          const auto cap = p->report->devices_detail[0].capacity_bytes;
          t.rows.push_back({fmt::format("{} ({} GPUs)", s.label, p->gpus()), format_gib(gpu0_peak(*p)),
                            format_gib(max_other_peak(*p)), format_gib(gpu0_peak(*p) - max_other_peak(*p)),
                            cap ? format_gib(*cap) : "n/a"});
        }
      doc.sections.push_back({"Memory", {}, {*mem}, {t}, {}});
    }
  }

  ReportTable all{"", {"#", "hardware", "strategy", "GPUs", "batch (global / per GPU)", "step time", "samples/s",
                       "efficiency", "GPU 0 peak", "status"},
                  {}, {true, false, false, true, true, true, true, true, true, false}};
  std::vector<ReportLink> traces;
  for (const auto& p : r.points) {
    const bool has = ok(p);
    all.rows.push_back({std::to_string(p.index), p.hardware, strategy_display_name(p.strategy),
                        p.gpus() ? std::to_string(p.gpus()) : "",
                        p.batch_global ? fmt::format("{} / {}", p.batch_global, p.batch_per_device) : "",
                        has ? format_duration(*p.report->step_time_s) : "",
                        has ? format_figure(throughput(p)) : "",
                        has && p.report->scaling_efficiency ? format_percent(*p.report->scaling_efficiency) : "",
                        p.report && !p.report->devices_detail.empty() ? format_gib(gpu0_peak(p)) : "",
                        point_status_text(p)});
    if (p.report && !p.report->trace.empty()) {
      std::string href = p.report->trace;
      if (!options.report_dir.empty()) {
        std::error_code ec;
        auto rel = fs::relative(fs::absolute(p.report->trace), fs::absolute(options.report_dir), ec);
        if (!ec && !rel.empty()) href = rel.string();
      }
      traces.push_back({fmt::format("point {}: {} {} on {} GPU{}", p.index, p.hardware, strategy_display_name(p.strategy),
                                    p.gpus(), p.gpus() == 1 ? "" : "s"),
                        href});
    }
  }
  doc.sections.push_back({"Every point", {"Skipped points are configurations the hardware cannot run; out-of-memory "
                                          "points name the device and what filled it."},
                          {}, {all}, {}});
  std::set<std::string> warnings;
  for (const auto& p : r.points)
    if (p.report)
      for (const auto& w : p.report->warnings) warnings.insert(w);
  if (!warnings.empty()) doc.sections.push_back({"Warnings", {warnings.begin(), warnings.end()}, {}, {}, {}});
  if (!traces.empty())
    doc.sections.push_back({"Traces", {"Chrome traces (one process per GPU, one thread per stream); open them in "
                                       "Perfetto (ui.perfetto.dev) or chrome://tracing."},
                            {}, {}, traces});
  return doc;
}

}  // namespace dpt::report
