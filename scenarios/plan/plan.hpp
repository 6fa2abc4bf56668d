// Capacity planning (`dptwin plan`): given a model, a target (samples/s or tokens/s,
// or a number of samples or tokens within a time) and candidate hardware with
// optional prices per GPU-hour, predict every candidate configuration (hardware x
// strategy x GPU count: within a node 1, 2, 4, ... and the whole node, then every
// whole number of nodes) and pick the cheapest that meets the target within memory;
// show configurations within a stated cost margin as alternatives, and say for
// every other configuration why it lost (out of memory on a GPU, communication-
// bound, too slow, more expensive, infeasible).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scenarios/report/report_assumptions.hpp"
#include "scenarios/report/report_document.hpp"
#include "scenarios/scenario/predict_runner.hpp"
#include "scenarios/scenario/scenario.hpp"
#include "scenarios/scenario/sweep.hpp"

namespace dpt::scenario {

struct PlanRequest {
  std::string model;
  Target target;
  PlanSpec spec;  // candidates, strategies, max GPUs, currency, training length, tie margin
  std::int64_t batch_per_device = 32;
  // A fixed global batch reached through DDP accumulation at every GPU count (global_batch:).
  std::optional<std::int64_t> global_batch;
  DType dtype = DType::f32;
  std::optional<Precision> precision;  // none: the dtype's
  OptimizerKind optimizer = OptimizerKind::sgd_momentum;
  OptimizerImpl optimizer_impl = OptimizerImpl::foreach;  // --optimizer-impl
  double bucket_cap_mb = 25.0;
};

// GPU counts a plan tries on hardware with `gpus_per_node` GPUs per node and
// `available_gpus` in all: 1, 2, 4, ... below one node, the node, then every whole
// number of nodes, up to min(available_gpus, max_gpus). Throws std::invalid_argument
// on a count below 1. A plan passes max_gpus as available on hardware with a network
// section (any number of its nodes, as predict runs them), else the machine's GPUs.
std::vector<int> plan_gpu_counts(int gpus_per_node, int available_gpus, int max_gpus);

// The sweeps that evaluate a plan: one per candidate hardware (its own GPU counts).
// A target in tokens is converted to samples with the model's tokens per sample.
std::vector<Scenario> plan_scenarios(const PlanRequest& request, const Library& lib);
// The plan of a file with target and plan sections (its base fields, overrides included).
std::vector<Scenario> plan_scenarios_from_file(const Scenario& file_scenario, const Library& lib);
// Runs the plan's sweeps and joins their points into one result (indices renumbered).
SweepResult run_plan_sweeps(const std::vector<Scenario>& scenarios, const Library& lib, const PointRunner& runner,
                            const SweepOptions& options);

// Why a configuration won or lost.
enum class PlanVerdictKind {
  winner, alternative, more_expensive, too_slow, communication_bound, out_of_memory, infeasible, failed
};
const char* plan_verdict_name(PlanVerdictKind k);

struct PlanVerdict {
  std::size_t point = 0;          // index into PlanResult::sweep.points
  PlanVerdictKind kind = PlanVerdictKind::too_slow;
  std::string reason;             // one clause, e.g. "out of memory on sim:gpu0 (activations 61.2 GiB)"
  std::optional<double> price_per_hour;   // GPUs x price per GPU-hour, when priced and predicted
  std::optional<double> hours_to_train;   // the training run's samples / throughput
  std::optional<double> cost_of_target;   // price per hour x hours to train (total cost)
};

struct PlanResult {
  SweepResult sweep;
  Target target;
  PlanSpec spec;
  std::vector<PlanVerdict> verdicts;  // one per sweep point, same order
  std::optional<std::size_t> winner;  // index into verdicts
  // Per candidate hardware: the nodes its file describes (`nodes:`, the default size, which
  // the plan may exceed on hardware with a network). Filled by the caller that loaded the
  // files; the answer says when the winner needs more nodes than that.
  std::map<std::string, int> file_nodes;
  // Per candidate hardware without a network section (one machine, which the plan cannot
  // grow): its GPUs. Filled by the same caller; an answer that meets no target names them.
  std::map<std::string, int> single_machine_gpus;
};

// Judges a finished plan sweep: the cheapest configuration meeting the target wins
// (by total cost for a target of samples within hours, else by price per hour;
// unpriced candidates by fewest GPUs, then highest throughput). Those costing at most
// spec.tie_margin more are alternatives, each with the reason it loses.
PlanResult judge_plan(const SweepResult& sweep, const Target& target, const PlanSpec& spec);
PlanResult judge_plan(const SweepResult& sweep, const Target& target, const std::vector<PlanCandidate>& candidates);

// "57.60 USD", or "57.60" when the plan names no currency.
std::string plan_money(const PlanSpec& spec, double amount);
// The GPU count of a point as written in the plan (also for points that were skipped).
int plan_point_gpus(const PointResult& p);

// The one-sentence answer.
std::string plan_answer(const PlanResult& plan);
// Why each configuration but the winner lost, in sweep order: "HARDWARE STRATEGY xN: reason",
// GPU counts of one hardware and strategy that lost for the same reason on one line.
std::vector<std::string> plan_reason_lines(const PlanResult& plan);
report::ReportDocument build_plan_report(const PlanResult& plan, const std::string& generated_by,
                                         const std::optional<report::AssumptionsInput>& assumptions = std::nullopt);

}  // namespace dpt::scenario
