// dptwin plan: the cheapest configuration that meets a throughput or time target.
#include <algorithm>
#include <iostream>
#include <memory>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "scenarios/cli/cli_docs.hpp"
#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/plan/plan.hpp"
#include "scenarios/scenario/predict_runner.hpp"
#include "scenarios/report/report_format.hpp"
#include "scenarios/report/report_sweep.hpp"
#include "scenarios/report/report_text.hpp"
#include "scenarios/cli/flag_limits.hpp"
#include "scenarios/cli/report_lock.hpp"
#include "scenarios/cli/sweep_output.hpp"
#include "scenarios/cli/whatif_flags.hpp"
#include "sim/net/hardware.hpp"

namespace dpt::cli::cmd_plan {  // a namespace per command: unity batches join anonymous ones
namespace {

struct PlanArgs {
  std::string plan_file;
  std::optional<std::string> model;
  std::optional<double> samples_per_s, samples, within_hours, tokens_per_s, tokens, tokens_per_sample;
  std::optional<std::string> currency;
  std::optional<double> train_samples, tie_margin, headroom;
  std::vector<std::string> overrides;  // PATH=VALUE
  std::vector<std::string> hardware;  // NAME or NAME:PRICE
  std::vector<std::string> strategies;
  std::optional<int> max_gpus;
  std::optional<long long> batch_per_device;
  std::optional<long long> global_batch;
  std::optional<std::string> dtype, precision, optimizer, optimizer_impl;
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
  // The plan file's bound on price_per_gpu_hour (1e308 printed "inf" per hour).
  if (v > 1e6)
    throw std::invalid_argument(fmt::format("--hardware {}: price {} per GPU-hour is above 1e6", text, price));
  c.price_per_gpu_hour = v;
  return c;
}

scenario::Target target_from_flags(const PlanArgs& a) {
  scenario::Target t;
  const int given = (a.samples_per_s ? 1 : 0) + (a.tokens_per_s ? 1 : 0) + (a.samples ? 1 : 0) + (a.tokens ? 1 : 0);
  if (given != 1)
    throw std::invalid_argument("give one target: --target-samples-per-s N, --target-tokens-per-s N, --samples N "
                                "--within-hours H, or --tokens N --within-hours H");
  using Flag = std::pair<const char*, std::optional<double>>;
  const std::vector<Flag> numbers = {{"--target-samples-per-s", a.samples_per_s}, {"--target-tokens-per-s", a.tokens_per_s},
                                     {"--samples", a.samples}, {"--tokens", a.tokens}, {"--within-hours", a.within_hours},
                                     {"--tokens-per-sample", a.tokens_per_sample}};
  for (const auto& [flag, v] : numbers)
    if (v && !(*v > 0)) throw std::invalid_argument(fmt::format("{} {}: must be positive", flag, *v));
  // The plan file's plausibility bounds (scenario.cpp, target), named by flag here: an
  // infinite target was named at a line of the plan generated from the flags.
  const std::vector<std::tuple<const char*, std::optional<double>, double, double>> bounds = {
      {"--target-samples-per-s", a.samples_per_s, 1.0 / 3600, 1e12}, {"--samples", a.samples, 1, 1e15},
      {"--within-hours", a.within_hours, 1.0 / 3600, 1e6},            {"--target-tokens-per-s", a.tokens_per_s, 1.0 / 3600, 1e15},
      {"--tokens", a.tokens, 1, 1e18},                               {"--tokens-per-sample", a.tokens_per_sample, 1, 1e9}};
  for (const auto& [flag, v, lo, hi] : bounds)
    if (v && !(*v >= lo && *v <= hi))
      throw std::invalid_argument(fmt::format("{} {}: must be in {:g} .. {:g}", flag, *v, lo, hi));
  if ((a.samples || a.tokens) != a.within_hours.has_value())
    throw std::invalid_argument(a.within_hours ? "--within-hours: goes with --samples or --tokens"
                                               : fmt::format("{}: needs --within-hours", a.samples ? "--samples" : "--tokens"));
  t.samples_per_s = a.samples_per_s;
  t.tokens_per_s = a.tokens_per_s;
  t.samples = a.samples;
  t.tokens = a.tokens;
  t.within_hours = a.within_hours;
  t.tokens_per_sample = a.tokens_per_sample;
  return t;
}

std::vector<scenario::Scenario> plan_from_flags(const PlanArgs& a, const scenario::Library& lib) {
  scenario::PlanRequest q;
  if (!a.model) throw std::invalid_argument("--model: required (or give a plan file)");
  q.model = *a.model;
  q.target = target_from_flags(a);
  if (a.hardware.empty()) throw std::invalid_argument("--hardware: give at least one candidate, e.g. --hardware dgx-a100:2.40");
  for (const auto& h : a.hardware) {
    q.spec.candidates.push_back(parse_candidate(h));
    // One candidate per hardware: a second price would silently replace the first.
    for (size_t i = 0; i + 1 < q.spec.candidates.size(); ++i)
      if (q.spec.candidates[i].hardware == q.spec.candidates.back().hardware)
        throw std::invalid_argument(fmt::format("--hardware {}: '{}' is already a candidate ({}); give each hardware once",
                                                h, q.spec.candidates.back().hardware,
                                                q.spec.candidates[i].where.substr(0, q.spec.candidates[i].where.size() - 2)));
  }
  if (!a.strategies.empty()) q.spec.strategies = a.strategies;
  if (a.max_gpus) {
    if (*a.max_gpus < 1 || *a.max_gpus > 65536)
      throw std::invalid_argument(fmt::format("--max-gpus {}: must be in 1 .. 65536 (the plan file's bound)", *a.max_gpus));
    q.spec.max_gpus = *a.max_gpus;
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
    try {
      q.dtype = dtype_from_name(*a.dtype);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("--dtype: {}", e.what()));
    }
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
  if (a.dtype && q.precision && precision_parameter_dtype(*q.precision) != q.dtype)
    throw std::invalid_argument(fmt::format("--precision {} keeps parameters in {}, but --dtype is {}",
                                            *a.precision, dtype_name(precision_parameter_dtype(*q.precision)),
                                            *a.dtype));
  if (a.bucket_cap_mb) q.bucket_cap_mb = *a.bucket_cap_mb;
  if (a.optimizer) {
    scenario::PointConfig scratch;
    scenario::set_point_field(scratch, "optimizer", YAML::Node(*a.optimizer), "--optimizer: ");
    q.optimizer = scratch.optimizer;
  }
  if (a.optimizer_impl) {
    scenario::PointConfig scratch;
    scenario::set_point_field(scratch, "optimizer_impl", YAML::Node(*a.optimizer_impl), "--optimizer-impl: ");
    q.optimizer_impl = scratch.optimizer_impl;
  }
  for (size_t i = 0; i < q.spec.strategies.size(); ++i) {
    const auto& s = q.spec.strategies[i];
    try {
      strategy_kind_from_name(s);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("--strategies: {}", e.what()));
    }
    // Named by the flag, not at a line of the plan generated from it.
    if (std::find(q.spec.strategies.begin(), q.spec.strategies.begin() + static_cast<long>(i), s) !=
        q.spec.strategies.begin() + static_cast<long>(i))
      throw std::invalid_argument(fmt::format("--strategies: '{}' given twice; give each strategy once", s));
  }
  return scenario::plan_scenarios(q, lib);
}

// Flags that refine any plan, from a file or from flags: currency, training length,
// tie margin, hardware overrides.
void apply_plan_flags(std::vector<scenario::Scenario>& plan, const PlanArgs& a) {
  if (a.tie_margin && !(*a.tie_margin >= 0 && *a.tie_margin <= 1))
    throw std::invalid_argument(fmt::format("--tie-margin {}: must be a fraction in [0, 1] (0.02 is 2 %)", *a.tie_margin));
  if (a.headroom && !(*a.headroom >= 0 && *a.headroom <= 10))
    throw std::invalid_argument(fmt::format("--headroom {}: must be a fraction in [0, 10] (0.3 is 30 %)", *a.headroom));
  if (a.train_samples && !(*a.train_samples >= 1 && *a.train_samples <= 1e15))
    throw std::invalid_argument(fmt::format("--train-samples {}: must be in 1 .. 1e15", *a.train_samples));
  if (a.currency && !scenario::valid_currency_code(*a.currency))
    throw std::invalid_argument(
        fmt::format("--currency '{}': expected a currency code of 1 to 8 letters such as USD or EUR", *a.currency));
  for (auto& s : plan) {
    if (a.currency) s.plan->currency = *a.currency;
    if (a.train_samples) s.plan->train_samples = a.train_samples;
    if (a.tie_margin) s.plan->tie_margin = *a.tie_margin;
    if (a.headroom) s.plan->headroom = *a.headroom;
    for (const auto& o : a.overrides) {
      const auto eq = o.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == o.size())
        throw std::invalid_argument(fmt::format("--override {}: expected PATH=VALUE, e.g. --override 'gpu.memory=40 GiB'", o));
      const std::string path = o.substr(0, eq);
      scenario::set_point_value(s.base, "overrides." + path, o.substr(eq + 1), "--override " + path + ": ");
    }
  }
}

