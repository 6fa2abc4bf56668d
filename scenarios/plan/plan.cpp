#include "scenarios/plan/plan.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "scenarios/report/report_format.hpp"
#include "scenarios/report/report_sweep.hpp"

namespace dpt::scenario {
namespace {

std::vector<int> powers_of_two_up_to(int max_gpus) {
  std::vector<int> v;
  for (int g = 1; g <= max_gpus; g *= 2) v.push_back(g);
  if (v.back() != max_gpus) v.push_back(max_gpus);
  return v;
}

YAML::Node target_node(const Target& t) {
  YAML::Node n;
  if (t.samples_per_s) n["samples_per_s"] = *t.samples_per_s;
  if (t.samples) n["samples"] = *t.samples;
  if (t.within_hours) n["within_hours"] = *t.within_hours;
  return n;
}

std::string emit(const YAML::Node& root) {
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

void add_plan_axes(YAML::Node& root, const std::vector<PlanCandidate>& candidates,
                   const std::vector<std::string>& strategies, int max_gpus) {
  YAML::Node sweep = root["sweep"].IsDefined() ? root["sweep"] : YAML::Node(YAML::NodeType::Map);
  YAML::Node hw(YAML::NodeType::Sequence), st(YAML::NodeType::Sequence), gpus(YAML::NodeType::Sequence);
  for (const auto& c : candidates) hw.push_back(c.hardware);
  for (const auto& s : strategies) st.push_back(s);
  for (int g : powers_of_two_up_to(max_gpus)) gpus.push_back(g);
  hw.SetStyle(YAML::EmitterStyle::Flow);
  st.SetStyle(YAML::EmitterStyle::Flow);
  gpus.SetStyle(YAML::EmitterStyle::Flow);
  sweep["hardware"] = hw;
  sweep["strategy"] = st;
  sweep["gpus"] = gpus;
  root["sweep"] = sweep;
}

std::string money(double v) { return fmt::format("{:.2f}", v); }

double exposed_fraction(const StepReport& r) {
  const double step = r.step_time_s.value_or(0);
  if (step <= 0) return 0;
  return (r.breakdown_s.exposed_communication + r.breakdown_s.dispatch) / step;
}

}  // namespace

const char* plan_verdict_name(PlanVerdictKind k) {
  switch (k) {
    case PlanVerdictKind::winner: return "winner";
    case PlanVerdictKind::more_expensive: return "more_expensive";
    case PlanVerdictKind::too_slow: return "too_slow";
    case PlanVerdictKind::communication_bound: return "communication_bound";
    case PlanVerdictKind::out_of_memory: return "out_of_memory";
    case PlanVerdictKind::infeasible: return "infeasible";
    case PlanVerdictKind::failed: return "failed";
  }
  return "?";
}

Scenario plan_scenario(const PlanRequest& q) {
  if (q.candidates.empty()) throw std::invalid_argument("plan: give at least one candidate --hardware");
  YAML::Node root;
  root["schema_version"] = kScenarioSchemaVersion;
  root["name"] = "plan-" + q.model;
  root["question"] = fmt::format("What is the cheapest configuration that trains {} at {}?", q.model, q.target.describe());
  root["model"] = q.model;
  root["batch_per_device"] = q.batch_per_device;
  if (q.global_batch) root["global_batch"] = *q.global_batch;
  root["dtype"] = std::string(dtype_name(q.dtype));
  if (q.precision) root["precision"] = std::string(precision_name(*q.precision));
  root["optimizer"] = optimizer_kind_name(q.optimizer);
  root["bucket_cap_mb"] = q.bucket_cap_mb;
  root["target"] = target_node(q.target);
  add_plan_axes(root, q.candidates, q.strategies, q.max_gpus);
  Scenario s = parse_scenario(emit(root), "<plan>");
  s.plan = PlanSpec{q.candidates, q.strategies, q.max_gpus};
  return s;
}

Scenario plan_scenario_from_file(const Scenario& f) {
  if (!f.plan) throw std::invalid_argument(fmt::format("{}: plan: missing key (dptwin plan needs a plan section)", f.file));
  if (!f.target) throw std::invalid_argument(fmt::format("{}: target: missing key (dptwin plan needs a target)", f.file));
  YAML::Node root = YAML::Load(f.text);
  for (const char* k : {"hardware", "strategy", "devices", "nodes", "gpus", "plan"}) root.remove(k);
  if (root["sweep"].IsDefined())
    for (const char* k : {"hardware", "strategy", "devices", "nodes", "gpus"}) root["sweep"].remove(k);
  add_plan_axes(root, f.plan->candidates, f.plan->strategies, f.plan->max_gpus);
  Scenario s = parse_scenario(emit(root), f.file + " (plan)", f.dir);
  s.plan = f.plan;
  return s;
}

PlanResult judge_plan(const SweepResult& sweep, const Target& target, const std::vector<PlanCandidate>& candidates) {
  PlanResult plan{sweep, target, candidates, {}, std::nullopt};
  const double need = target.required_samples_per_s();
  auto price_of = [&](const PointResult& p) -> std::optional<double> {
    for (const auto& c : candidates)
      if (c.hardware == p.hardware && c.price_per_gpu_hour) return *c.price_per_gpu_hour * p.gpus();
    return std::nullopt;
  };
  const bool all_priced = std::all_of(candidates.begin(), candidates.end(),
                                      [](const PlanCandidate& c) { return c.price_per_gpu_hour.has_value(); });
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& p = sweep.points[i];
    PlanVerdict v;
    v.point = i;
    v.price_per_hour = price_of(p);
    switch (p.status) {
      case PointStatus::skipped:
        v.kind = PlanVerdictKind::infeasible;
        v.reason = p.reason;
        break;
      case PointStatus::failed:
        v.kind = PlanVerdictKind::failed;
        v.reason = "prediction failed: " + p.reason;
        break;
      case PointStatus::out_of_memory:
        v.kind = PlanVerdictKind::out_of_memory;
        v.reason = p.report && p.report->out_of_memory
                       ? fmt::format("out of memory on {}", p.report->out_of_memory->device)
                       : fmt::format("out of memory: {}", p.reason);
        break;
      case PointStatus::ok: {
        const double thr = p.report->throughput_samples_per_s.value_or(0);
        if (v.price_per_hour && thr > 0) v.cost_of_target = *v.price_per_hour * (target.samples ? *target.samples / thr / 3600.0 : 1.0);
        if (thr >= need) {
          v.kind = PlanVerdictKind::more_expensive;  // until the winner is chosen below
        } else if (exposed_fraction(*p.report) > 0.5) {
          v.kind = PlanVerdictKind::communication_bound;
          v.reason = fmt::format("communication-bound: {} of the step is exposed communication and dispatch; {} < {} samples/s",
                                 report::format_percent(exposed_fraction(*p.report)), report::format_figure(thr),
                                 report::format_figure(need));
        } else {
          v.kind = PlanVerdictKind::too_slow;
          v.reason = fmt::format("too slow: {} < {} samples/s", report::format_figure(thr), report::format_figure(need));
        }
        break;
      }
    }
    plan.verdicts.push_back(v);
  }
  // The winner among those meeting the target.
  auto better = [&](const PlanVerdict& a, const PlanVerdict& b) {
    const auto& pa = sweep.points[a.point];
    const auto& pb = sweep.points[b.point];
    if (all_priced) {
      const double ca = target.samples ? *a.cost_of_target : *a.price_per_hour;
      const double cb = target.samples ? *b.cost_of_target : *b.price_per_hour;
      if (ca != cb) return ca < cb;
    }
    if (pa.gpus() != pb.gpus()) return pa.gpus() < pb.gpus();
    return *pa.report->throughput_samples_per_s > *pb.report->throughput_samples_per_s;
  };
  for (size_t i = 0; i < plan.verdicts.size(); ++i)
    if (plan.verdicts[i].kind == PlanVerdictKind::more_expensive && (!plan.winner || better(plan.verdicts[i], plan.verdicts[*plan.winner])))
      plan.winner = i;
  if (plan.winner) {
    auto& w = plan.verdicts[*plan.winner];
    w.kind = PlanVerdictKind::winner;
    w.reason = "cheapest configuration that meets the target";
    const auto& wp = sweep.points[w.point];
    for (auto& v : plan.verdicts) {
      if (v.kind != PlanVerdictKind::more_expensive) continue;
      const auto& p = sweep.points[v.point];
      if (all_priced) {
        const bool total = target.samples.has_value();
        v.reason = fmt::format("meets the target but costs {} {} against {}", money(total ? *v.cost_of_target : *v.price_per_hour),
                               total ? "in total" : "per hour", money(total ? *w.cost_of_target : *w.price_per_hour));
      } else {
        v.reason = fmt::format("meets the target with {} GPUs against {}", p.gpus(), wp.gpus());
      }
    }
  }
  return plan;
}

std::string plan_answer(const PlanResult& plan) {
  const std::string target = plan.target.describe();
  if (!plan.winner) {
    double best = 0;
    const PointResult* bp = nullptr;
    for (const auto& p : plan.sweep.points)
      if (p.status == PointStatus::ok && p.report->throughput_samples_per_s.value_or(0) > best) {
        best = *p.report->throughput_samples_per_s;
        bp = &p;
      }
    if (!bp) return fmt::format("No candidate configuration meets the target of {}: none could be predicted.", target);
    return fmt::format("No candidate configuration meets the target of {}; the fastest, {}x {} with {}, reaches {} samples/s.",
                       target, bp->gpus(), bp->gpu_name, report::strategy_display_name(bp->strategy),
                       report::format_figure(best));
  }
  const auto& w = plan.verdicts[*plan.winner];
  const auto& p = plan.sweep.points[w.point];
  std::string s = fmt::format("The cheapest configuration that meets {} is {}x {} ({}) with {}, at {} samples/s", target,
                              p.gpus(), p.gpu_name, p.hardware, report::strategy_display_name(p.strategy),
                              report::format_figure(*p.report->throughput_samples_per_s));
  if (w.price_per_hour) s += fmt::format(" for {} per hour", money(*w.price_per_hour));
  if (w.cost_of_target && plan.target.samples) s += fmt::format(" ({} to train the target's samples)", money(*w.cost_of_target));
  return s + ".";
}

report::ReportDocument build_plan_report(const PlanResult& plan, const std::string& generated_by) {
  using namespace report;
  ReportDocument doc = build_sweep_report(plan.sweep, {"", generated_by, ""});
  doc.title = fmt::format("dptwin plan: {}", plan.sweep.scenario_name);
  doc.answer = plan_answer(plan);
  // The target as a horizontal line on the throughput chart.
  for (auto& section : doc.sections)
    for (auto& chart : section.charts)
      if (chart.id == "throughput" && !chart.series.empty()) {
        double lo = 1, hi = 1;
        for (const auto& s : chart.series)
          for (auto [x, y] : s.points) hi = std::max(hi, x);
        const double need = plan.target.required_samples_per_s();
        chart.series.push_back({"target", {{lo, need}, {hi, need}}, {}, true, 6});
      }
  ReportTable t{"Every configuration and why it won or lost",
                {"hardware", "strategy", "GPUs", "samples/s", "price per hour", "verdict"},
                {},
                {false, false, true, true, true, false}};
  // Winner first, then the rest in sweep order.
  std::vector<size_t> order;
  if (plan.winner) order.push_back(*plan.winner);
  for (size_t i = 0; i < plan.verdicts.size(); ++i)
    if (!plan.winner || i != *plan.winner) order.push_back(i);
  for (size_t i : order) {
    const auto& v = plan.verdicts[i];
    const auto& p = plan.sweep.points[v.point];
    const bool has = p.status == PointStatus::ok;
    t.rows.push_back({p.hardware, strategy_display_name(p.strategy), p.gpus() ? std::to_string(p.gpus()) : "",
                      has ? format_figure(*p.report->throughput_samples_per_s) : "",
                      v.price_per_hour ? money(*v.price_per_hour) : "", std::string(plan_verdict_name(v.kind)) + ": " + v.reason});
  }
  doc.sections.insert(doc.sections.begin(), ReportSection{"Verdicts", {}, {}, {t}, {}});
  return doc;
}

}  // namespace dpt::scenario
