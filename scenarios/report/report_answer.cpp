#include "scenarios/report/report_answer.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>

#include "engine/core/precision.hpp"

#include "scenarios/report/report_axes.hpp"
#include "scenarios/report/report_format.hpp"
#include "scenarios/report/report_sweep.hpp"

namespace dpt::report {
namespace {

using scenario::PointResult;
using scenario::PointStatus;
using scenario::SweepResult;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool has_word(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool start = at == 0 || !std::isalpha(static_cast<unsigned char>(text[at - 1]));
    const size_t end = at + word.size();
    // "fit" matches fit, fits, fitting; never "benefit" or "profit".
    if (start && (end == text.size() || !std::isalpha(static_cast<unsigned char>(text[end])) || text[end] == 's' ||
                  text.compare(end, 3, "tin") == 0))
      return true;
  }
  return false;
}

std::string config_phrase(const PointResult& p) {
  return fmt::format("{}x {} with {}", p.gpus(), p.gpu_name.empty() ? p.hardware : p.gpu_name,
                     strategy_display_name(p.strategy));
}

// config_phrase and the point's values of the swept fields the phrase does not name ("8x
// A100 with DDP at batch_per_device 4"): a memory answer over a swept batch had named every
// point "8x A100 with DDP", and never which batch fits.
std::string config_phrase_with_axes(const PointResult& p) {
  std::string at;
  for (const auto& [axis, value] : p.axes)
    if (axis != "gpus" && axis != "devices" && axis != "nodes" && axis != "strategy" && axis != "hardware")
      at += fmt::format("{}{} {}", at.empty() ? " at " : ", ", axis, value);
  return config_phrase(p) + at;
}

const PointResult* fastest(const SweepResult& r) {
  const PointResult* best = nullptr;
  for (const auto& p : r.points)
    if (point_ok(p) && (!best || point_throughput(p) > point_throughput(*best))) best = &p;
  return best;
}

std::string none_predicted(const SweepResult& r) {
  std::map<std::string, int> reasons;
  for (const auto& p : r.points) reasons[scenario::point_status_name(p.status)]++;
  std::string why;
  for (const auto& [k, n] : reasons) why += fmt::format("{}{} {}", why.empty() ? "" : ", ", n, k);
  return fmt::format("No configuration could be predicted ({}); see the table of points.", why);
}

// "; X meets the target of T" or "; no configuration meets the target of T" (the fewest
// GPUs that meet it, the fastest of those); "" without a target.
std::string target_clause(const SweepResult& r) {
  if (!r.target) return "";
  const double need = r.target->required_samples_per_s();
  const PointResult* smallest = nullptr;
  for (const auto& p : r.points)
    if (point_ok(p) && point_throughput(p) >= need &&
        (!smallest || p.gpus() < smallest->gpus() ||
         (p.gpus() == smallest->gpus() && point_throughput(p) > point_throughput(*smallest))))
      smallest = &p;
  if (smallest)
    return fmt::format("; {} meet{} the target of {}", config_phrase(*smallest), smallest->gpus() == 1 ? "s" : "",
                       r.target->describe());
  return fmt::format("; no configuration meets the target of {}", r.target->describe());
}

std::string throughput_answer(const SweepResult& r) {
  const PointResult* best = fastest(r);
  if (!best) return none_predicted(r);
  // The fastest point's swept values too (GPUs and a bucket size swept together: the answer
  // named no bucket; an outside-user review).
  std::string s = fmt::format("{} reach{} {} samples/s", config_phrase_with_axes(*best), best->gpus() == 1 ? "es" : "",
                              format_figure(point_throughput(*best)));
  if (best->report->scaling_efficiency && best->gpus() > 1)
    s += fmt::format(" at {} scaling efficiency", format_percent(*best->report->scaling_efficiency));
  if (const auto& p = best->report->precision) {  // the number depends on it: say which
    try {
      s += fmt::format(" in {}", precision_description(precision_from_name(*p)));
    } catch (const std::invalid_argument&) {
      s += fmt::format(" in precision {}", *p);
    }
  }
  s += target_clause(r);
  // DataParallel against DDP at the largest GPU count where both ran on the same hardware.
  const PointResult *dp = nullptr, *ddp = nullptr;
  for (const auto& a : r.points) {
    if (!point_ok(a) || a.strategy != "dp" || a.gpus() < 2) continue;
    for (const auto& b : r.points) {
      if (!point_ok(b) || b.strategy != "ddp" || b.hardware != a.hardware || b.gpus() != a.gpus() ||
          b.model != a.model || b.batch_per_device != a.batch_per_device || b.axes.size() != a.axes.size())
        continue;
      if (!dp || a.gpus() > dp->gpus() || (a.gpus() == dp->gpus() && a.hardware == best->hardware)) {
        dp = &a;
        ddp = &b;
      }
    }
  }
  if (dp && ddp)
    s += fmt::format("; DataParallel reaches {} of DDP's throughput on {}x {}",
                     format_percent(point_throughput(*dp) / point_throughput(*ddp)), dp->gpus(),
                     dp->gpu_name.empty() ? dp->hardware : dp->gpu_name);
  // Hardware against hardware ("what does 8x H100 buy over 4x L40S?"): each machine's fastest
  // point and its share of the fastest machine's (an outside-user review's answer named the
  // H100 alone, never the 8x between them).
  std::map<std::string, const PointResult*> per_hardware;
  for (const auto& p : r.points)
    if (point_ok(p) && (!per_hardware.count(p.hardware) || point_throughput(p) > point_throughput(*per_hardware[p.hardware])))
      per_hardware[p.hardware] = &p;
  if (per_hardware.size() > 1) {
    std::vector<const PointResult*> order;
    for (const auto& [name, p] : per_hardware) order.push_back(p);
    std::stable_sort(order.begin(), order.end(),
                     [](const PointResult* a, const PointResult* b) { return point_throughput(*a) > point_throughput(*b); });
    s += "; the fastest on each hardware: ";
    for (size_t i = 0; i < order.size(); ++i) {
      const PointResult& p = *order[i];
      s += fmt::format("{}{} {} samples/s ({})", i ? ", " : "", p.hardware, format_figure(point_throughput(p)),
                       config_phrase(p));
      if (i > 0) {
        s += fmt::format(", {}'s is {:.3g}x", order[0]->hardware, point_throughput(*order[0]) / point_throughput(p));
        // On as many GPUs the two ratios are one; else per GPU too, what a price per GPU-hour meets.
        if (order[0]->gpus() != p.gpus() && order[0]->gpus() > 0 && p.gpus() > 0)
          s += fmt::format(" ({:.3g}x per GPU)", (point_throughput(*order[0]) / order[0]->gpus()) /
                                                    (point_throughput(p) / p.gpus()));
      }
    }
  }
  return s + ".";
}

// The device with the highest peak (the first of equals).
size_t busiest_device(const PointResult& p) {
  size_t best = 0;
  const auto& d = p.report->devices_detail;
  for (size_t i = 1; i < d.size(); ++i)
    if (d[i].peak_memory_bytes > d[best].peak_memory_bytes) best = i;
  return best;
}
Bytes peak_of(const PointResult& p) { return p.report->devices_detail[busiest_device(p)].peak_memory_bytes; }

std::string memory_answer(const SweepResult& r) {
  std::vector<const PointResult*> fit, oom;
  for (const auto& p : r.points) {
    if (point_ok(p) && !p.report->devices_detail.empty()) fit.push_back(&p);
    if (p.status == PointStatus::out_of_memory) oom.push_back(&p);
  }
  if (fit.empty() && oom.empty()) return none_predicted(r);
  std::string s;
  if (fit.empty()) {
    s = fmt::format("No configuration fits: all {} run out of memory", oom.size());
  } else {
    const PointResult* top = fit.front();
    for (const auto* p : fit)
      if (peak_of(*p) > peak_of(*top)) top = p;
    const size_t top_device = busiest_device(*top);
    const auto& dev = top->report->devices_detail[top_device];
    s = fmt::format("{} of {} configurations fit in GPU memory; the highest peak is {}{} on GPU {} of {}",
                    fit.size(), fit.size() + oom.size(), format_gib(dev.peak_memory_bytes),
                    dev.capacity_bytes ? fmt::format(" of {} ({})", format_gib(*dev.capacity_bytes),
                                                     format_percent(static_cast<double>(dev.peak_memory_bytes) /
                                                                    static_cast<double>(*dev.capacity_bytes)))
                                       : std::string(),
                    top_device, config_phrase_with_axes(*top));
    // DataParallel's GPU 0 against the busiest other GPU: the lesson's claim.
    const PointResult* dp = nullptr;
    Bytes extra = 0;
    for (const auto* p : fit) {
      const auto& d = p->report->devices_detail;
      if (p->strategy != "dp" || d.size() < 2) continue;
      Bytes other = 0;
      for (size_t i = 1; i < d.size(); ++i) other = std::max(other, d[i].peak_memory_bytes);
      if (d[0].peak_memory_bytes > other && (!dp || d[0].peak_memory_bytes - other > extra)) {
        dp = p;
        extra = d[0].peak_memory_bytes - other;
      }
    }
    if (dp) s += fmt::format("; DataParallel's GPU 0 holds up to {} more than the other GPUs ({})", format_gib(extra),
                             config_phrase(*dp));
  }
  if (!oom.empty()) {
    const PointResult& p = *oom.front();
    s += fmt::format("; {} runs out of memory", config_phrase_with_axes(p));
    if (!p.report && !p.reason.empty()) s += ": " + p.reason;  // before any step: what does not fit
    if (p.report && p.report->out_of_memory) {
      const auto& o = *p.report->out_of_memory;
      Bytes live = 0;
      for (const auto& [k, b] : o.memory_breakdown_bytes) live += b;
      s += fmt::format(" on {}", o.device);
      if (o.capacity_bytes && live > 0)
        s += fmt::format(" ({} live of {} when {} more was asked for)", format_gib(live), format_gib(*o.capacity_bytes),
                         format_gib(o.requested_bytes));
    }
    if (oom.size() > 1) s += fmt::format(", as do {} more", oom.size() - 1);
  }
  // A target is part of the question even where memory frames the answer (a sweep that
  // exited 1 for a missed target said nothing of it).
  return s + target_clause(r) + ".";
}

// GPU-hours per million samples: what a configuration costs without a price.
double gpu_hours_per_million(const PointResult& p) { return p.gpus() / point_throughput(p) * 1e6 / 3600.0; }

std::string cost_answer(const SweepResult& r) {
  const PointResult* cheapest = nullptr;
  for (const auto& p : r.points)
    if (point_ok(p) && (!r.target || point_throughput(p) >= r.target->required_samples_per_s()) &&
        (!cheapest || gpu_hours_per_million(p) < gpu_hours_per_million(*cheapest)))
      cheapest = &p;
  if (!cheapest) return throughput_answer(r);
  // The swept values are named, and the dearest point beside the cheapest: "what does
  // NCCL_P2P_DISABLE=1 cost" swept over nccl_p2p_disable had answered "8x A100 with DDP" (an
  // outside-user review).
  const PointResult* dearest = nullptr;  // among the same points as the cheapest (those meeting a target)
  for (const auto& p : r.points)
    if (point_ok(p) && (!r.target || point_throughput(p) >= r.target->required_samples_per_s()) &&
        (!dearest || gpu_hours_per_million(p) > gpu_hours_per_million(*dearest)))
      dearest = &p;
  std::string most;
  if (dearest && dearest != cheapest && gpu_hours_per_million(*dearest) > gpu_hours_per_million(*cheapest))
    most = fmt::format("; the most, {}: {} ({} samples/s, {:.3g}x)", config_phrase_with_axes(*dearest),
                       format_figure(gpu_hours_per_million(*dearest)), format_figure(point_throughput(*dearest)),
                       gpu_hours_per_million(*dearest) / gpu_hours_per_million(*cheapest));
  return fmt::format("{} needs the fewest GPU-hours per million samples{}: {} ({} samples/s){}; a sweep has no "
                     "prices (dptwin plan compares costs).",
                     config_phrase_with_axes(*cheapest),
                     r.target ? " among those meeting the target of " + r.target->describe() : "",
                     format_figure(gpu_hours_per_million(*cheapest)), format_figure(point_throughput(*cheapest)), most);
}

std::string hours_text(double h) { return h < 48 ? format_figure(h) + " h" : format_figure(h / 24) + " days"; }

std::string time_answer(const SweepResult& r) {
  if (!r.target || !r.target->samples) return throughput_answer(r);
  const double samples = *r.target->samples;
  const PointResult* best = fastest(r);
  if (!best) return none_predicted(r);
  std::string s = fmt::format("{} train{} {} samples in {}", config_phrase(*best), best->gpus() == 1 ? "s" : "",
                              format_figure(samples), hours_text(samples / point_throughput(*best) / 3600.0));
  const PointResult* smallest = nullptr;
  for (const auto& p : r.points)
    if (point_ok(p) && point_throughput(p) >= r.target->required_samples_per_s() &&
        (!smallest || p.gpus() < smallest->gpus()))
      smallest = &p;
  if (r.target->within_hours) {
    if (smallest)
      s += fmt::format("; the fewest GPUs within {} h: {} ({})", format_figure(*r.target->within_hours),
                       config_phrase(*smallest), hours_text(samples / point_throughput(*smallest) / 3600.0));
    else
      s += fmt::format("; no configuration trains them within {} h", format_figure(*r.target->within_hours));
  }
  return s + ".";
}

std::string join_and(const std::vector<std::string>& items);
// Values of a swept field whose throughput is within this share of the fastest's.
constexpr double kTieShare = 0.02;

std::string best_value_answer(const SweepResult& r) {
  const auto fields = extra_swept_fields(r);
  if (fields.empty()) return throughput_answer(r);
  const SweptField& f = fields.front();
  // Per series (every other swept value): the fastest and the slowest value of the field.
  std::vector<std::string> order;
  std::map<std::string, std::pair<const PointResult*, const PointResult*>> by_series;
  for (const auto& p : r.points) {
    if (!point_ok(p)) continue;
    const std::string label = series_label(p, f.axis);
    auto [it, fresh] = by_series.try_emplace(label, &p, &p);
    if (fresh) order.push_back(label);
    if (point_throughput(p) > point_throughput(*it->second.first)) it->second.first = &p;
    if (point_throughput(p) < point_throughput(*it->second.second)) it->second.second = &p;
  }
  if (order.empty()) return none_predicted(r);
  std::string s;
  for (const auto& label : order) {
    const auto [hi, lo] = by_series[label];
    const double gain = point_throughput(*hi) / point_throughput(*lo) - 1;
    std::string clause;
    if (gain < 0.01)
      clause = fmt::format("{} makes less than 1 % difference ({} to {} samples/s)", swept_field_label(f.axis, {}),
                           format_figure(point_throughput(*lo)), format_figure(point_throughput(*hi)));
    else {
      clause = fmt::format("{} is fastest at {} samples/s, {} above {} ({} samples/s)",
                           field_value_text(f.axis, axis_value(*hi, f.axis)), format_figure(point_throughput(*hi)),
                           format_percent(gain), field_value_text(f.axis, axis_value(*lo, f.axis)),
                           format_figure(point_throughput(*lo)));
      // Values within kTieShare of the fastest are a tie at the twin's accuracy: named, so a
      // default (25 MiB buckets) that ties is not read as a loser (an outside-user review).
      std::vector<std::string> ties;
      for (const auto& p : r.points)
        if (&p != hi && point_ok(p) && series_label(p, f.axis) == label &&
            point_throughput(p) >= (1 - kTieShare) * point_throughput(*hi))
          ties.push_back(field_value_text(f.axis, axis_value(p, f.axis)));
      if (!ties.empty())
        clause += fmt::format(", but {} {} within {} of it, a tie at the twin's accuracy", join_and(ties),
                              ties.size() == 1 ? "is" : "are", format_percent(kTieShare));
    }
    s += (s.empty() ? "" : "; ") + (order.size() > 1 ? "with " + label + ", " : "") + clause;
  }
  // A sentence that starts with a name as written (a model or hardware value: "gpt2-124m",
  // "hf:cfg/config.json") keeps its spelling; a word ("with", "the") is capitalised.
  const std::string first = s.substr(0, s.find(' '));
  if (first.find_first_of(":/-_.0123456789") == std::string::npos)
    s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  // The target is part of the question: say whether anything meets it (a sweep that exits 1
  // for a missed target said nothing of it).
  return s + target_clause(r) + ".";
}

std::string join_and(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

}  // namespace

const char* question_kind_name(QuestionKind k) {
  switch (k) {
    case QuestionKind::throughput: return "throughput";
    case QuestionKind::memory: return "memory";
    case QuestionKind::cost: return "cost";
    case QuestionKind::time_to_train: return "time_to_train";
    case QuestionKind::best_value: return "best_value";
  }
  return "?";
}

QuestionKind question_kind(const SweepResult& r) {
  if (r.target && r.target->samples && r.target->within_hours) return QuestionKind::time_to_train;
  const std::string q = lower(r.question);
  const bool any_oom = std::any_of(r.points.begin(), r.points.end(),
                                   [](const PointResult& p) { return p.status == PointStatus::out_of_memory; });
  if (has_word(q, "fit") || has_word(q, "memory") || any_oom) return QuestionKind::memory;
  if (has_word(q, "cost") || has_word(q, "price") || has_word(q, "cheap") || q.find("cheapest") != std::string::npos)
    return QuestionKind::cost;
  if (q.find("how long") != std::string::npos || q.find("time to train") != std::string::npos || has_word(q, "hour") ||
      has_word(q, "day"))
    return QuestionKind::time_to_train;
  if (!extra_swept_fields(r).empty() && !gpu_count_varies(r)) return QuestionKind::best_value;
  return QuestionKind::throughput;
}

std::string sweep_answer(const SweepResult& r) { return sweep_answer(r, question_kind(r)); }

std::string sweep_answer(const SweepResult& r, QuestionKind kind) {
  switch (kind) {
    case QuestionKind::memory: return memory_answer(r);
    case QuestionKind::cost: return cost_answer(r);
    case QuestionKind::time_to_train: return time_answer(r);
    case QuestionKind::best_value: return best_value_answer(r);
    case QuestionKind::throughput: break;
  }
  return throughput_answer(r);
}

std::string question_for_points(const SweepResult& r) {
  std::vector<std::string> strategies, hardware, models;
  std::set<int> gpus;
  for (const auto& p : r.points) {
    const std::string st = strategy_display_name(p.strategy);
    if (std::find(strategies.begin(), strategies.end(), st) == strategies.end()) strategies.push_back(st);
    if (std::find(hardware.begin(), hardware.end(), p.hardware) == hardware.end()) hardware.push_back(p.hardware);
    if (std::find(models.begin(), models.end(), p.model) == models.end()) models.push_back(p.model);
    if (p.gpus() > 0) gpus.insert(p.gpus());
  }
  const bool several = strategies.size() > 1;
  const std::string on = gpus.empty()      ? std::string()
                         : gpus.size() == 1 ? fmt::format(" on {} GPU{}", *gpus.begin(), *gpus.begin() == 1 ? "" : "s")
                                            : fmt::format(" from {} to {} GPUs", *gpus.begin(), *gpus.rbegin());
  return fmt::format("How {} {} {} {}{} on {}?", several ? "do" : "does", join_and(strategies),
                     gpus.size() > 1 ? "scale" : "train", join_and(models), on,
                     join_and(hardware));
}

}  // namespace dpt::report
