// dptwin sweep: every point of a scenario's sweep axes, predicted in parallel processes.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/cli/sweep_exit.hpp"
#include "scenarios/scenario/predict_runner.hpp"
#include "scenarios/report/report_sweep.hpp"
#include "scenarios/report/report_text.hpp"
#include "scenarios/cli/flag_limits.hpp"
#include "scenarios/cli/report_lock.hpp"
#include "scenarios/cli/sweep_output.hpp"
#include "scenarios/cli/version.hpp"
#include "scenarios/cli/whatif_flags.hpp"

namespace dpt::cli::cmd_sweep {  // a namespace per command: unity batches join anonymous ones
namespace {

struct SweepArgs {
  std::string scenario_file;
  whatif::PointFlags flags;
  int jobs = whatif::default_jobs();
  std::string shard = "0/1";
  std::string out;
  std::string report_dir;
  std::string trace_dir;
  bool json = false;
};

int run_sweep_command(const SweepArgs& a) {
  const auto lib = whatif::library();
  scenario::Scenario s = scenario::load_scenario_file(a.scenario_file);
  whatif::apply_point_flags(s, a.flags);
  if (a.jobs < 1) throw std::invalid_argument(fmt::format("--jobs {}: must be at least 1", a.jobs));
  const auto [shard_index, shard_count] = scenario::parse_shard(a.shard, "--shard");
  const bool whole = shard_count == 1;
  if (!a.report_dir.empty() && !whole)
    throw std::invalid_argument("--report needs every point: run the shards, dptwin merge them, then dptwin report "
                                "MERGED.json");
  limits::require_output_file("-o", a.out);
  const auto inputs = whatif::scenario_input_files(s);
  limits::refuse_shared_files({{"-o", a.out}}, inputs);
  limits::refuse_in_report_dir(a.report_dir, {{"-o", a.out}, {"--trace-dir", a.trace_dir}}, inputs, true);
  limits::require_output_dir("--trace-dir", a.trace_dir);
  if (s.target) s.target = scenario::target_in_samples_for(s, lib);  // a target in tokens, in samples
  // Only this shard's points are resolved: a shard of a huge sweep starts at once.
  scenario::validate_scenario(s, lib, shard_index, shard_count);
  const ReportDirLock lock("--report", a.report_dir, /*replaces_whole=*/true);
  scenario::SweepOptions o;
  o.jobs = a.jobs;
  o.shard_index = shard_index;
  o.shard_count = shard_count;
  o.progress = whatif::stderr_is_terminal() && !a.json;
  o.build = version_line();  // shards of one sweep come from one build (merge checks)
  // A report directory is replaced whole: its traces go into the staging directory.
  std::optional<report::ReportStaging> staging;
  if (!a.report_dir.empty()) staging.emplace(a.report_dir);
  o.trace_dir = !a.trace_dir.empty() ? a.trace_dir
                                     : (staging ? (std::filesystem::path(staging->path()) / "traces").string() : "");
  scenario::SweepResult r = scenario::run_sweep(s, lib, scenario::predict_point, o);
  if (staging) report::move_trace_paths(r, staging->path(), staging->dir());
  // A sweep whose every point failed (exit 3) has nothing to keep: an earlier -o file is
  // left as it was rather than replaced by failures.
  const bool all_failed = !r.points.empty() && std::all_of(r.points.begin(), r.points.end(), [](const auto& p) {
    return p.status == scenario::PointStatus::failed;
  });
  if (!a.out.empty() && all_failed)
    std::cerr << "dptwin sweep: every point failed; " << a.out << " left as it was\n";
  else if (!a.out.empty())
    write_sweep_file(r, a.out);
  if (staging) {
    report::SweepReportOptions options{staging->dir(), "dptwin sweep " + a.scenario_file, s.text, std::nullopt};
    options.assumptions = report::assumptions_input(r, &s, lib);
    report::write_report(report::build_sweep_report(r, options), staging->path());
    staging->commit();
  }
  if (a.json) {
    print_json(scenario::sweep_result_to_json(r), 1);
  } else {
    std::cout << report::sweep_table_text(r);
    if (whole) std::cout << "\n" << report::sweep_answer(r) << "\n";
    if (!a.out.empty() && !all_failed) std::cout << "results: " << a.out << "\n";
    if (staging) std::cout << "report: " << (std::filesystem::path(staging->dir()) / "report.html").string() << "\n";
  }
  return sweep_exit_code(r);
}

RunFn setup(CLI::App& parent) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* app = parent.add_subcommand(
      "sweep", "Predict every point of a scenario's sweep axes (the cartesian product), each in its own process, "
               "--jobs at a time; a progress bar on a terminal. Split over a Slurm job array with --shard I/N and "
               "join the shards with dptwin merge.");
  app->add_option("scenario", a->scenario_file, "scenario YAML with sweep axes")->required()->check(CLI::ExistingFile);
  whatif::add_point_flags(app, a->flags);
  app->add_option("-j,--jobs", a->jobs, "points predicted at once (default: the CPUs this process may use: taskset, a Slurm allocation)");
  app->add_option("--shard", a->shard, "run shard I of N (0 <= I < N): the points whose index % N == I");
  app->add_option("-o,--out", a->out, "write the results to this file (JSON, dptwin.sweep/1)");
  app->add_option("--report", a->report_dir, "write the HTML and Markdown report into this directory");
  app->add_option("--trace-dir", a->trace_dir, "write each point's Chrome trace here (default: REPORT/traces)");
  app->add_flag("--json", a->json, "print the results as JSON instead of the table");
  app->footer("Examples:\n"
              "  dptwin sweep scenarios/whatif/resnet50-scaling.yaml --jobs 4 --report out/\n"
              "  sbatch --array=0-7 --wrap 'dptwin sweep S.yaml --shard $SLURM_ARRAY_TASK_ID/8 -o shard-$SLURM_ARRAY_TASK_ID.json'\n"
              "  dptwin merge shard-*.json -o all.json && dptwin report all.json --report report/\n\n" +
              exit_codes_help() + " Exit 1 here (whole sweeps, not shards): no point could be predicted (every "
              "point out of memory or skipped), or no point meets the scenario's target.");
  return [a] { return run_sweep_command(*a); };
}

Registration reg{"sweep", setup};

}  // namespace
}  // namespace dpt::cli::cmd_sweep
