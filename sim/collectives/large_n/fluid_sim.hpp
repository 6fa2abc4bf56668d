// A fluid simulation of a DAG of transfers under SimGrid's CM02 sharing rule, on plain
// arrays: the replay of chains and trees runs it instead of SimGrid, so the large-N
// formulation matches the exact one without creating a SimGrid comm per transfer.
//
// The rule (SimGrid 3.32, network/model:CM02 with crosstraffic 0 and TCP-gamma 0, as
// make_engine sets it): a transfer first pays its route's latency without using
// bandwidth, then shares every link of its route under weighted max-min fairness with
// weight 1 / route latency (1 for a route of zero latency), so a saturated link is split
// in proportion to 1 / latency among the flows it bottlenecks; with TCP-gamma 0 a flow
// has no bound of its own. It ends when its bytes are through. Rates are recomputed
// whenever a flow starts or stops transferring; events closer than 1e-9 relative are
// taken together.
#pragma once
#include <vector>

#include "engine/core/units.hpp"
#include "sim/net/platform.hpp"

namespace dpt::sim {

struct FluidTransfer {
  const RouteInfo* route = nullptr;  // links and latency; must outlive the simulation
  double bytes = 0;
  int waits = 0;          // number of transfers it waits for
  std::vector<int> then;  // transfers waiting for its end (indices into the same vector)
  // The transfer ahead of it in its edge's FIFO (-1: none): its bytes start flowing only
  // once that one's ended, while its latency runs meanwhile (NCCL keeps several pieces in
  // flight per hop: the wire's latency overlaps the previous piece's bytes). At most one
  // transfer names a given one as its gate.
  int gate = -1;
};

// End time of every transfer; those that wait for nothing start at 0, the others when
// the last transfer they wait for ended (a gated transfer's bytes flow from the later of
// its latency paid and its gate's end). With the platform given, links are told apart by
// their Platform::link_id (the routes' link_ids), as a mirrored node's link has no object.
std::vector<Seconds> fluid_sim_end_times(const std::vector<FluidTransfer>& transfers, const Platform* p = nullptr);

}  // namespace dpt::sim
