// dptwin merge: joins the shards of one sweep (--shard I/N runs) into one result.
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/report/report_sweep.hpp"
#include "scenarios/report/report_text.hpp"
#include "scenarios/cli/flag_limits.hpp"
#include "scenarios/cli/report_lock.hpp"
#include "scenarios/cli/sweep_output.hpp"
#include "scenarios/cli/whatif_flags.hpp"
#include "scenarios/report/report_assumptions.hpp"
#include "scenarios/scenario/sweep.hpp"

namespace dpt::cli::cmd_merge {  // a namespace per command: unity batches join anonymous ones
namespace {

struct MergeArgs {
  std::vector<std::string> inputs;
  std::string out;
  std::string report_dir;
  bool json = false;
};

int run_merge(const MergeArgs& a) {
  // The merged file never replaces a shard: a rerun of the merge needs every shard.
  if (!a.out.empty())
    for (const auto& f : a.inputs) {
      if (limits::same_file(a.out, f))
        throw std::invalid_argument(
            fmt::format("-o {}: is one of the shards it merges ({}); write the merged result elsewhere", a.out, f));
    }
  std::vector<scenario::SweepResult> shards;
  for (const auto& f : a.inputs) shards.push_back(scenario::read_sweep_result(f));
  const scenario::SweepResult merged = scenario::merge_sweep_results(shards);
  limits::require_output_file("-o", a.out);
  {
    std::vector<limits::FileFlag> shard_files;
    for (const auto& f : a.inputs) shard_files.push_back({"shard", f});
    limits::refuse_in_report_dir(a.report_dir, {{"-o", a.out}}, shard_files, false);
  }
  const ReportDirLock lock("--report", a.report_dir);
  if (!a.out.empty()) write_sweep_file(merged, a.out);
  if (!a.report_dir.empty()) {
    // The Assumptions section, as the sweep's own report has it (simulated, the overrides the
    // shards recorded, the hardware): merged shards' reports had none.
    report::SweepReportOptions options{a.report_dir, "dptwin merge", "", std::nullopt};
    options.assumptions = report::assumptions_input(merged, nullptr, whatif::library());
    report::write_report(report::build_sweep_report(merged, options), a.report_dir);
  }
  if (a.json) {
    print_json(scenario::sweep_result_to_json(merged), 1);
  } else {
    std::cout << report::sweep_table_text(merged) << "\n" << report::sweep_answer(merged) << "\n";
    if (!a.out.empty()) std::cout << "merged " << a.inputs.size() << " shards into " << a.out << "\n";
  }
  return kExitOk;
}

RunFn setup(CLI::App& parent) {
  auto a = std::make_shared<MergeArgs>();
  CLI::App* app = parent.add_subcommand(
      "merge", "Join the shards of one sweep (dptwin sweep --shard I/N -o ...) into one result: checks that they come "
               "from the same scenario and cover every point exactly once.");
  app->add_option("shards", a->inputs, "sweep result files (JSON) of every shard")->required()->check(CLI::ExistingFile);
  app->add_option("-o,--out", a->out, "write the merged results to this file (JSON, dptwin.sweep/1)");
  app->add_option("--report", a->report_dir, "also write the HTML and Markdown report into this directory");
  app->add_flag("--json", a->json, "print the merged results as JSON");
  app->footer("Example:\n  dptwin merge shard-0.json shard-1.json shard-2.json shard-3.json -o all.json\n\n" +
              exit_codes_help());
  return [a] { return run_merge(*a); };
}

Registration reg{"merge", setup};

}  // namespace
}  // namespace dpt::cli::cmd_merge
