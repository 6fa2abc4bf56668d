// dptwin report: a scenario's sweep (the embedded default when none is given) or
// saved sweep results, written as a self-contained HTML page and a Markdown file.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "scenarios/cli/command.hpp"
#include "scenarios/cli/sweep_exit.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/scenario/default_scenario.hpp"
#include "scenarios/scenario/predict_runner.hpp"
#include "scenarios/report/report_sweep.hpp"
#include "scenarios/cli/report_lock.hpp"
#include "scenarios/cli/flag_limits.hpp"
#include "scenarios/cli/whatif_flags.hpp"

namespace dpt::cli::cmd_report {  // a namespace per command: unity batches join anonymous ones
namespace {

struct ReportArgs {
  std::string input;
  whatif::PointFlags flags;
  std::string out_dir = "dptwin-report";  // --report DIR (-o DIR: the deprecated spelling)
  std::string flag = "--report";         // the spelling given, for messages
  int jobs = whatif::default_jobs();
  bool json = false;
};

bool is_results_file(const std::string& path) { return std::filesystem::path(path).extension() == ".json"; }

// Whether a flag changed what the scenario sweeps: then its question no longer fits.
bool flags_change_question(const whatif::PointFlags& f) {
  return f.hardware || f.model || f.strategy || f.devices || f.nodes || f.gpus || f.batch || f.batch_per_device ||
         f.dtype || f.optimizer || f.bucket_cap_mb || !f.overrides.empty();
}

// The first scenario flag given, as spelled on the command line; empty when none.
std::string first_point_flag(const whatif::PointFlags& f) {
  const std::pair<bool, const char*> flags[] = {
      {f.hardware.has_value(), "--hardware"},       {f.model.has_value(), "--model"},
      {f.strategy.has_value(), "--strategy"},       {f.devices.has_value(), "--devices"},
      {f.nodes.has_value(), "--nodes"},             {f.gpus.has_value(), "--gpus"},
      {f.batch.has_value(), "--batch"},             {f.batch_per_device.has_value(), "--batch-per-device"},
      {f.dtype.has_value(), "--dtype"},             {f.precision.has_value(), "--precision"},
      {f.memory_format.has_value(), "--memory-format"}, {f.inputs.has_value(), "--inputs"},
      {f.accumulate.has_value(), "--accumulate"},   {f.global_batch.has_value(), "--global-batch"},
      {f.checkpoint.has_value(), "--checkpoint"},   {f.comm_hook.has_value(), "--comm-hook"},
      {f.bucket_cap_mb.has_value(), "--bucket-cap-mb"}, {f.optimizer.has_value(), "--optimizer"},
      {!f.overrides.empty(), "--override"}};
  for (const auto& [set, name] : flags)
    if (set) return name;
  return "";
}

int run_report(const ReportArgs& a) {
  const auto lib = whatif::library();
  ReportDirLock lock;  // taken once the input is known good
  std::optional<report::ReportStaging> staging;
  scenario::SweepResult r;
  std::string scenario_text;
  std::optional<scenario::Scenario> scenario_used;
  if (!a.input.empty() && is_results_file(a.input)) {
    // Its points are predicted already: a scenario flag cannot change them, and a report
    // that ignored it would answer another question than the one asked.
    if (const std::string flag = first_point_flag(a.flags); !flag.empty())
      throw std::invalid_argument(fmt::format("{}: {} holds points already predicted, which scenario flags cannot "
                                              "change; give the scenario YAML instead (dptwin report SCENARIO {} ...)",
                                              flag, a.input, flag));
    r = scenario::read_sweep_result(a.input);
    if (r.shard_count != 1)
      throw std::invalid_argument(fmt::format("{}: shard {}/{} holds only part of the sweep; dptwin merge the shards "
                                              "first", a.input, r.shard_index, r.shard_count));
    limits::refuse_in_report_dir(a.out_dir, {}, {{"results file", a.input}}, true);
    lock = ReportDirLock(a.flag, a.out_dir, /*replaces_whole=*/true);
    staging.emplace(a.out_dir);
  } else {
    if (a.jobs < 1) throw std::invalid_argument(fmt::format("--jobs {}: must be at least 1", a.jobs));
    scenario::Scenario s = a.input.empty()
                               ? scenario::parse_scenario(scenario::default_scenario_text(),
                                                          scenario::kDefaultScenarioLabel, lib.hardware_dir.parent_path())
                               : scenario::load_scenario_file(a.input);
    whatif::apply_point_flags(s, a.flags);
    if (s.target) s.target = scenario::target_in_samples_for(s, lib);  // a target in tokens, in samples
    scenario::validate_scenario(s, lib);
    limits::refuse_in_report_dir(a.out_dir, {}, whatif::scenario_input_files(s), true);
    lock = ReportDirLock(a.flag, a.out_dir, /*replaces_whole=*/true);
    staging.emplace(a.out_dir);
    scenario::SweepOptions o;
    o.jobs = a.jobs;
    o.progress = whatif::stderr_is_terminal() && !a.json;
    // Traces go into the staging directory, which replaces the report directory whole.
    o.trace_dir = (std::filesystem::path(staging->path()) / "traces").string();
    r = scenario::run_sweep(s, lib, scenario::predict_point, o);
    report::move_trace_paths(r, staging->path(), staging->dir());
    scenario_text = s.text;
    // Flags that change the sweep make the file's question wrong (a PCIe server and a
    // DGX A100 above H100 results): ask what was run instead.
    if (flags_change_question(a.flags)) r.question = report::question_for_points(r);
    scenario_used = s;
  }
  const std::string command = a.input.empty() ? "dptwin report" : "dptwin report " + a.input;
  report::SweepReportOptions options{staging->dir(), command, scenario_text, std::nullopt};
  options.assumptions = report::assumptions_input(r, scenario_used ? &*scenario_used : nullptr, lib);
  const auto doc = report::build_sweep_report(r, options);
  const auto written = report::write_report(doc, staging->path());
  staging->commit();
  const bool met = report::sweep_meets_target(r);
  if (a.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : written.files) files.push_back((std::filesystem::path(staging->dir()) / f).string());
    print_json(nlohmann::json{{"question", doc.question}, {"answer", doc.answer}, {"meets_target", met},
                               {"report_html", (std::filesystem::path(staging->dir()) / "report.html").string()},
                               {"files", files}});
  } else {
    if (!doc.question.empty()) std::cout << doc.question << "\n";
    std::cout << doc.answer << "\n"
              << "report: " << (std::filesystem::path(staging->dir()) / "report.html").string() << " (and report.md, "
              << "points.csv)\n";
  }
  return sweep_exit_code(r);
}

RunFn setup(CLI::App& parent) {
  auto a = std::make_shared<ReportArgs>();
  CLI::App* app = parent.add_subcommand(
      "report", "Answer a what-if question as a report: the question, a one-sentence answer, charts (throughput against "
                "GPU count beside the ideal line, scaling efficiency, step-time breakdown, per-GPU memory), tables, a "
                "CSV of every point and Chrome traces. With no argument: the embedded default scenario (DataParallel "
                "against DDP on 1-8 GPUs of a PCIe server and a DGX).");
  app->add_option("input", a->input, "scenario YAML, or sweep results JSON (dptwin sweep -o, dptwin merge -o)")
      ->check(CLI::ExistingFile);
  whatif::add_point_flags(app, a->flags);
  CLI::Option* report_opt =
      app->add_option("--report", a->out_dir, "directory for report.html, report.md, points.csv, charts/ and traces/")
          ->capture_default_str();
  // -o names a file in every other command; here it was the directory. Kept, with a note.
  CLI::Option* out_opt =
      app->add_option("-o,--out", a->out_dir, "deprecated spelling of --report DIR (-o is a file everywhere else)")
          ->excludes(report_opt)
          ->group("Deprecated");
  app->add_option("-j,--jobs", a->jobs, "points predicted at once (default: the CPUs this process may use: taskset, a Slurm allocation)");
  app->add_flag("--json", a->json, "print the answer and the written files as JSON");
  app->footer("Examples:\n"
              "  dptwin report                          # the default scenario into ./dptwin-report/\n"
              "  dptwin report scenarios/whatif/gpt2-124m-scaling.yaml --report gpt2-report\n"
              "  dptwin report all.json                 # merged sweep shards\n\n" +
              exit_codes_help() + " Exit 1 here: no point could be predicted (every point out of memory or "
              "skipped), or no point meets the scenario's target.");
  return [a, out_opt] {
    if (out_opt->count() > 0) {
      a->flag = "-o";
      std::cerr << "dptwin report: note: -o DIR is deprecated; use --report DIR (-o names a file in the other "
                   "commands)\n";
    }
    return run_report(*a);
  };
}

Registration reg{"report", setup};

}  // namespace
}  // namespace dpt::cli::cmd_report