void print_plan(const scenario::PlanResult& plan, bool json) {
  const auto& spec = plan.spec;
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  if (json) {
    nlohmann::json verdicts = nlohmann::json::array();
    for (const auto& v : plan.verdicts) {
      const auto& p = plan.sweep.points[v.point];
      verdicts.push_back({{"hardware", p.hardware}, {"strategy", p.strategy}, {"gpus", scenario::plan_point_gpus(p)},
                          {"throughput_samples_per_s", p.report && p.status == scenario::PointStatus::ok
                                                           ? opt(p.report->throughput_samples_per_s) : nlohmann::json(nullptr)},
                          {"price_per_hour", opt(v.price_per_hour)}, {"hours_to_train", opt(v.hours_to_train)},
                          {"total_cost", opt(v.cost_of_target)},
                          {"verdict", scenario::plan_verdict_name(v.kind)}, {"reason", v.reason}});
    }
    print_json(nlohmann::json{{"answer", scenario::plan_answer(plan)},
                               {"target_samples_per_s", plan.target.required_samples_per_s()},
                               {"currency", spec.currency.empty() ? nlohmann::json(nullptr) : nlohmann::json(spec.currency)},
                               {"tie_margin", spec.tie_margin},
                               {"headroom", spec.headroom},
                               {"winner", plan.winner ? nlohmann::json(*plan.winner) : nlohmann::json(nullptr)},
                               {"verdicts", verdicts}});
    return;
  }
  const std::string cur = spec.currency.empty() ? "" : " (" + spec.currency + ")";
  std::vector<std::vector<std::string>> rows = {
      {"hardware", "strategy", "GPUs", "samples/s", "per hour" + cur, "to train", "total" + cur, "verdict"}};
  auto money = [](const std::optional<double>& v) { return v ? fmt::format("{:.2f}", *v) : std::string("-"); };
  for (const auto& v : plan.verdicts) {
    const auto& p = plan.sweep.points[v.point];
    const bool ok = p.status == scenario::PointStatus::ok;
    const int gpus = scenario::plan_point_gpus(p);
    rows.push_back({p.hardware, report::strategy_display_name(p.strategy), gpus ? std::to_string(gpus) : "-",
                    ok ? report::format_figure(*p.report->throughput_samples_per_s) : "-", money(v.price_per_hour),
                    v.hours_to_train ? report::format_figure(*v.hours_to_train) + " h" : "-", money(v.cost_of_target),
                    std::string(scenario::plan_verdict_name(v.kind))});
  }
  std::cout << report::text_table(rows) << "\n";
  for (const auto& line : scenario::plan_reason_lines(plan)) std::cout << line << "\n";
  std::cout << "\n" << scenario::plan_answer(plan) << "\n";
}

