// The sweep's point runner: one resolved scenario point predicted by the twin
// (sim/predict.hpp) with the model library's cost-only layers.
#pragma once
#include <optional>
#include <string>

#include "scenarios/scenario/scenario.hpp"
#include "sim/twin/step_report.hpp"

namespace dpt::scenario {

// Predicts one point (shape-only: the cost-only model computes nothing) and
// writes its Chrome trace to trace_path when not empty. Forks (SimGrid runs one
// engine per process): call it from a single-threaded process.
StepReport predict_point(const ResolvedPoint& point, const std::string& trace_path);
// The same, simulating every DDP rank even where node 0's would stand for all
// (PredictConfig::symmetric_ranks): the same answer at a cost that grows with the ranks.
StepReport predict_point_every_rank(const ResolvedPoint& point, const std::string& trace_path);
// Either of the two, and link_usage false leaves out the report's per-link usage
// (PredictConfig::link_usage) for a caller that prints only the summary.
StepReport predict_point_with(const ResolvedPoint& point, const std::string& trace_path, bool every_rank,
                              bool link_usage);

// The step report of a configuration whose parameters, gradients and optimizer state alone
// exceed a GPU (ModelDoesNotFit before any step runs): no step time, out of memory on every
// GPU, and the configuration as resolved (hardware, model, strategy, GPUs, batches,
// precision) where the exception carries it, else as the scenario states it.
StepReport out_of_memory_before_step(const Scenario& s, const ModelDoesNotFit& e);

// The model's tokens per sample (ModelDescription::tokens_per_sample: a transformer's
// sequence, a model file's tokens_per_sample key), or nullopt. The reports give tokens/s
// with it. Never read off the sample's prose ("one image with its 77-token caption").
std::optional<double> tokens_per_sample_of(const ModelDescription& model);

}  // namespace dpt::scenario
