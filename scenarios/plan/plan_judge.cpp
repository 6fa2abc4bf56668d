// Judging a finished plan sweep: a verdict per configuration, the winner, the
// alternatives within the stated margin, and the one-sentence answer.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "scenarios/plan/plan.hpp"
#include "scenarios/report/report_format.hpp"
#include "scenarios/report/report_sweep.hpp"

namespace dpt::scenario {
namespace {

// What was live on the device that ran out, largest first, and what it asked for (a plan's
// verdict had said "out of memory on sim:gpu0" and nothing a planner could act on).
std::string out_of_memory_reason(const OutOfMemoryReport& o) {
  std::vector<std::pair<Bytes, std::string>> live;
  for (const auto& [category, bytes] : o.memory_breakdown_bytes)
    if (bytes > 0) live.emplace_back(bytes, category);
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;  // largest first, then by name
  });
  std::string parts;
  for (const auto& [bytes, category] : live)
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", category, report::format_gib(bytes));
  std::string out = fmt::format("out of memory on {}", o.device);
  if (!parts.empty()) out += fmt::format(": {} live", parts);
  if (o.capacity_bytes) out += fmt::format(" of {}", report::format_gib(*o.capacity_bytes));
  if (o.requested_bytes > 0) out += fmt::format(", {} more asked", report::format_gib(o.requested_bytes));
  return out;
}

double exposed_fraction(const StepReport& r) {
  const double step = r.step_time_s.value_or(0);
  if (step <= 0) return 0;
  return (r.breakdown_s.exposed_communication + r.breakdown_s.dispatch) / step;
}

double thr(const PointResult& p) { return p.report->throughput_samples_per_s.value_or(0); }

// The samples of one training run: the target's, else the plan's train_samples.
std::optional<double> run_samples(const Target& t, const PlanSpec& spec) {
  if (t.samples) return t.samples;
  return spec.train_samples;
}

// " with 30 % headroom (a prediction of at least 1,950 samples/s)": the margin a plan asked of the twin.
std::string headroom_text(const PlanResult& plan) {
  if (!(plan.spec.headroom > 0)) return "";
  return fmt::format(" with {} headroom (a prediction of at least {} samples/s)", report::format_percent(plan.spec.headroom),
                     report::format_figure(plan.target.required_samples_per_s() * (1 + plan.spec.headroom)));
}

std::string hours_text(double h) { return h < 48 ? report::format_figure(h) + " h" : report::format_figure(h / 24) + " days"; }

void judge_point(PlanVerdict& v, const PointResult& p, double need) {
  switch (p.status) {
    case PointStatus::skipped:
      v.kind = PlanVerdictKind::infeasible;
      v.reason = "infeasible: " + p.reason;
      return;
    case PointStatus::failed:
      v.kind = PlanVerdictKind::failed;
      v.reason = "prediction failed: " + p.reason;
      return;
    case PointStatus::out_of_memory:
      v.kind = PlanVerdictKind::out_of_memory;
      v.reason = p.report && p.report->out_of_memory ? out_of_memory_reason(*p.report->out_of_memory)
                 : p.reason.rfind("out of memory", 0) == 0 ? p.reason
                                                           : fmt::format("out of memory: {}", p.reason);
      return;
    case PointStatus::ok: break;
  }
  if (thr(p) >= need) {
    v.kind = PlanVerdictKind::more_expensive;  // until the winner is chosen
  } else if (exposed_fraction(*p.report) > 0.5) {
    v.kind = PlanVerdictKind::communication_bound;
    v.reason = fmt::format("communication-bound: {} of the step is exposed communication and dispatch; {} < {} samples/s",
                           report::format_percent(exposed_fraction(*p.report)), report::format_figure(thr(p)),
                           report::format_figure(need));
  } else {
    v.kind = PlanVerdictKind::too_slow;
    v.reason = fmt::format("too slow: {} < {} samples/s", report::format_figure(thr(p)), report::format_figure(need));
  }
}

}  // namespace

