// The report of a sweep (`dptwin report`, `dptwin sweep --report DIR`): the
// question, a one-sentence answer, throughput against GPU count beside the ideal
// line, scaling efficiency, the step-time breakdown, per-GPU memory (GPU 0's
// extra under DataParallel), a table and a CSV of every point, trace links.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "scenarios/report/report_answer.hpp"
#include "scenarios/report/report_assumptions.hpp"
#include "scenarios/report/report_document.hpp"
#include "scenarios/scenario/sweep.hpp"

namespace dpt::report {

// "DataParallel", "DDP", "single".
std::string strategy_display_name(const std::string& strategy);

// Whether the target (if any) is met by some point; true when there is no target.
bool sweep_meets_target(const scenario::SweepResult& r);

// Every point as CSV (one header row, one row per point, RFC 4180 quoting).
std::string sweep_csv(const scenario::SweepResult& r);

struct SweepReportOptions {
  std::string report_dir;     // trace links are made relative to it
  std::string generated_by;   // the command line
  std::string scenario_text;  // copied beside the report as scenario.yaml when not empty
  std::optional<AssumptionsInput> assumptions;  // the Assumptions section, when given
};
// Trace paths under from_dir made to point under to_dir (a report staged in one
// directory and committed into another).
void move_trace_paths(scenario::SweepResult& r, const std::string& from_dir, const std::string& to_dir);

ReportDocument build_sweep_report(const scenario::SweepResult& r, const SweepReportOptions& options);

}  // namespace dpt::report
