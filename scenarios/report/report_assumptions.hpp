// The "Assumptions" section of a report: what a reader forwarding it must know
// to trust the figures. Whether they are simulated or measured, the precision, the
// optimizer, the batch, DDP's bucket size, hardware overrides, each hardware
// file's description, the dptwin version, its git revision and the date.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "scenarios/report/report_document.hpp"
#include "scenarios/scenario/scenario.hpp"
#include "scenarios/scenario/sweep.hpp"

namespace dpt::report {

// The version of dptwin (CMake's project version) and the git revision it was
// configured from ("unknown" outside a checkout).
std::string dptwin_version();
std::string dptwin_git_revision();
// Now in UTC, ISO 8601 to the second: "2026-12-03T13:05:00Z".
std::string utc_now_iso8601();

struct AssumptionsInput {
  std::vector<std::string> overrides;                  // "gpu.memory = 40 GiB", from the scenario and flags
  std::map<std::string, std::string> hardware;         // hardware name -> its file's description and path
  std::string date;                                    // when the figures were produced (utc_now_iso8601())
  // Per hardware name: its GPU model (gpu.name), where the file loads.
  std::map<std::string, std::string> gpu_of;
  // Per GPU model: the fidelity table's entries on it (scenarios/measured/public), in any
  // hardware file, so the accuracy row names `dptwin fidelity --gpu NAME` only where it has
  // something to run (an outside-user review: a plan on dgx-h100-cluster pointed at that
  // file's 4 collective entries, where the same GPUs' 28 training entries are on dgx-h100).
  struct FidelityCount {
    int entries = 0;
    int training = 0;
    std::set<std::string> hardware;  // the files they ran on (stems)
  };
  std::map<std::string, FidelityCount> fidelity_by_gpu;
};

// The overrides and hardware descriptions of a scenario (hardware files that cannot
// be loaded are described by name only).
AssumptionsInput assumptions_input(const scenario::SweepResult& r, const scenario::Scenario* s,
                                   const scenario::Library& lib);

ReportSection assumptions_section(const scenario::SweepResult& r, const AssumptionsInput& in);

}  // namespace dpt::report