int run_plan(const PlanArgs& a) {
  const auto lib = whatif::library();
  std::vector<scenario::Scenario> plan_scenarios;
  if (!a.plan_file.empty()) {
    if (a.model || !a.hardware.empty() || a.samples_per_s || a.samples || a.tokens_per_s || a.tokens ||
        a.within_hours || a.tokens_per_sample)
      throw std::invalid_argument("give a plan file or --model/--hardware/target flags (--tokens-per-sample and "
                                  "--within-hours included: the file's target says them), not both");
    // The file's plan and base keys set its candidates' training: a flag that would be
    // ignored is refused, naming it (they had been ignored silently, exit 0; found by an
    // outside-user review).
    for (const auto& [given, flag] : std::vector<std::pair<bool, const char*>>{
             {!a.strategies.empty(), "--strategies"}, {a.max_gpus.has_value(), "--max-gpus"},
             {a.batch_per_device.has_value(), "--batch-per-device"}, {a.global_batch.has_value(), "--global-batch"},
             {a.dtype.has_value(), "--dtype"}, {a.precision.has_value(), "--precision"},
             {a.optimizer.has_value(), "--optimizer"}, {a.optimizer_impl.has_value(), "--optimizer-impl"},
             {a.bucket_cap_mb.has_value(), "--bucket-cap-mb"}})
      if (given)
        throw std::invalid_argument(fmt::format(
            "{}: a plan file sets its candidates' training in its own keys (plan: and the base keys: strategies, "
            "max_gpus, batch_per_device, global_batch, dtype, precision, optimizer, optimizer_impl, bucket_cap_mb); "
            "give it there, "
            "or plan from flags without the file",
            flag));
    plan_scenarios = scenario::plan_scenarios_from_file(scenario::load_scenario_file(a.plan_file), lib);
  } else {
    plan_scenarios = plan_from_flags(a, lib);
  }
  apply_plan_flags(plan_scenarios, a);
  if (a.jobs < 1) throw std::invalid_argument(fmt::format("--jobs {}: must be at least 1", a.jobs));
  for (const auto& s : plan_scenarios) scenario::validate_scenario(s, lib);
  limits::require_output_file("--out", a.out);
  {
    std::vector<limits::FileFlag> inputs{{"plan file", a.plan_file}};
    for (const auto& s : plan_scenarios)
      for (const auto& f : whatif::scenario_input_files(s)) inputs.push_back(f);
    limits::refuse_shared_files({{"--out", a.out}}, inputs);
    limits::refuse_in_report_dir(a.report_dir, {{"--out", a.out}}, inputs, true);
  }
  const ReportDirLock lock("--report", a.report_dir, /*replaces_whole=*/true);
  scenario::SweepOptions o;
  o.jobs = a.jobs;
  o.progress = whatif::stderr_is_terminal() && !a.json;
  const auto sweep = scenario::run_plan_sweeps(plan_scenarios, lib, scenario::predict_point, o);
  const auto& first = plan_scenarios.front();
  auto plan = scenario::judge_plan(sweep, *first.target, *first.plan);
  if (!a.out.empty()) write_sweep_file(sweep, a.out);
  // The nodes each candidate's file describes, its path resolved as the sweep resolved it
  // (relative to the plan file's folder); a file that cannot be read again only loses the note.
  for (const auto& c : first.plan->candidates) {
    try {
      const auto hw = scenario::load_hardware_with_overrides(c.hardware, {}, lib, first.dir, "");
      plan.file_nodes[c.hardware] = hw.nodes;
      if (!hw.network) plan.single_machine_gpus[c.hardware] = hw.gpu_count();
    } catch (const std::exception&) {
    }
  }
  if (!a.report_dir.empty()) {
    auto doc = scenario::build_plan_report(plan, a.plan_file.empty() ? "dptwin plan" : "dptwin plan " + a.plan_file,
                                           report::assumptions_input(sweep, &first, lib));
    report::write_report_whole(doc, a.report_dir);
  }
  print_plan(plan, a.json);
  return plan.winner ? kExitOk : kExitFailure;
}

