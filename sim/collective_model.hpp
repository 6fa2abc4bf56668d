// The large-N formulation of the collectives: cost computed per distinct phase on
// the routes' links, so one collective costs O(N x C) route look-ups instead of
// 2 N (N-1) C simulated messages.
//
// Ring (all_reduce, reduce_scatter, all_gather): every step moves equal chunks along
// the same N x C hops. When all flows of a phase start together, max-min sharing gives
// every flow at least min over its links of (link bandwidth / flows on it), and the
// most loaded link cannot drain sooner than (its bytes / its bandwidth); so a step
// lasts max over flows of (route latency + max over its links of load / bandwidth).
// Successive steps wait on each other, so every rank is paced by the slowest hop and
// the collective lasts steps x step time. Property test: within 1 % of the
// message-level simulation for N <= 64 on every hardware file.
//
// Tree (all_reduce): the first min(k, 3) pieces of every channel are placed in time
// transfer by transfer (after the transfers they wait for), each transfer's share of
// its busiest link taken as the average number of transfers on that link during it
// (iterated from unshared durations); each further piece adds one steady-state period
// (every edge of every channel busy at once). This is cruder than the ring's: the
// property test holds it within 20 % of the exact simulation on the cluster files
// (N = 9..64); measured errors were up to about 16 %, largest with partially filled
// nodes and pipelines of a few pieces.
//
// Ring broadcast and reduce (a pipelined chain per channel, from or to the root).
// Chains of at most kLargeNReplayMaxTransfers transfers (hops x pieces, all channels) are
// replayed transfer by transfer: each transfer starts when the ones it waits for ended
// (collective_exact.cpp's chain actors), pays its route latency without using bandwidth,
// then shares its links under SimGrid CM02's weighted max-min (penalty = route latency,
// so a saturated link is split in proportion to 1 / latency among the flows it
// bottlenecks), the shares recomputed whenever a flow starts or stops transferring. This
// is the rule SimGrid 3.32 applies (src/surf/network_cm02.cpp, src/kernel/lmm/maxmin.cpp;
// TCP-gamma 0 leaves flows unbounded). Against the message-level simulation run with
// SimGrid's full solver (network/optim:Full) it agrees within 0.04 % (measured over ~400
// random cases, N <= 64, every hardware file); against dptwin's exact formulation, which
// runs SimGrid's default lazy solver, within 0.03 % but for rare cases where the lazy
// solver lets flows exceed a link's bandwidth (seen: +0.96 %; the property holds 2 %).
// The replay costs about 1 us per transfer at these sizes (under 1 ms per call) but grows
// with the transfers and the flows overlapping each, so larger chains use the estimate
// below: each chain is a flow shop; with a constant duration t_j per piece, piece i
// leaves hop j at S_j + i M_j (S_j the sum, M_j the maximum of t_0..t_j). A hop's
// duration is its latency plus its busiest link's drain under the pieces of every hop
// whose busy interval overlaps its own (weighted by the overlap), iterated from unshared
// durations as the tree's head is. It is not within 1 % of the exact simulation: it
// overestimates, by up to +19 % measured within a node of 4-8 GPUs and +35 % across nodes
// (N <= 64), because it drains each link at its full load where max-min sharing gives
// the share of flows bottlenecked elsewhere to the others; the property test holds 45 %.
// DDP uses it for its construction-time parameter broadcast, not inside the predicted
// step. nvls has no large-N formulation (it runs within one node only).
//
// NVLS timing here serves only the algorithm selection (plan_collective).
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

// Ring broadcast/reduce chains of at most this many transfers (hops x pieces, all
// channels) are replayed transfer by transfer under SimGrid's sharing rule (see above);
// the bound keeps the replay under about a millisecond per call.
constexpr Elements kLargeNReplayMaxTransfers = 768;

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

// The bytes the collective moves on each link (as the exact formulation would put every
// message on every link of its route).
LinkBytes large_n_traffic(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                          const CollectivePlan& plan, const CollectiveSettings& settings);
// Records large_n_traffic on the platform's link counters.
void account_large_n(Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                     const CollectivePlan& plan, const CollectiveSettings& settings);

}  // namespace dpt::sim
