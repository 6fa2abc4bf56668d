// dptwin predict: one training step of one configuration on the twin.
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/io/atomic_file.hpp"
#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/scenario/predict_runner.hpp"
#include "scenarios/report/report_assumptions.hpp"
#include "scenarios/report/report_sweep.hpp"
#include "scenarios/report/report_text.hpp"
#include "scenarios/cli/flag_limits.hpp"
#include "scenarios/cli/report_lock.hpp"
#include "scenarios/cli/whatif_flags.hpp"

namespace dpt::cli::cmd_predict {  // a namespace per command: unity batches join anonymous ones
namespace {

struct PredictArgs {
  std::string scenario_file;
  whatif::PointFlags flags;
  std::string out, trace, report_dir;
  bool json = false;
  bool every_rank = false;
};

// A Chrome trace with no events and the reason, in place of the trace a run could not
// make (written atomically, as every output).
void write_empty_trace(const std::string& path, const std::string& why) {
  const nlohmann::json doc = {{"traceEvents", nlohmann::json::array()}, {"otherData", {{"dptwin", why}}}};
  write_file_atomic(path, doc.dump(1) + "\n");
}

// The step report as --json prints it: with the dptwin build that wrote it, so a saved
// report says which version predicted it (it lacked the block --json has).
void write_versioned_report(const StepReport& r, const std::string& path) {
  write_file_atomic(path, with_version(step_report_to_json(r)).dump(2) + "\n", {.create_parent_dirs = true});
}

int run_predict(const PredictArgs& a) {
  const auto lib = whatif::library();
  scenario::Scenario s;
  if (a.scenario_file.empty()) {
    if (!a.flags.hardware || !a.flags.model || !a.flags.strategy || !(a.flags.batch || a.flags.batch_per_device)) {
      // Name what is missing (only the batch left out read as the whole list; an outside-user review).
      std::vector<std::string> missing;
      if (!a.flags.hardware) missing.push_back("--hardware");
      if (!a.flags.model) missing.push_back("--model");
      if (!a.flags.strategy) missing.push_back("--strategy");
      if (!(a.flags.batch || a.flags.batch_per_device)) missing.push_back("--batch or --batch-per-device");
      const bool none = missing.size() == 4;
      throw std::invalid_argument(
          none ? std::string("give a scenario file, or --hardware, --model, --strategy and --batch or --batch-per-device")
               : fmt::format("without a scenario file, predict also needs {} (the flags name the whole configuration)",
                             fmt::join(missing, ", ")));
    }
    s = whatif::scenario_from_flags(a.flags, "predict");
  } else {
    s = scenario::load_scenario_file(a.scenario_file);
    whatif::apply_point_flags(s, a.flags);
  }
  if (!s.sweep.empty()) {
    std::string axes;
    for (const auto& ax : s.sweep) axes += fmt::format("{}{}", axes.empty() ? "" : ", ", ax.name);
    throw std::invalid_argument(fmt::format("{}: sweep: predict runs one configuration, this scenario sweeps {} "
                                            "(run it with dptwin sweep, or fix the axes with flags)",
                                            s.file, axes));
  }
  limits::require_output_file("--out", a.out);
  limits::require_output_file("--trace", a.trace);
  const auto inputs = whatif::scenario_input_files(s);
  limits::refuse_shared_files({{"--out", a.out}, {"--trace", a.trace}}, inputs);
  limits::refuse_in_report_dir(a.report_dir, {{"--out", a.out}, {"--trace", a.trace}}, inputs, false);
  if (s.target) s.target = scenario::target_in_samples_for(s, lib);  // a target in tokens, in samples
  std::optional<scenario::ResolvedPoint> resolved;
  try {
    resolved = scenario::resolve_point(s, s.base, lib);
  } catch (const scenario::ModelDoesNotFit& e) {
    // Out of memory before the step runs is a result too, as the twin's own is: --json and
    // --out carry it (the step report's out_of_memory), and --trace an empty trace, so no
    // output of an earlier run is left beside this one's.
    const StepReport r = scenario::out_of_memory_before_step(s, e);
    if (!a.trace.empty()) write_empty_trace(a.trace, "out of memory before the step ran: " + e.reason());
    if (!a.out.empty()) write_versioned_report(r, a.out);
    if (a.json) print_json(step_report_to_json(r));
    throw;
  }
  const scenario::ResolvedPoint& point = *resolved;
  const ReportDirLock lock("--report", a.report_dir);
  // The per-link usage goes only into the JSON outputs (--json, --out, --report's data);
  // the summary does not print it.
  const bool links = a.json || !a.out.empty() || !a.report_dir.empty();
  const StepReport r = scenario::predict_point_with(point, a.trace, a.every_rank, links);
  if (!a.trace.empty() && r.trace.empty())  // out of memory in the step: no trace of it
    write_empty_trace(a.trace, r.out_of_memory ? "out of memory: " + r.out_of_memory->message : "no trace");
  if (!a.out.empty()) write_versioned_report(r, a.out);
  if (!a.report_dir.empty()) {
    scenario::SweepResult sr;
    sr.scenario_name = s.name;
    sr.scenario_file = s.file;
    sr.question = s.question;
    sr.scenario_digest = scenario::text_digest(s.text);
    sr.target = s.target;
    sr.total_points = 1;
    scenario::PointResult p;
    p.hardware = point.hardware_name;
    p.gpu_name = point.hardware.gpu.name;
    p.model = point.model.name;
    p.strategy = strategy_kind_name(point.strategy);
    p.devices = point.devices;
    p.nodes = point.nodes;
    // Samples per optimizer step, as sweep's points count them (K micro-batches under
    // accumulation; the report had said one micro-batch's, found by an outside-user review).
    p.batch_global = point.batch_global * point.accumulate;
    p.batch_per_device = point.batch_per_device;
    p.dtype = std::string(dtype_name(point.dtype));
    p.bucket_cap_mb = point.bucket_cap_mb;
    p.optimizer = scenario::optimizer_kind_name(point.optimizer);
    p.status = r.out_of_memory ? scenario::PointStatus::out_of_memory : scenario::PointStatus::ok;
    p.reason = r.out_of_memory ? r.out_of_memory->message : "";
    p.report = r;
    sr.points.push_back(p);
    // With its Assumptions section, as sweep's and report's reports (predict's had none;
    // found by an outside-user review).
    report::SweepReportOptions options{a.report_dir, "dptwin predict", s.text, std::nullopt};
    options.assumptions = report::assumptions_input(sr, &s, lib);
    report::write_report(report::build_sweep_report(sr, options), a.report_dir);
  }
  if (a.json) print_json(step_report_to_json(r));
  else std::cout << report::step_summary_text(r, point.hardware.gpu.name);
  if (r.out_of_memory) {
    std::cerr << "dptwin predict: out of memory on " << r.out_of_memory->device << "\n";
    return kExitFailure;
  }
  if (s.target && r.throughput_samples_per_s && *r.throughput_samples_per_s < s.target->required_samples_per_s()) {
    std::cerr << "dptwin predict: the target of " << s.target->describe() << " is not met\n";
    return kExitFailure;
  }
  return kExitOk;
}

RunFn setup(CLI::App& parent) {
  auto a = std::make_shared<PredictArgs>();
  CLI::App* app = parent.add_subcommand(
      "predict", "Predict one training step on the SimGrid twin: step time and its breakdown, throughput, scaling "
                 "efficiency, per-GPU memory; optionally the step report (JSON), a Chrome trace and a report.");
  app->add_option("scenario", a->scenario_file, "scenario YAML without sweep axes (optional when the flags name it all)")
      ->check(CLI::ExistingFile);
  whatif::add_point_flags(app, a->flags);
  app->add_option("-o,--out", a->out, "write the step report to this file (JSON, dptwin.step_report/1)");
  app->add_option("--trace", a->trace, "write the Chrome trace of the step here (open it in Perfetto)");
  app->add_option("--report", a->report_dir, "write an HTML and Markdown report into this directory");
  app->add_flag("--json", a->json, "print the step report as JSON instead of the summary");
  app->add_flag("--every-rank", a->every_rank,
                "multi-node DDP: simulate every rank instead of node 0's standing for all (same answer, slower; "
                "the trace then shows every GPU)");
  app->footer("Examples:\n"
              "  dptwin predict scenarios/whatif/resnet50-dgx-a100-ddp.yaml\n"
              "  dptwin predict --hardware dgx-h100 --model gpt2-124m --strategy ddp --devices 8 --batch-per-device 8 "
              "--trace step.json\n\n" +
              exit_codes_help() + " Exit 1 here: out of memory, or the scenario's target is not met.");
  return [a] { return run_predict(*a); };
}

Registration reg{"predict", setup};

}  // namespace
}  // namespace dpt::cli::cmd_predict
