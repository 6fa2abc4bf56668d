// The exit code of a command that ran a sweep (sweep, report): 3 when a point's
// prediction itself failed; for a whole sweep, 1 when no point could be
// predicted (every point out of memory or skipped: the README's "out of memory
// exits 1") or no point meets the scenario's target; else 0. A shard judges
// nothing: the answer needs every point.
#pragma once
#include <algorithm>

#include "scenarios/cli/command.hpp"
#include "scenarios/report/report_sweep.hpp"
#include "scenarios/scenario/sweep.hpp"

namespace dpt::cli {

inline int sweep_exit_code(const scenario::SweepResult& r) {
  const auto has = [&](scenario::PointStatus s) {
    return std::any_of(r.points.begin(), r.points.end(), [&](const auto& p) { return p.status == s; });
  };
  if (has(scenario::PointStatus::failed)) return kExitRuntimeError;
  if (r.shard_count != 1) return kExitOk;
  if (!has(scenario::PointStatus::ok) || !report::sweep_meets_target(r)) return kExitFailure;
  return kExitOk;
}

}  // namespace dpt::cli
