// The large-N formulation's building blocks: a phase (flows that start together on idle
// links) and its duration, a ring step's flows, and the chains of a ring broadcast or
// reduce.
//
// A phase's flows share links under max-min: every flow gets at least min over its links
// of (bandwidth / flows on it), and the most loaded link cannot drain sooner than its
// bytes over its bandwidth; so the phase lasts max over flows of (route latency + max over
// its links of load / bandwidth, or bytes / its rate bound when slower). A ring step is such a phase, and every rank waits for
// the step before it, so a ring collective lasts steps x step time.
#pragma once
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/core/units.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/net/platform.hpp"

namespace dpt::sim {

// One transfer of a phase, over a route of the platform's (Platform::route or gpu_route:
// its link ids are set, and it outlives the flow).
struct PhaseFlow {
  const RouteInfo* route = nullptr;
  Bytes bytes = 0;
  BytesPerSecond cap_bytes_per_s = 0;  // bound on its rate (NCCL's per-channel bandwidth); 0 = none
};

using LinkLoad = std::unordered_map<int, double>;  // bytes per link (by Platform::link_id) in a phase

// Bytes every link carries when all `flows` cross their routes.
LinkLoad phase_load(const Platform& p, const std::vector<PhaseFlow>& flows);
// Duration of `flows` when the links carry `load` (see above).
Seconds phase_time_with(const Platform& p, const std::vector<PhaseFlow>& flows, const LinkLoad& load);
// Duration of one phase whose flows all start together on idle links.
Seconds phase_time(const Platform& p, const std::vector<PhaseFlow>& flows);

// The flows of one step of ring `orders` (from ring_orders) when each channel's chunk
// is `chunk_bytes`: rank order[i] sends to order[i+1] on every channel.
std::vector<PhaseFlow> ring_step_flows(const Platform& p, const std::vector<int>& rank_gpus,
                                       const std::vector<std::vector<int>>& orders, Bytes chunk_bytes,
                                       BytesPerSecond cap_bytes_per_s = 0);

// A pipeline of k pieces given (first-piece path time, period) for a full piece and for
// the last one: the first piece fills the pipeline, the middle ones leave one period
// apart, the last one leaves the bottleneck one (shorter) period later.
Seconds pipeline_total(Elements k, std::pair<Seconds, Seconds> full, std::pair<Seconds, Seconds> last);

// The chain of a ring broadcast (from the root) or reduce (to the root) on every channel:
// chains[c][j] sends to chains[c][j + 1] (n ranks, n - 1 hops). The root's position in
// each ring order is found here, once per call.
std::vector<std::vector<int>> chain_orders(const std::vector<std::vector<int>>& orders, const CollectiveCall& call);

inline Elements ceil_div(Elements a, Elements b) { return (a + b - 1) / b; }

inline simgrid::s4u::Host* host_of(const Platform& p, const std::vector<int>& gpus, int rank) {
  return p.gpu_host(gpus[rank]);
}
// The route between two ranks' GPUs (by index: a mirrored node's GPU has no host).
inline const RouteInfo& rank_route(const Platform& p, const std::vector<int>& gpus, int from, int to) {
  return p.gpu_route(gpus[static_cast<size_t>(from)], gpus[static_cast<size_t>(to)]);
}

}  // namespace dpt::sim
