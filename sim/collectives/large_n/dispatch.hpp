// The large-N formulation of the collectives: a call's duration computed from its
// phases, replays and estimates on the routes' links, without a SimGrid message per
// transfer, so one collective costs O(N x C) route look-ups instead of 2 N (N-1) C
// simulated messages. collectives.cpp uses it above exact_max_ranks ranks and for the
// algorithm selection.
//
//   ring all_reduce, reduce_scatter, all_gather: steps x the duration of one step's
//     phase (phases.hpp);
//   ring broadcast and reduce (chains), tree and nvls_tree all_reduce: replayed in the
//     fluid simulation, whole or as a head and extrapolated (replay.hpp), else estimated
//     (estimate.hpp);
//   nvls: a pipeline of pieces up to the switch and down; its timing serves only the
//     algorithm selection (nvls runs exact, within one node).
//
// What it does not model: contention with traffic outside the collective during it (the
// exact formulation does). DDP issues its collectives one at a time on one stream, so
// the collective has the links to itself. How close each path is to the exact
// formulation is stated, and checked, by the property tests in sim_collectives_test.
#pragma once
#include <vector>

#include "engine/core/units.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/collectives/large_n/replay.hpp"
#include "sim/net/platform.hpp"

namespace dpt::sim {

// Duration of `call` under `plan` (plan.formulation is ignored) in the large-N
// formulation, counted from the moment the last rank arrived; `timed_by`, when given,
// says how it was timed.
Seconds collective_time_large_n(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                                const CollectivePlan& plan, const CollectiveSettings& settings,
                                LargeNMethod method = LargeNMethod::automatic, LargeNTimedBy* timed_by = nullptr);

// The bytes the collective moves on each link (as the exact formulation would put every
// message on every link of its route).
LinkBytes large_n_traffic(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                          const CollectivePlan& plan, const CollectiveSettings& settings);
// Records large_n_traffic on the platform's link counters.
void account_large_n(Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                     const CollectivePlan& plan, const CollectiveSettings& settings);

}  // namespace dpt::sim
