// Sweeps: a scenario's axes expanded to points, each point predicted in its own
// process (SimGrid runs one engine per process), --jobs of them at a time, a
// progress bar on a terminal, and --shard I/N to split the points over a Slurm
// job array; `dptwin merge` puts the shards back together.
//
// Results are JSON ("dptwin.sweep/1"): the scenario's identity (name, question,
// target, digest of its text) and one entry per point with its configuration,
// status (ok, out_of_memory, skipped, failed), reason and step report.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "scenarios/scenario/scenario.hpp"
#include "sim/twin/step_report.hpp"

namespace dpt::scenario {

inline constexpr const char* kSweepSchema = "dptwin.sweep/1";

enum class PointStatus {
  ok,             // predicted
  out_of_memory,  // the model or its activations do not fit (the reason names the device)
  skipped,        // the hardware cannot run this configuration (more GPUs than it has, DP across nodes)
  failed,         // the prediction itself failed (the reason says how)
};
const char* point_status_name(PointStatus s);

struct PointResult {
  std::size_t index = 0;                                   // position in the scenario's expansion
  std::vector<std::pair<std::string, std::string>> axes;   // swept axis -> value as written
  std::string hardware;                                    // as the scenario names it
  std::string gpu_name;                                    // from the hardware file, e.g. "A100-SXM4-80GB"
  std::string model;
  std::string strategy;                                    // single | dp | ddp
  int devices = 0;                                         // GPUs per node
  int nodes = 0;
  std::int64_t batch_global = 0;
  std::int64_t batch_per_device = 0;
  std::string dtype;
  std::string precision;  // the training precision ("f32", "bf16-amp", ...); "" in results written before it
  double bucket_cap_mb = 0;
  std::string optimizer;
  PointStatus status = PointStatus::ok;
  std::string reason;                  // why it is not ok
  std::optional<StepReport> report;    // the prediction (also for out_of_memory when the twin made one)
  double wall_s = 0;                   // how long the prediction took (simulator time, not simulated)
  int gpus() const { return devices * nodes; }
};

struct SweepResult {
  std::string scenario_name;
  std::string scenario_file;
  std::string question;
  std::string scenario_digest;    // FNV-1a of the scenario text: shards of one sweep share it
  // FNV-1a of what the points ran with besides the text: the scenario's fields after
  // command-line flags, each hardware file it names (as read, overrides applied) and the
  // dptwin build (run_settings_digest). Empty in results written before it existed.
  std::string run_digest;
  // The hardware overrides the points ran with, scenario and flags ("gpu.memory = 40 GiB",
  // "pcie.lanes swept over 8, 16"), so a report made from the result says them. Empty in
  // results written before 2026-12-07.
  std::vector<std::string> overrides;
  std::optional<Target> target;
  std::size_t total_points = 0;   // in the whole sweep, all shards
  int shard_index = 0;            // this result covers points with index % shard_count == shard_index
  int shard_count = 1;
  std::vector<PointResult> points;  // by index
};

// The hardware overrides of a scenario as SweepResult::overrides states them.
std::vector<std::string> override_descriptions(const Scenario& s);
// One override as the reports write it: "gpu.memory = 40 GiB".
std::string override_description(const Override& o);

nlohmann::json sweep_result_to_json(const SweepResult& r);
// Throws std::invalid_argument naming `where` and the key on a malformed result.
SweepResult sweep_result_from_json(const nlohmann::json& j, const std::string& where);
void write_sweep_result(const SweepResult& r, const std::string& path);  // atomically
SweepResult read_sweep_result(const std::string& path);

// One point before it runs: its index, its swept values and its configuration.
struct SweepPoint {
  std::size_t index = 0;
  std::vector<std::pair<std::string, std::string>> axes;
  PointConfig config;
};

// The most points one sweep may have (a result file holds every point; sharded
// runs expand only their own points).
inline constexpr std::size_t kMaxSweepPoints = 10'000'000;
// The product of the axes' lengths; throws std::invalid_argument naming the file
// when it exceeds kMaxSweepPoints (checked before it could overflow).
std::size_t sweep_point_count(const Scenario& s);
// Point `index` of the cartesian product of the axes in the order written (the
// last axis varies fastest), built on its own: sweeps never hold every point.
SweepPoint sweep_point(const Scenario& s, std::size_t index);
// Every point; a scenario without sweep is one point.
std::vector<SweepPoint> expand_sweep(const Scenario& s);

// Resolves the points of one shard (all of them by default): bad references and
// values throw (std::invalid_argument with file, line and key); infeasible points
// are allowed in a sweep as long as some point of the shard is feasible (for a
// whole sweep: some point at all); a scenario without sweep must be feasible and fit.
void validate_scenario(const Scenario& s, const Library& lib, int shard_index = 0, int shard_count = 1);

// The scenario's target in samples: one in tokens (tokens_per_s, or tokens within_hours)
// converted with the target's tokens_per_sample, else the model's "N-token" sample; with a
// sweep over models, every model's (they must agree: one target in samples per sweep). A
// target in samples is returned as is. Throws std::invalid_argument naming the file and
// the model when a model's sample is not a number of tokens, or contradicts
// tokens_per_sample, or two swept models differ.
Target target_in_samples_for(const Scenario& s, const Library& lib);

// Predicts one resolved point; writes its Chrome trace to trace_path when not empty.
using PointRunner = std::function<StepReport(const ResolvedPoint& point, const std::string& trace_path)>;

struct SweepOptions {
  int jobs = 1;              // points predicted at once, each in its own process
  int shard_index = 0;       // run the points with index % shard_count == shard_index
  int shard_count = 1;
  bool progress = false;     // draw a progress bar on stderr (callers pass isatty(2))
  std::string trace_dir;     // write each point's Chrome trace here (empty: none)
  std::string build;         // the dptwin build (version and git revision), part of run_digest
};

// The digest of what a sweep's points run with besides the scenario's text: its fields
// after command-line flags (base and sweep axes), the hardware files it names as the
// library resolves them (each written out in canonical form, so an edit between array
// tasks shows), and `build`. Shards of one sweep share it; merge refuses others.
std::string run_settings_digest(const Scenario& s, const Library& lib, const std::string& build);

// Parses "I/N" (0 <= I < N <= kMaxSweepPoints); throws std::invalid_argument naming
// the flag.
std::pair<int, int> parse_shard(const std::string& text, const std::string& flag);

// Runs the scenario's points (this shard's) and returns their results. Must be
// called from a single-threaded process (it forks).
SweepResult run_sweep(const Scenario& s, const Library& lib, const PointRunner& runner, const SweepOptions& options);

// Joins shards of one sweep. Throws std::invalid_argument when they come from
// different scenarios, overlap, list a point twice, or leave points out (naming
// the missing shards).
SweepResult merge_sweep_results(const std::vector<SweepResult>& shards);

// FNV-1a 64-bit of a text, as 16 hex digits (stable across builds and machines).
std::string text_digest(const std::string& text);

}  // namespace dpt::scenario
