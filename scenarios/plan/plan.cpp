#include "scenarios/plan/plan.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "scenarios/report/report_format.hpp"
#include "scenarios/scenario/model_library_yaml.hpp"
#include "scenarios/scenario/predict_runner.hpp"

namespace dpt::scenario {
namespace {

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

// One candidate's axes: its hardware, the strategies, its GPU counts.
void set_plan_axes(YAML::Node& root, const std::string& hardware, const std::vector<std::string>& strategies,
                   const std::vector<int>& counts) {
  YAML::Node sweep = root["sweep"].IsDefined() ? root["sweep"] : YAML::Node(YAML::NodeType::Map);
  YAML::Node st(YAML::NodeType::Sequence), gpus(YAML::NodeType::Sequence);
  for (const auto& s : strategies) st.push_back(s);
  for (int g : counts) gpus.push_back(g);
  st.SetStyle(YAML::EmitterStyle::Flow);
  gpus.SetStyle(YAML::EmitterStyle::Flow);
  root["hardware"] = hardware;
  sweep["strategy"] = st;
  sweep["gpus"] = gpus;
  root["sweep"] = sweep;
}

std::vector<Scenario> scenarios_for(const YAML::Node& base_root, const Scenario& base, const PlanSpec& spec,
                                    const Library& lib) {
  const Target target = target_in_samples_for(base, lib);
  std::vector<Scenario> out;
  for (const auto& c : spec.candidates) {
    // A path relative to the plan file's folder, as its points resolve it (from another
    // working directory it read "does not exist").
    const auto hw = load_hardware_with_overrides(c.hardware, {}, lib, base.dir, "");
    YAML::Node root = YAML::Clone(base_root);
    root["target"] = target_node(target);
    // Hardware with a network section takes any number of its nodes, as predict does (its
    // file's `nodes` is the default size, not a ceiling): max_gpus bounds the plan. Only a
    // machine without one stops at its own GPUs.
    const int available = hw.network ? spec.max_gpus : hw.gpu_count();
    set_plan_axes(root, c.hardware, spec.strategies, plan_gpu_counts(hw.gpus_per_node, available, spec.max_gpus));
    Scenario s = parse_scenario(emit(root), base.file + " (plan: " + c.hardware + ")", base.dir);
    s.base.overrides.insert(s.base.overrides.end(), base.base.overrides.begin(), base.base.overrides.end());
    s.target = target;
    s.plan = spec;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::vector<int> plan_gpu_counts(int gpus_per_node, int available_gpus, int max_gpus) {
  if (gpus_per_node < 1 || available_gpus < 1 || max_gpus < 1)
    throw std::invalid_argument(fmt::format("plan: GPU counts need at least one GPU per node, one available and "
                                            "max_gpus >= 1 (got {}, {}, {})",
                                            gpus_per_node, available_gpus, max_gpus));
  const int limit = std::min(available_gpus, max_gpus);
  std::vector<int> v;
  if (fault_active(Fault::plan_powers_of_two_only)) {
    for (int g = 1; g <= limit; g *= 2) v.push_back(g);
    return v;
  }
  for (int g = 1; g < gpus_per_node && g <= limit; g *= 2) v.push_back(g);
  for (int g = gpus_per_node; g <= limit; g += gpus_per_node) v.push_back(g);
  if (v.empty() || (v.back() != limit && limit < gpus_per_node)) v.push_back(limit);  // part of one node
  return v;
}

std::vector<Scenario> plan_scenarios(const PlanRequest& q, const Library& lib) {
  if (q.spec.candidates.empty()) throw std::invalid_argument("plan: give at least one candidate --hardware");
  YAML::Node root;
  root["schema_version"] = kScenarioSchemaVersion;
  root["name"] = "plan-" + q.model;
  root["model"] = q.model;
  root["batch_per_device"] = q.batch_per_device;
  if (q.global_batch) root["global_batch"] = *q.global_batch;
  // The dtype only where no precision stores the parameters otherwise (a precision implies
  // its dtype; the flags' f32 default would contradict f16-master or bf16).
  if (!q.precision || precision_parameter_dtype(*q.precision) == q.dtype) root["dtype"] = std::string(dtype_name(q.dtype));
  if (q.precision) root["precision"] = std::string(precision_name(*q.precision));
  root["optimizer"] = optimizer_kind_name(q.optimizer);
  root["optimizer_impl"] = optimizer_impl_name(q.optimizer_impl);
  root["bucket_cap_mb"] = q.bucket_cap_mb;
  // The base scenario (the model, the target) without sweep axes.
  YAML::Node probe = YAML::Clone(root);
  probe["hardware"] = q.spec.candidates.front().hardware;
  probe["strategy"] = "ddp";
  Scenario base = parse_scenario(emit(probe), "plan flags");
  base.target = q.target;
  auto out = scenarios_for(root, base, q.spec, lib);
  for (auto& s : out)
    s.question = fmt::format("What is the cheapest configuration that trains {} at {}?", q.model, s.target->describe());
  return out;
}

std::vector<Scenario> plan_scenarios_from_file(const Scenario& f, const Library& lib) {
  if (!f.plan) throw std::invalid_argument(fmt::format("{}: plan: missing key (dptwin plan needs a plan section)", f.file));
  if (!f.target) throw std::invalid_argument(fmt::format("{}: target: missing key (dptwin plan needs a target)", f.file));
  YAML::Node root = YAML::Load(f.text);
  root["name"] = f.name;
  for (const char* k : {"hardware", "strategy", "devices", "nodes", "gpus", "plan", "target", "overrides"}) root.remove(k);
  if (root["sweep"].IsDefined())
    for (const char* k : {"hardware", "strategy", "devices", "nodes", "gpus"}) root["sweep"].remove(k);
  return scenarios_for(root, f, *f.plan, lib);
}

SweepResult run_plan_sweeps(const std::vector<Scenario>& scenarios, const Library& lib, const PointRunner& runner,
                            const SweepOptions& options) {
  if (scenarios.empty()) throw std::invalid_argument("plan: no candidate hardware");
  SweepResult all;
  for (const auto& s : scenarios) {
    SweepResult one = run_sweep(s, lib, runner, options);
    if (all.points.empty() && all.scenario_name.empty()) {
      all = one;
      all.points.clear();
      all.total_points = 0;
      all.scenario_name = s.name;
      all.question = s.question;
    }
    for (auto& p : one.points) {
      p.index = all.points.size();
      // The candidate as a swept value: reports draw a series per hardware and strategy.
      p.axes.insert(p.axes.begin(), {"hardware", p.hardware});
      all.points.push_back(std::move(p));
    }
  }
  all.total_points = all.points.size();
  std::string texts;
  for (const auto& s : scenarios) texts += s.text;
  all.scenario_digest = text_digest(texts);
  return all;
}

}  // namespace dpt::scenario
