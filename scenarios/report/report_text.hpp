// Plain-text summaries the commands print on a terminal: one prediction, a
// table of sweep points, a comparison side by side. Figures use the same
// formatting as the HTML and Markdown reports.
#pragma once
#include <string>
#include <vector>

#include "sim/twin/step_report.hpp"
#include "scenarios/scenario/sweep.hpp"

namespace dpt::report {

// The summary of one step report (what `dptwin predict` prints).
std::string step_summary_text(const StepReport& r, const std::string& gpu_name);
// One line per point: hardware, strategy, GPUs, batch, step time, samples/s, efficiency, status.
std::string sweep_table_text(const scenario::SweepResult& r);
// Reports side by side, each column labelled; relative differences against the first.
std::string compare_table_text(const std::vector<std::string>& labels, const std::vector<StepReport>& reports);
// Its rows (the first the header: "" then the labels), which compare's report lays out too.
std::vector<std::vector<std::string>> compare_rows(const std::vector<std::string>& labels,
                                                  const std::vector<StepReport>& reports);

// Fixed-width text table: the first row is the header; columns of numbers (after the first) are
// right-aligned, the others left-aligned.
std::string text_table(const std::vector<std::vector<std::string>>& rows);

}  // namespace dpt::report
