// The large-N formulation's building blocks: a phase (flows that start together on idle
// links) and its duration, a ring step's flows, and the chains of a ring broadcast or
// reduce.
//
// A phase's flows share links under max-min: every flow gets at least min over its links
// of (bandwidth / flows on it), and the most loaded link cannot drain sooner than its
// bytes over its bandwidth; so the phase lasts max over flows of (route latency + max over
// its links of load / bandwidth, or bytes / its rate bound when slower). A ring step's
// flows load the links as such a phase, but a rank forwards each chunk once it arrived
// (not once the whole step ended), so a ring collective lasts its critical path
// (ring_channel_path), not steps x the phase.
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
// One flow's drain: its busiest link's load at that link's bandwidth, or its bytes at its
// rate bound when slower (no route latency).
Seconds flow_drain_with(const Platform& p, const PhaseFlow& f, const LinkLoad& load);
// Duration of one phase whose flows all start together on idle links.
Seconds phase_time(const Platform& p, const std::vector<PhaseFlow>& flows);

// The flows of one step of ring `orders` (from ring_orders) when each channel's chunk
// is `chunk_bytes`: rank order[i] sends to order[i+1] on every channel.
std::vector<PhaseFlow> ring_step_flows(const Platform& p, const std::vector<int>& rank_gpus,
                                       const std::vector<std::vector<int>>& orders, Bytes chunk_bytes,
                                       BytesPerSecond cap_bytes_per_s = 0);

// The critical path of a ring collective of `steps` steps on one channel whose hop i (ring
// position i to i + 1) has route latency lat[i] and drain drain[i]: rank i starts step s
// once it has sent step s - 1 (its drain) and received the chunk of step s - 1 from rank
// i - 1 (that hop's latency and drain), and the call ends when the last step's chunks
// arrive. The longest path through these waits runs along a window of consecutive hops
// (each hop's latency and drain once) and spends the other steps at the window's slowest
// sender; taken over every window of `steps` hops and every shorter window through a
// slowest hop of the ring. Shorter windows without a slowest hop are not searched (their
// stays are at faster senders; an approximation the property tests against the exact
// formulation bound). O(n + steps). With every hop alike it is steps x drain + the
// latencies of `steps` hops.
Seconds ring_channel_path(const std::vector<Seconds>& lat, const std::vector<Seconds>& drain, Elements steps);
// The large-N ring collective by its definition: the phase load of one step of every
// channel (ring_step_flows with `chunk_bytes` and the rate bound), each hop's drain under
// it, and the slowest channel's ring_channel_path.
Seconds ring_time_by_phases(const Platform& p, const std::vector<int>& rank_gpus,
                            const std::vector<std::vector<int>>& orders, Bytes chunk_bytes,
                            BytesPerSecond cap_bytes_per_s, Elements steps);

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
