// Capacity planning (`dptwin plan`): given a model, a target (samples/s, or a
// number of samples within a time) and candidate hardware with optional prices
// per GPU-hour, predict every candidate configuration (hardware x strategy x GPU
// count, powers of two) and pick the cheapest that meets the target within
// memory; say for every other configuration why it lost (out of memory on a
// GPU, communication-bound, too slow, or more expensive).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "scenarios/report/report_document.hpp"
#include "scenarios/scenario/scenario.hpp"
#include "scenarios/scenario/sweep.hpp"

namespace dpt::scenario {

struct PlanRequest {
  std::string model;
  Target target;
  std::vector<PlanCandidate> candidates;
  std::vector<std::string> strategies = {"dp", "ddp"};
  int max_gpus = 64;
  std::int64_t batch_per_device = 32;
  // A fixed global batch reached through DDP accumulation at every GPU count (global_batch:).
  std::optional<std::int64_t> global_batch;
  DType dtype = DType::f32;
  std::optional<Precision> precision;  // none: the dtype's
  OptimizerKind optimizer = OptimizerKind::sgd_momentum;
  double bucket_cap_mb = 25.0;
};

// The sweep scenario that evaluates a plan (hardware x strategy x gpus 1, 2, 4, ...).
Scenario plan_scenario(const PlanRequest& request);
// The plan scenario of a file with a `plan:` section (its base fields, its target).
Scenario plan_scenario_from_file(const Scenario& file_scenario);

// Why a configuration won or lost.
enum class PlanVerdictKind { winner, more_expensive, too_slow, communication_bound, out_of_memory, infeasible, failed };
const char* plan_verdict_name(PlanVerdictKind k);

struct PlanVerdict {
  std::size_t point = 0;          // index into PlanResult::sweep.points
  PlanVerdictKind kind = PlanVerdictKind::too_slow;
  std::string reason;             // one clause, e.g. "out of memory on sim:gpu0 (activations 61.2 GiB)"
  std::optional<double> price_per_hour;   // GPUs x price per GPU-hour, when priced
  std::optional<double> cost_of_target;   // price x hours to train the target's samples
};

struct PlanResult {
  SweepResult sweep;
  Target target;
  std::vector<PlanCandidate> candidates;
  std::vector<PlanVerdict> verdicts;  // one per sweep point, same order
  std::optional<std::size_t> winner;  // index into verdicts
};

// Judges a finished plan sweep: the cheapest (by price per hour, or total cost for
// a time target; unpriced candidates by fewest GPUs, then highest throughput)
// configuration meeting the target wins.
PlanResult judge_plan(const SweepResult& sweep, const Target& target, const std::vector<PlanCandidate>& candidates);

// The one-sentence answer.
std::string plan_answer(const PlanResult& plan);
report::ReportDocument build_plan_report(const PlanResult& plan, const std::string& generated_by);

}  // namespace dpt::scenario
