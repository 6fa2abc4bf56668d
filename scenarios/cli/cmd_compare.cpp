// dptwin compare: step reports side by side, predicted (from scenarios) or
// measured (JSON written by `dptwin train --report` or `dptwin predict --out`).
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/scenario/predict_runner.hpp"
#include "scenarios/report/report_document.hpp"
#include "scenarios/report/report_format.hpp"
#include "scenarios/report/report_sweep.hpp"
#include "scenarios/report/report_text.hpp"
#include "scenarios/cli/report_lock.hpp"
#include "scenarios/cli/flag_limits.hpp"
#include "scenarios/cli/whatif_flags.hpp"

namespace dpt::cli::cmd_compare {  // a namespace per command: unity batches join anonymous ones
namespace {

struct CompareArgs {
  std::vector<std::string> inputs;
  std::string report_dir;
  bool json = false;
};

StepReport load_input(const std::string& path, const scenario::Library& lib) {
  if (std::filesystem::path(path).extension() == ".json") return read_step_report(path);
  scenario::Scenario s = scenario::load_scenario_file(path);
  if (!s.sweep.empty())
    throw std::invalid_argument(fmt::format("{}: sweep: compare takes scenarios of one configuration (this one sweeps; "
                                            "use dptwin report)", path));
  try {
    return scenario::predict_point(scenario::resolve_point(s, s.base, lib), "");
  } catch (const scenario::ModelDoesNotFit& e) {
    // Its parameters alone do not fit: a column like one that ran out of memory in the step.
    return scenario::out_of_memory_before_step(s, e);
  }
}

// Column labels: each input's file stem, or its file name where two different inputs share
// a stem (A.yaml against A.json), or its path where they share that too. One file given
// twice keeps its stem.
std::vector<std::string> compare_labels(const std::vector<std::string>& inputs) {
  auto unique = [&inputs](const std::vector<std::string>& v) {
    for (size_t i = 0; i < v.size(); ++i)
      for (size_t j = i + 1; j < v.size(); ++j)
        if (v[i] == v[j] && inputs[i] != inputs[j]) return false;
    return true;
  };
  std::vector<std::string> stems, names;
  for (const auto& in : inputs) {
    stems.push_back(std::filesystem::path(in).stem().string());
    names.push_back(std::filesystem::path(in).filename().string());
  }
  if (unique(stems)) return stems;
  if (unique(names)) return names;
  return inputs;
}

report::ReportDocument compare_document(const std::vector<std::string>& labels, const std::vector<StepReport>& reps,
                                        const scenario::Library& lib) {
  using namespace report;
  ReportDocument doc;
  doc.title = "dptwin compare";
  doc.question = fmt::format("How do {} compare?", fmt::join(labels, ", "));
  const auto& a = reps[0];
  const auto& b = reps[1];
  // Steps of different global batches compare by throughput, not step time (8x H100 at 64
  // against 4x L40S at 32 had read "-72.3 %" where it trains 7.2x the samples per second).
  if (a.step_time_s && b.step_time_s && a.batch_global != b.batch_global && a.throughput_samples_per_s &&
      b.throughput_samples_per_s)
    doc.answer = fmt::format("{} trains {} samples/s, {:+.1f} % against {} ({} samples/s; their steps take {} and {} "
                             "samples).",
                             labels[1], format_figure(*b.throughput_samples_per_s),
                             100.0 * (*b.throughput_samples_per_s - *a.throughput_samples_per_s) /
                                 *a.throughput_samples_per_s,
                             labels[0], format_figure(*a.throughput_samples_per_s), b.batch_global, a.batch_global);
  else if (a.step_time_s && b.step_time_s)
    doc.answer = fmt::format("{} takes {} per step, {:+.1f} % against {} ({}).", labels[1], format_duration(*b.step_time_s),
                             100.0 * (*b.step_time_s - *a.step_time_s) / *a.step_time_s, labels[0],
                             format_duration(*a.step_time_s));
  else
    doc.answer = "At least one of the inputs did not run (out of memory); the table says which.";
  Chart c{"breakdown", "Where the step time goes", "", "ms per step", ChartKind::stacked_bars, false, labels, {}, ""};
  ChartSeries compute{"compute", {}, {}, false, 0}, comm{"exposed communication", {}, {}, false, 1},
      dispatch{"dispatch", {}, {}, false, 2}, interference{"interference", {}, {}, false, 3},
      optim{"optimizer", {}, {}, false, 4};
  for (const auto& r : reps) {
    compute.values.push_back(r.breakdown_s.compute * 1e3);
    comm.values.push_back(r.breakdown_s.exposed_communication * 1e3);
    dispatch.values.push_back(r.breakdown_s.dispatch * 1e3);
    interference.values.push_back(r.breakdown_s.interference * 1e3);
    optim.values.push_back(r.breakdown_s.optimizer * 1e3);
  }
  c.series = {compute, comm, dispatch, interference, optim};
  c.caption = "Each bar is one input, in the order given.";
  // The terminal table's rows (report_text.cpp), so the report drops none of them.
  auto rows = compare_rows(labels, reps);
  ReportTable t{"Side by side", rows.front(), {rows.begin() + 1, rows.end()}, {}};
  t.right_aligned.assign(t.headers.size(), true);
  t.right_aligned[0] = false;
  doc.sections.push_back({"Step time", {}, {c}, {t}, {}});
  // The Assumptions section, as predict's, sweep's and report's reports have it (compare's
  // had none; an outside-user review): built from what each step report records.
  scenario::SweepResult sr;
  for (const auto& r : reps) {
    scenario::PointResult p;
    p.index = sr.points.size();
    p.hardware = r.hardware;
    p.model = r.model;
    p.strategy = r.strategy;
    p.devices = r.devices;
    p.nodes = r.nodes;
    p.batch_global = r.batch_global;
    p.batch_per_device = r.batch_per_device;
    p.dtype = r.dtype;
    p.precision = r.precision.value_or(r.dtype);
    p.bucket_cap_mb = r.bucket_cap_mb.value_or(0);
    p.optimizer = r.optimizer.value_or("");
    p.status = r.out_of_memory ? scenario::PointStatus::out_of_memory : scenario::PointStatus::ok;
    p.report = r;
    sr.points.push_back(std::move(p));
  }
  // Each input's overrides, by its label (a step report written before they were recorded,
  // or a measured one, says so).
  for (size_t i = 0; i < reps.size(); ++i) {
    if (!reps[i].hardware_overrides) sr.overrides.push_back(fmt::format("{}: not recorded in its step report", labels[i]));
    else
      for (const auto& o : *reps[i].hardware_overrides) sr.overrides.push_back(fmt::format("{}: {}", labels[i], o));
  }
  doc.sections.push_back(assumptions_section(sr, assumptions_input(sr, nullptr, lib)));
  return doc;
}

int run_compare(const CompareArgs& a) {
  if (a.inputs.size() < 2) throw std::invalid_argument("compare: give at least two inputs");
  const auto lib = whatif::library();
  std::vector<std::string> labels;
  std::vector<StepReport> reports;
  for (const auto& in : a.inputs) reports.push_back(load_input(in, lib));
  labels = compare_labels(a.inputs);
  {
    std::vector<limits::FileFlag> inputs;
    for (const auto& in : a.inputs) inputs.push_back({"input", in});
    limits::refuse_in_report_dir(a.report_dir, {}, inputs, false);
  }
  const ReportDirLock lock("--report", a.report_dir);
  if (!a.report_dir.empty()) report::write_report(compare_document(labels, reports, lib), a.report_dir);
  if (a.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < reports.size(); ++i)
      rows.push_back({{"label", labels[i]}, {"report", step_report_to_json(reports[i])}});
    print_json({{"reports", rows}});
  } else {
    std::cout << report::compare_table_text(labels, reports);
  }
  return kExitOk;
}

RunFn setup(CLI::App& parent) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* app = parent.add_subcommand(
      "compare", "Lay step reports side by side: scenarios (predicted now) or step report JSON files (predicted or "
                 "measured), with relative differences against the first.");
  app->add_option("inputs", a->inputs, "scenario YAML files (one configuration each) or step report JSON files")
      ->required()
      ->check(CLI::ExistingFile);
  app->add_option("--report", a->report_dir, "write the HTML and Markdown report into this directory");
  app->add_flag("--json", a->json, "print the reports as JSON: {\"reports\": [{\"label\", \"report\"}, ...], \"dptwin\": {...}}");
  app->footer("Examples:\n"
              "  dptwin compare scenarios/whatif/resnet50-dgx-a100-dp.yaml scenarios/whatif/resnet50-dgx-a100-ddp.yaml\n"
              "  dptwin compare predicted.json measured.json --report cmp/\n\n" +
              exit_codes_help());
  return [a] { return run_compare(*a); };
}

Registration reg{"compare", setup};

}  // namespace
}  // namespace dpt::cli::cmd_compare