RunFn setup(CLI::App& parent) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* app = parent.add_subcommand(
      "plan", "Find the cheapest configuration (hardware x strategy x GPU count: 1, 2, 4, ... within a node, then "
              "every whole number of nodes) that meets a target throughput in samples/s or tokens/s, or trains a "
              "number of samples or tokens within a time, within GPU memory; show near-ties as alternatives and say "
              "why every other configuration lost (out of memory, communication-bound, too slow, more expensive, "
              "infeasible).");
  app->add_option("plan", a->plan_file, "scenario YAML with target and plan sections (instead of the flags)")
      ->check(CLI::ExistingFile);
  app->add_option("--model", a->model, "model library name, YAML path, mlp:IN-H-...-OUT, transformer:..., or hf:PATH/config.json[:seq=N][:attn=eager|sdpa] (dptwin model list)");
  app->add_option("--target-samples-per-s", a->samples_per_s, "throughput target in samples/s");
  app->add_option("--target-tokens-per-s", a->tokens_per_s, "throughput target in tokens/s (converted with the "
                                                              "model's tokens per sample)");
  app->add_option("--samples", a->samples, "target: train this many samples ...");
  app->add_option("--tokens", a->tokens, "target: train this many tokens ...");
  app->add_option("--within-hours", a->within_hours, "... within this many hours");
  app->add_option("--tokens-per-sample", a->tokens_per_sample, "tokens in one sample (default: from the model, "
                                                                "e.g. gpt2-124m's 1,024-token sequence)");
  app->add_option("--train-samples", a->train_samples, "samples one training run needs: adds time to train and "
                                                       "total cost (e.g. 1.28e8: 100 epochs of ImageNet-1k)");
  app->add_option("--currency", a->currency, "currency of the prices, printed with them (e.g. USD)");
  app->add_option("--tie-margin", a->tie_margin, "configurations costing at most this fraction more than the "
                                                 "cheapest are shown as alternatives (default 0.02)");
  app->add_option("--headroom", a->headroom,
                  "predicted throughput must exceed the target by this fraction (0.3 is 30 %): room for the twin's "
                  "error on the hardware, which `dptwin fidelity --gpu NAME` shows (default 0)");
  app->add_option("--override", a->overrides, "hardware field PATH=VALUE for every candidate, e.g. --override "
                                               "'gpu.memory=40 GiB'");
  app->add_option("--hardware", a->hardware, "candidate NAME or NAME:PRICE_PER_GPU_HOUR (repeat for each)");
  app->add_option("--strategies", a->strategies, "strategies to consider (default: dp ddp)")->delimiter(',');
  app->add_option("--max-gpus", a->max_gpus, "largest GPU count to consider (default 64)");
  app->add_option("--batch-per-device", a->batch_per_device, "per-GPU batch (default 32)");
  app->add_option("--global-batch", a->global_batch,
                  "fixed global batch, reached by DDP accumulation (K = global / (batch-per-device x GPUs))");
  with_choices(app->add_option("--dtype", a->dtype, "f32 | f64"), {"f32", "f64"});
  with_choices(app->add_option("--precision", a->precision,
                               "f32 (PyTorch defaults: TF32 convolutions on Ampere+) | tf32 | bf16-amp | f16-amp | bf16 "
                               "| f16-master | f64"),
               {"f32", "tf32", "bf16-amp", "f16-amp", "bf16", "f16-master", "f64"});
  with_choices(app->add_option("--optimizer", a->optimizer, "sgd | sgd_momentum | adamw (default sgd_momentum)"),
               {"sgd", "sgd_momentum", "adamw"});
  with_choices(app->add_option("--optimizer-impl", a->optimizer_impl,
                               "the optimizer's kernels as PyTorch runs them: foreach (default) | for_loop | fused"),
               {"foreach", "for_loop", "fused"});
  app->add_option("--bucket-cap-mb", a->bucket_cap_mb, "DDP bucket size in MiB (default 25)");
  app->add_option("-j,--jobs", a->jobs, "configurations predicted at once (default: the CPUs this process may use: taskset, a Slurm allocation)");
  app->add_option("-o,--out", a->out, "write every configuration's prediction here (JSON, dptwin.sweep/1)");
  app->add_option("--report", a->report_dir, "write the HTML and Markdown report into this directory");
  app->add_flag("--json", a->json, "print the verdicts as JSON");
  app->footer("Examples:\n"
              "  dptwin plan --model resnet50 --target-samples-per-s 20000 --hardware dgx-a100:2.40 "
              "--hardware l40s-4x-pcie4:1.10\n"
              "  dptwin plan --model gpt2-124m --samples 1e9 --within-hours 24 --hardware dgx-h100-cluster:4.50 "
              "--strategies ddp --max-gpus 256\n"
              "  dptwin plan scenarios/whatif/plan-resnet50.yaml --report plan/\n"
              "  dptwin plan --model gpt2-124m --target-tokens-per-s 2e6 --hardware dgx-h100-cluster:4.50 --currency USD\n\n" +
              exit_codes_help() + " Exit 1 here: no configuration meets the target.");
  return [a] { return run_plan(*a); };
}

Registration reg{"plan", setup};

}  // namespace
}  // namespace dpt::cli::cmd_plan
