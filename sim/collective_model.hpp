// The large-N formulation of the collectives: cost computed per distinct phase on
// the route's bottleneck, so one collective costs O(N x C) route look-ups instead
// of 2 N (N-1) C simulated messages.
//
// Why it is exact enough: in a ring every step moves equal chunks along the same
// N x C hops. When all flows of a phase start together, max-min sharing gives every
// flow at least min over its links of (link bandwidth / flows on it), and the most
// loaded link cannot finish sooner than (its bytes / its bandwidth); so the phase
// lasts max over flows of (route latency + max over its links of load / bandwidth).
// Successive ring steps wait on each other, so after the first step every rank is
// paced by the slowest hop and the collective lasts steps x phase time. The property
// test (verify/sim_collectives_test.cpp) holds this within 1 % of the message-level
// simulation for N <= 64 on every hardware file.
//
// What it does not model: contention with traffic outside the collective during it
// (the exact formulation does). DDP issues its collectives one at a time on one
// stream, so the collective has the links to itself.
#pragma once
#include <vector>

#include "engine/units.hpp"
#include "sim/collectives.hpp"
#include "sim/platform.hpp"

namespace dpt::sim {

// One transfer of a phase.
struct PhaseFlow {
  const simgrid::s4u::Host* from = nullptr;
  const simgrid::s4u::Host* to = nullptr;
  Bytes bytes = 0;
};

// Duration of one phase whose flows all start together on idle links (see above).
Seconds phase_time(const Platform& p, const std::vector<PhaseFlow>& flows);

// The flows of one step of ring `orders` (from ring_orders) when each channel's chunk
// is `chunk_bytes`: rank order[i] sends to order[i+1] on every channel.
std::vector<PhaseFlow> ring_step_flows(const Platform& p, const std::vector<int>& rank_gpus,
                                       const std::vector<std::vector<int>>& orders, Bytes chunk_bytes);

// Duration of `call` under `plan` (plan.formulation is ignored) in the large-N
// formulation, counted from the moment the last rank arrived.
Seconds collective_time_large_n(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                                const CollectivePlan& plan, const CollectiveSettings& settings);

// Records on the platform's link counters the bytes the collective moves (as the exact
// formulation would: every message on every link of its route).
void account_large_n(Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                     const CollectivePlan& plan, const CollectiveSettings& settings);

}  // namespace dpt::sim