const char* plan_verdict_name(PlanVerdictKind k) {
  switch (k) {
    case PlanVerdictKind::winner: return "winner";
    case PlanVerdictKind::alternative: return "alternative";
    case PlanVerdictKind::more_expensive: return "more_expensive";
    case PlanVerdictKind::too_slow: return "too_slow";
    case PlanVerdictKind::communication_bound: return "communication_bound";
    case PlanVerdictKind::out_of_memory: return "out_of_memory";
    case PlanVerdictKind::infeasible: return "infeasible";
    case PlanVerdictKind::failed: return "failed";
  }
  return "?";
}

std::string plan_money(const PlanSpec& spec, double amount) {
  return spec.currency.empty() ? fmt::format("{:.2f}", amount) : fmt::format("{:.2f} {}", amount, spec.currency);
}

int plan_point_gpus(const PointResult& p) {
  if (p.gpus() > 0) return p.gpus();
  for (const auto& [axis, value] : p.axes)
    if (axis == "gpus") return std::atoi(value.c_str());
  return 0;
}

PlanResult judge_plan(const SweepResult& sweep, const Target& target, const std::vector<PlanCandidate>& candidates) {
  PlanSpec spec;
  spec.candidates = candidates;
  return judge_plan(sweep, target, spec);
}

PlanResult judge_plan(const SweepResult& sweep, const Target& target, const PlanSpec& spec) {
  PlanResult plan{sweep, target, spec, {}, std::nullopt, {}};
  // With headroom, a configuration must be predicted that much above the target.
  const double need = target.required_samples_per_s() * (1 + spec.headroom);
  const auto samples = run_samples(target, spec);
  const bool all_priced = std::all_of(spec.candidates.begin(), spec.candidates.end(),
                                      [](const PlanCandidate& c) { return c.price_per_gpu_hour.has_value(); });
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& p = sweep.points[i];
    PlanVerdict v;
    v.point = i;
    judge_point(v, p, need);
    if (p.status == PointStatus::ok) {
      for (const auto& c : spec.candidates)
        if (c.hardware == p.hardware && c.price_per_gpu_hour) v.price_per_hour = *c.price_per_gpu_hour * p.gpus();
      if (samples && thr(p) > 0) v.hours_to_train = *samples / thr(p) / 3600.0;
      if (v.price_per_hour && v.hours_to_train) v.cost_of_target = *v.price_per_hour * *v.hours_to_train;
    }
    plan.verdicts.push_back(v);
  }
  // What is compared: the run's total cost whenever the samples of one run are known (a
  // target of samples within hours, or train_samples: a configuration that costs more per
  // hour but trains sooner can cost less in all), else price per hour.
  const bool by_total = target.samples.has_value() || target.tokens.has_value() ||
                        (samples.has_value() && !fault_active(Fault::plan_ranks_by_hourly_price));
  auto cost = [&](const PlanVerdict& v) -> std::optional<double> {
    if (!all_priced) return std::nullopt;
    return by_total ? v.cost_of_target : v.price_per_hour;
  };
  auto better = [&](const PlanVerdict& a, const PlanVerdict& b) {
    const auto &pa = sweep.points[a.point], &pb = sweep.points[b.point];
    if (cost(a) && cost(b) && *cost(a) != *cost(b)) return *cost(a) < *cost(b);
    if (pa.gpus() != pb.gpus()) return pa.gpus() < pb.gpus();
    return thr(pa) > thr(pb);
  };
  for (size_t i = 0; i < plan.verdicts.size(); ++i)
    if (plan.verdicts[i].kind == PlanVerdictKind::more_expensive && (!plan.winner || better(plan.verdicts[i], plan.verdicts[*plan.winner])))
      plan.winner = i;
  if (!plan.winner) return plan;
  auto& w = plan.verdicts[*plan.winner];
  w.kind = PlanVerdictKind::winner;
  w.reason = "cheapest configuration that meets the target";
  const auto& wp = sweep.points[w.point];
  const std::string unit = by_total ? " in total" : " per hour";
  for (auto& v : plan.verdicts) {
    if (v.kind != PlanVerdictKind::more_expensive) continue;
    const auto& p = sweep.points[v.point];
    if (!cost(v) || !cost(w)) {
      // Unpriced (or priced in part: prices cannot be compared with no price), fewest GPUs
      // win, then the higher throughput: say which decided.
      const std::string why = all_priced || std::none_of(spec.candidates.begin(), spec.candidates.end(),
                                                          [](const PlanCandidate& c) { return c.price_per_gpu_hour.has_value(); })
                                  ? ""
                                  : " (not every candidate has a price: GPU counts decide)";
      if (p.gpus() != wp.gpus())
        v.reason = fmt::format("meets the target with {} GPUs against {}{}", p.gpus(), wp.gpus(), why);
      else
        v.reason = fmt::format("meets the target with as many GPUs ({}) at {} samples/s against {}{}", p.gpus(),
                               report::format_figure(thr(p)), report::format_figure(thr(wp)), why);
      continue;
    }
    const double extra = *cost(w) > 0 ? *cost(v) / *cost(w) - 1 : 0;
    if (extra > spec.tie_margin) {
      v.reason = fmt::format("meets the target but costs {}{} against {}", plan_money(spec, *cost(v)), unit,
                             plan_money(spec, *cost(w)));
      continue;
    }
    // A near-tie: an alternative, with what it offers and why it comes second.
    v.kind = PlanVerdictKind::alternative;
    const std::string speed = thr(p) > thr(wp) ? fmt::format(", {:.2f}x the winner's throughput", thr(p) / thr(wp)) : "";
    if (*cost(v) == *cost(w))
      v.reason = fmt::format("ties with the winner at {}{}{}; the tie goes to {}", plan_money(spec, *cost(v)), unit, speed,
                             p.gpus() != wp.gpus() ? "fewer GPUs" : "the higher throughput");
    else
      v.reason = fmt::format("within {} of the winner: {}{} (+{:.1f} %){}", report::format_percent(spec.tie_margin),
                             plan_money(spec, *cost(v)), unit, 100 * extra, speed);
  }
  return plan;
}

