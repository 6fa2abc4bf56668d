// The plan as a report: the sweep report of every configuration, with the answer,
// the target on the throughput chart and a table of verdicts (winner first, then
// the alternatives, then the rest) with price, time to train and total cost.
#include <fmt/format.h>

#include "scenarios/plan/plan.hpp"
#include "scenarios/report/report_format.hpp"
#include "scenarios/report/report_sweep.hpp"

namespace dpt::scenario {
namespace {

std::string hours_cell(const std::optional<double>& h) {
  if (!h) return "";
  return *h < 48 ? report::format_figure(*h) + " h" : report::format_figure(*h / 24) + " days";
}

// The reasons of losing kinds already start with what they are ("too slow: ...").
std::string verdict_cell(const PlanVerdict& v) {
  const bool named = v.kind == PlanVerdictKind::winner || v.kind == PlanVerdictKind::alternative ||
                     v.kind == PlanVerdictKind::more_expensive;
  return named ? std::string(plan_verdict_name(v.kind)) + ": " + v.reason : v.reason;
}

}  // namespace

report::ReportDocument build_plan_report(const PlanResult& plan, const std::string& generated_by,
                                         const std::optional<report::AssumptionsInput>& assumptions) {
  using namespace report;
  ReportDocument doc = build_sweep_report(plan.sweep, {"", generated_by, "", assumptions});
  doc.title = fmt::format("dptwin plan: {}", plan.sweep.scenario_name);
  doc.answer = plan_answer(plan);
  // The target as a horizontal line on the throughput chart.
  for (auto& section : doc.sections)
    for (auto& chart : section.charts)
      if (chart.id == "throughput" && chart.kind == ChartKind::lines && !chart.series.empty())
        chart.y_lines.push_back({plan.target.required_samples_per_s(),
                                 "target " + format_figure(plan.target.required_samples_per_s())});
  const std::string cur = plan.spec.currency.empty() ? "" : " (" + plan.spec.currency + ")";
  ReportTable t{"Every configuration and why it won or lost",
                {"hardware", "strategy", "GPUs", "samples/s", "price per hour" + cur, "time to train", "total cost" + cur,
                 "verdict"},
                {},
                {false, false, true, true, true, true, true, false}};
  // Winner first, then the alternatives, then the rest in sweep order.
  std::vector<size_t> order;
  if (plan.winner) order.push_back(*plan.winner);
  for (size_t i = 0; i < plan.verdicts.size(); ++i)
    if (plan.verdicts[i].kind == PlanVerdictKind::alternative) order.push_back(i);
  for (size_t i = 0; i < plan.verdicts.size(); ++i)
    if (plan.verdicts[i].kind != PlanVerdictKind::winner && plan.verdicts[i].kind != PlanVerdictKind::alternative)
      order.push_back(i);
  auto money = [&](const std::optional<double>& v) { return v ? fmt::format("{:.2f}", *v) : std::string(); };
  for (size_t i : order) {
    const auto& v = plan.verdicts[i];
    const auto& p = plan.sweep.points[v.point];
    const bool has = p.status == PointStatus::ok;
    const int gpus = plan_point_gpus(p);
    t.rows.push_back({p.hardware, strategy_display_name(p.strategy), gpus ? std::to_string(gpus) : "",
                      has ? format_figure(*p.report->throughput_samples_per_s) : "", money(v.price_per_hour),
                      hours_cell(v.hours_to_train), money(v.cost_of_target),
                      verdict_cell(v)});
  }
  std::vector<std::string> notes;
  if (!plan.sweep.points.empty())
    notes.push_back("GPU counts: 1, 2, 4, ... within a node, then every whole number of nodes of each candidate.");
  if (plan.spec.train_samples || plan.target.samples)
    // The count as given, as the Answer gives it (three figures said 9,770,000 beside its 9,765,625).
    notes.push_back(fmt::format("Time to train and total cost are for {} samples.",
                                format_count(plan.target.samples ? *plan.target.samples : *plan.spec.train_samples)));
  notes.push_back(fmt::format("Configurations costing at most {} more than the winner are alternatives.",
                              format_percent(plan.spec.tie_margin)));
  if (plan.spec.headroom > 0)
    notes.push_back(fmt::format("A configuration meets the target only when its predicted throughput is at least {} "
                                "above it (headroom for the twin's error).",
                                format_percent(plan.spec.headroom)));
  doc.sections.insert(doc.sections.begin(), ReportSection{"Verdicts", notes, {}, {t}, {}});
  return doc;
}

}  // namespace dpt::scenario
