// Estimates for chains and trees too large to replay: closed forms iterated over link
// sharing, far cheaper than the fluid simulation and less exact (their property tests
// state how far they may be from the exact formulation).
//
// Tree: the first min(k, 3) pieces of every channel are placed in time transfer by
// transfer (after the transfers they wait for), each taking its latency plus its bytes
// times its share of its busiest link; the share is the average number of transfers on
// that link during it, iterated from unshared durations. Each further piece adds one
// steady-state period, in which every edge of every channel is busy at once.
//
// Chain: each channel is a flow shop; with a constant duration t_j per piece, piece i
// leaves hop j at S_j + i M_j (S_j the sum, M_j the maximum of t_0..t_j). A hop's
// duration is its latency plus its busiest link's drain under the pieces of every hop
// whose busy interval overlaps its own, iterated as the tree's head is. It drains each
// link at its full load where max-min sharing would give flows bottlenecked elsewhere
// less, so it overestimates.
#pragma once
#include <vector>

#include "engine/core/units.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/net/platform.hpp"

namespace dpt::sim {

// A tree all-reduce over channels `tcs` in pieces of `piece` elements.
Seconds tree_estimate(const Platform& p, const std::vector<int>& gpus, const std::vector<TreeChannel>& tcs,
                      const CollectiveCall& call, Elements piece);

// A ring broadcast or reduce along `chains` (from chain_orders) in pieces of `piece`
// elements. Cost: O(iterations x C (n + k) x hops sharing a link).
Seconds chain_time(const Platform& p, const std::vector<int>& gpus, const std::vector<std::vector<int>>& chains,
                   const CollectiveCall& call, Elements piece);

}  // namespace dpt::sim