std::vector<std::string> plan_reason_lines(const PlanResult& plan) {
  // Verdicts in sweep order; a run of GPU counts of one hardware and strategy that lost for
  // the same reason is one line ("dgx-a100 DDP x1, x2, x4: out of memory ..."), not one per
  // count (found by an outside-user review: 16 identical out-of-memory lines).
  std::vector<std::string> lines;
  std::string last_key, last_reason, counts;
  auto flush = [&] {
    if (!counts.empty()) lines.push_back(fmt::format("{} {}: {}", last_key, counts, last_reason));
    counts.clear();
  };
  for (const auto& v : plan.verdicts) {
    if (v.kind == PlanVerdictKind::winner) continue;
    const auto& p = plan.sweep.points[v.point];
    const std::string key = fmt::format("{} {}", p.hardware, report::strategy_display_name(p.strategy));
    if (key != last_key || v.reason != last_reason) flush();
    last_key = key;
    last_reason = v.reason;
    counts += fmt::format("{}x{}", counts.empty() ? "" : ", ", plan_point_gpus(p));
  }
  flush();
  return lines;
}

std::string plan_answer(const PlanResult& plan) {
  const std::string target = plan.target.describe();
  if (!plan.winner) {
    const PointResult* bp = nullptr;
    for (const auto& p : plan.sweep.points)
      if (p.status == PointStatus::ok && (!bp || thr(p) > thr(*bp))) bp = &p;
    if (!bp) {
      // Every candidate out of memory is an answer too: none fits (an outside-user review read
      // "none could be predicted" over a table of out-of-memory verdicts).
      // Configurations that cannot run at all (DataParallel across nodes) do not hide that
      // every one that can ran out of memory.
      const auto oom = std::count_if(plan.sweep.points.begin(), plan.sweep.points.end(),
                                     [](const PointResult& p) { return p.status == PointStatus::out_of_memory; });
      const auto infeasible = std::count_if(plan.sweep.points.begin(), plan.sweep.points.end(),
                                            [](const PointResult& p) { return p.status == PointStatus::skipped; });
      if (oom > 0 && oom + infeasible == static_cast<long>(plan.sweep.points.size()))
        return fmt::format("No candidate configuration meets the target of {}: the model does not fit in GPU "
                           "memory in any of them{} (see each verdict); a smaller --batch-per-device, activation "
                           "checkpointing or GPUs with more memory may fit.",
                           target,
                           infeasible ? fmt::format(" that can run ({} cannot: infeasible)", infeasible) : "");
      return fmt::format("No candidate configuration meets the target of {}: none could be predicted.", target);
    }
    // Candidates that are one machine without a network section cannot take more GPUs: said,
    // for "how many do I need" asked of a 1-GPU file (an outside-user review read no reason).
    std::string capped;
    for (const auto& [hardware, gpus] : plan.single_machine_gpus)
      capped += fmt::format("{}{} ({} GPU{})", capped.empty() ? "" : ", ", hardware, gpus, gpus == 1 ? "" : "s");
    if (!capped.empty())
      capped = fmt::format(". One machine each, without a network section, so the plan adds no GPUs to them: {}; a "
                           "hardware file with a network section (a cluster of such nodes) lets it scale out",
                           capped);
    return fmt::format("No candidate configuration meets the target of {}{}; the fastest, {}x {} with {}, reaches {} "
                       "samples/s{}.",
                       target, headroom_text(plan), bp->gpus(), bp->gpu_name, report::strategy_display_name(bp->strategy),
                       report::format_figure(thr(*bp)), capped);
  }
  const auto& w = plan.verdicts[*plan.winner];
  const auto& p = plan.sweep.points[w.point];
  std::string s = fmt::format("The cheapest configuration that meets {}{} is {}x {} ({}) with {}, at {} samples/s",
                              target, headroom_text(plan), p.gpus(), p.gpu_name, p.hardware,
                              report::strategy_display_name(p.strategy), report::format_figure(thr(p)));
  if (w.price_per_hour) s += fmt::format(" for {} per hour", plan_money(plan.spec, *w.price_per_hour));
  // More nodes than the hardware file describes: right for a cloud that rents more, not for a
  // cluster of that size (an outside-user review's 2-node file got a 4-node answer silently).
  if (const auto it = plan.file_nodes.find(p.hardware); it != plan.file_nodes.end() && p.nodes > it->second)
    s += fmt::format(" ({} nodes, more than the {} its hardware file describes; --max-gpus {} keeps within them)",
                     p.nodes, it->second, it->second * p.devices);
  const auto priced = std::count_if(plan.spec.candidates.begin(), plan.spec.candidates.end(),
                                    [](const PlanCandidate& c) { return c.price_per_gpu_hour.has_value(); });
  if (priced > 0 && priced < static_cast<long>(plan.spec.candidates.size()))
    s += " (not every candidate has a price, so the fewest GPUs won, then the highest throughput)";
  if (w.hours_to_train) {
    s += fmt::format("; training {} samples takes {}", report::format_count(*run_samples(plan.target, plan.spec)),
                     hours_text(*w.hours_to_train));
    if (w.cost_of_target) s += fmt::format(" and costs {}", plan_money(plan.spec, *w.cost_of_target));
  }
  const auto alternatives = std::count_if(plan.verdicts.begin(), plan.verdicts.end(),
                                          [](const PlanVerdict& v) { return v.kind == PlanVerdictKind::alternative; });
  if (alternatives > 0)
    s += fmt::format("; {} alternative{} within {} of its cost", alternatives, alternatives == 1 ? "" : "s",
                     report::format_percent(plan.spec.tie_margin));
  return s + ".";
}

}  // namespace dpt::scenario
