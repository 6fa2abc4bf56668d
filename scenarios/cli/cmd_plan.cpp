// dptwin plan: the cheapest configuration that meets a throughput or time target.
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "scenarios/cli/command.hpp"
#include "scenarios/plan/plan.hpp"
#include "scenarios/scenario/predict_runner.hpp"
#include "scenarios/report/report_format.hpp"
#include "scenarios/report/report_sweep.hpp"
#include "scenarios/report/report_text.hpp"
#include "scenarios/cli/flag_limits.hpp"
#include "scenarios/cli/report_lock.hpp"
#include "scenarios/cli/whatif_flags.hpp"

namespace dpt::cli {
namespace {

struct PlanArgs {
  std::string plan_file;
  std::optional<std::string> model;
  std::optional<double> samples_per_s, samples, within_hours;
  std::vector<std::string> hardware;  // NAME or NAME:PRICE
  std::vector<std::string> strategies;
  std::optional<int> max_gpus;
  std::optional<long long> batch_per_device;
  std::optional<long long> global_batch;
  std::optional<std::string> dtype, precision, optimizer;
  std::optional<double> bucket_cap_mb;
  int jobs = whatif::default_jobs();
  std::string report_dir;
  std::string out;
  bool json = false;
};

scenario::PlanCandidate parse_candidate(const std::string& text) {
  scenario::PlanCandidate c;
  const auto colon = text.rfind(':');
  c.where = "--hardware " + text + ": ";
  if (colon == std::string::npos) {
    c.hardware = text;
    return c;
  }
  c.hardware = text.substr(0, colon);
  const std::string price = text.substr(colon + 1);
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(price, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (c.hardware.empty() || used != price.size() || !(v >= 0))
    throw std::invalid_argument(fmt::format("--hardware {}: expected NAME or NAME:PRICE_PER_GPU_HOUR, e.g. dgx-a100:2.40",
                                            text));
  c.price_per_gpu_hour = v;
  return c;
}

scenario::Scenario plan_from_flags(const PlanArgs& a) {
  scenario::PlanRequest q;
  if (!a.model) throw std::invalid_argument("--model: required (or give a plan file)");
  q.model = *a.model;
  if (a.samples_per_s) {
    if (a.samples || a.within_hours)
      throw std::invalid_argument("--target-samples-per-s: give it, or --samples with --within-hours, not both");
    if (!(*a.samples_per_s > 0)) throw std::invalid_argument(fmt::format("--target-samples-per-s {}: must be positive", *a.samples_per_s));
    q.target.samples_per_s = a.samples_per_s;
  } else if (a.samples && a.within_hours) {
    if (!(*a.samples > 0) || !(*a.within_hours > 0))
      throw std::invalid_argument("--samples and --within-hours: must be positive");
    q.target.samples = a.samples;
    q.target.within_hours = a.within_hours;
  } else {
    throw std::invalid_argument("a target is required: --target-samples-per-s N, or --samples N --within-hours H");
  }
  if (a.hardware.empty()) throw std::invalid_argument("--hardware: give at least one candidate, e.g. --hardware dgx-a100:2.40");
  for (const auto& h : a.hardware) q.candidates.push_back(parse_candidate(h));
  if (!a.strategies.empty()) q.strategies = a.strategies;
  if (a.max_gpus) {
    if (*a.max_gpus < 1) throw std::invalid_argument(fmt::format("--max-gpus {}: must be at least 1", *a.max_gpus));
    q.max_gpus = *a.max_gpus;
  }
  if (a.batch_per_device) {
    if (*a.batch_per_device < 1)
      throw std::invalid_argument(fmt::format("--batch-per-device {}: must be positive", *a.batch_per_device));
    q.batch_per_device = *a.batch_per_device;
  }
  if (a.global_batch) {
    if (*a.global_batch < 1) throw std::invalid_argument(fmt::format("--global-batch {}: must be positive", *a.global_batch));
    q.global_batch = *a.global_batch;
  }
  if (a.dtype) {
    q.dtype = dtype_from_name(*a.dtype);
    if (q.dtype != DType::f32 && q.dtype != DType::f64)
      throw std::invalid_argument(fmt::format("--dtype {}: expected f32 or f64 (--precision sets bf16 and f16)", *a.dtype));
  }
  if (a.precision) {
    try {
      q.precision = precision_from_name(*a.precision);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("--precision: {}", e.what()));
    }
  }
  if (a.bucket_cap_mb) q.bucket_cap_mb = *a.bucket_cap_mb;
  if (a.optimizer) {
    scenario::PointConfig scratch;
    scenario::set_point_field(scratch, "optimizer", YAML::Node(*a.optimizer), "--optimizer: ");
    q.optimizer = scratch.optimizer;
  }
  for (const auto& s : q.strategies) strategy_kind_from_name(s);
  return scenario::plan_scenario(q);
}

int run_plan(const PlanArgs& a) {
  const auto lib = whatif::library();
  scenario::Scenario s;
  if (!a.plan_file.empty()) {
    if (a.model || !a.hardware.empty() || a.samples_per_s || a.samples)
      throw std::invalid_argument("give a plan file or --model/--hardware/target flags, not both");
    s = scenario::plan_scenario_from_file(scenario::load_scenario_file(a.plan_file));
  } else {
    s = plan_from_flags(a);
  }
  if (a.jobs < 1) throw std::invalid_argument(fmt::format("--jobs {}: must be at least 1", a.jobs));
  scenario::validate_scenario(s, lib);
  limits::require_output_file("--out", a.out);
  const ReportDirLock lock("--report", a.report_dir);
  scenario::SweepOptions o;
  o.jobs = a.jobs;
  o.progress = whatif::stderr_is_terminal() && !a.json;
  const auto sweep = scenario::run_sweep(s, lib, scenario::predict_point, o);
  const auto plan = scenario::judge_plan(sweep, *s.target, s.plan->candidates);
  if (!a.out.empty()) scenario::write_sweep_result(sweep, a.out);
  if (!a.report_dir.empty()) {
    auto doc = scenario::build_plan_report(plan, a.plan_file.empty() ? "dptwin plan" : "dptwin plan " + a.plan_file);
    report::write_report(doc, a.report_dir);
  }
  if (a.json) {
    nlohmann::json verdicts = nlohmann::json::array();
    for (const auto& v : plan.verdicts) {
      const auto& p = plan.sweep.points[v.point];
      verdicts.push_back({{"hardware", p.hardware}, {"strategy", p.strategy}, {"gpus", p.gpus()},
                          {"throughput_samples_per_s", p.report && p.report->throughput_samples_per_s
                                                           ? nlohmann::json(*p.report->throughput_samples_per_s)
                                                           : nlohmann::json(nullptr)},
                          {"price_per_hour", v.price_per_hour ? nlohmann::json(*v.price_per_hour) : nlohmann::json(nullptr)},
                          {"verdict", scenario::plan_verdict_name(v.kind)}, {"reason", v.reason}});
    }
    std::cout << nlohmann::json{{"answer", scenario::plan_answer(plan)},
                                {"target_samples_per_s", plan.target.required_samples_per_s()},
                                {"winner", plan.winner ? nlohmann::json(*plan.winner) : nlohmann::json(nullptr)},
                                {"verdicts", verdicts}}
                     .dump(2)
              << "\n";
  } else {
    std::vector<std::vector<std::string>> rows = {{"hardware", "strategy", "GPUs", "samples/s", "per hour", "verdict"}};
    for (const auto& v : plan.verdicts) {
      const auto& p = plan.sweep.points[v.point];
      const bool ok = p.status == scenario::PointStatus::ok;
      rows.push_back({p.hardware, report::strategy_display_name(p.strategy), p.gpus() ? std::to_string(p.gpus()) : "-",
                      ok ? report::format_figure(*p.report->throughput_samples_per_s) : "-",
                      v.price_per_hour ? fmt::format("{:.2f}", *v.price_per_hour) : "-",
                      std::string(scenario::plan_verdict_name(v.kind))});
    }
    std::cout << report::text_table(rows) << "\n";
    for (const auto& v : plan.verdicts) {
      if (v.kind == scenario::PlanVerdictKind::winner) continue;
      const auto& p = plan.sweep.points[v.point];
      std::cout << fmt::format("{} {} x{}: {}\n", p.hardware, report::strategy_display_name(p.strategy), p.gpus(), v.reason);
    }
    std::cout << "\n" << scenario::plan_answer(plan) << "\n";
  }
  return plan.winner ? kExitOk : kExitFailure;
}

RunFn setup(CLI::App& parent) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* app = parent.add_subcommand(
      "plan", "Find the cheapest configuration (hardware x strategy x GPU count, powers of two) that meets a target "
              "throughput, or trains a number of samples within a time, within GPU memory; say why every other "
              "configuration lost (out of memory, communication-bound, too slow, more expensive).");
  app->add_option("plan", a->plan_file, "scenario YAML with target and plan sections (instead of the flags)")
      ->check(CLI::ExistingFile);
  app->add_option("--model", a->model, "model library name, YAML path, or mlp:IN-H-...-OUT");
  app->add_option("--target-samples-per-s", a->samples_per_s, "throughput target");
  app->add_option("--samples", a->samples, "target: train this many samples ...");
  app->add_option("--within-hours", a->within_hours, "... within this many hours");
  app->add_option("--hardware", a->hardware, "candidate NAME or NAME:PRICE_PER_GPU_HOUR (repeat for each)");
  app->add_option("--strategies", a->strategies, "strategies to consider (default: dp ddp)")->delimiter(',');
  app->add_option("--max-gpus", a->max_gpus, "largest GPU count to consider (default 64)");
  app->add_option("--batch-per-device", a->batch_per_device, "per-GPU batch (default 32)");
  app->add_option("--global-batch", a->global_batch,
                  "fixed global batch, reached by DDP accumulation (K = global / (batch-per-device x GPUs))");
  app->add_option("--dtype", a->dtype, "f32 | f64");
  app->add_option("--precision", a->precision,
                  "f32 (PyTorch defaults: TF32 convolutions on Ampere+) | tf32 | bf16-amp | f16-amp | bf16 | f64");
  app->add_option("--optimizer", a->optimizer, "sgd | sgd_momentum | adamw (default sgd_momentum)");
  app->add_option("--bucket-cap-mb", a->bucket_cap_mb, "DDP bucket size in MiB (default 25)");
  app->add_option("-j,--jobs", a->jobs, "configurations predicted at once (default: the number of CPUs)");
  app->add_option("-o,--out", a->out, "write every configuration's prediction here (JSON, dptwin.sweep/1)");
  app->add_option("--report", a->report_dir, "write the HTML and Markdown report into this directory");
  app->add_flag("--json", a->json, "print the verdicts as JSON");
  app->footer("Examples:\n"
              "  dptwin plan --model resnet50 --target-samples-per-s 20000 --hardware dgx-a100:2.40 "
              "--hardware l40s-4x-pcie4:1.10\n"
              "  dptwin plan --model gpt2-124m --samples 1e9 --within-hours 24 --hardware dgx-h100-cluster:4.50 "
              "--strategies ddp --max-gpus 256\n"
              "  dptwin plan scenarios/whatif/plan-resnet50.yaml --report plan/\n\n" +
              exit_codes_help() + " Exit 1 here: no configuration meets the target.");
  return [a] { return run_plan(*a); };
}

Registration reg{"plan", setup};

}  // namespace
}  // namespace dpt::cli
