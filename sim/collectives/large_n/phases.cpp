// Phases, ring steps and chains of the large-N formulation (see phases.hpp).
#include "sim/collectives/large_n/phases.hpp"

#include <algorithm>

namespace dpt::sim {

LinkLoad phase_load(const Platform& p, const std::vector<PhaseFlow>& flows) {
  (void)p;  // the flows' routes are the platform's
  LinkLoad load;
  for (const auto& f : flows)
    for (const int id : f.route->link_ids) load[id] += static_cast<double>(f.bytes);
  return load;
}

namespace {
// One flow's duration in a phase with link loads `load`: its latency plus the slowest
// drain among its links (every link drains its whole load at its bandwidth).
Seconds flow_time(const Platform& p, const PhaseFlow& f, const LinkLoad& load) {
  const RouteInfo& r = *f.route;
  Seconds drain = 0;
  for (const int id : r.link_ids) drain = std::max(drain, load.at(id) / p.link_bandwidth(id));
  if (f.cap_bytes_per_s > 0) drain = std::max(drain, static_cast<double>(f.bytes) / f.cap_bytes_per_s);
  return r.latency_s + drain;
}
}  // namespace

Seconds phase_time_with(const Platform& p, const std::vector<PhaseFlow>& flows, const LinkLoad& load) {
  Seconds t = 0;
  for (const auto& f : flows) t = std::max(t, flow_time(p, f, load));
  return t;
}

Seconds phase_time(const Platform& p, const std::vector<PhaseFlow>& flows) {
  return phase_time_with(p, flows, phase_load(p, flows));
}

std::vector<PhaseFlow> ring_step_flows(const Platform& p, const std::vector<int>& rank_gpus,
                                       const std::vector<std::vector<int>>& orders, Bytes chunk_bytes,
                                       BytesPerSecond cap_bytes_per_s) {
  std::vector<PhaseFlow> flows;
  for (const auto& o : orders)
    for (size_t i = 0; i < o.size(); ++i)
      flows.push_back({&rank_route(p, rank_gpus, o[i], o[(i + 1) % o.size()]), chunk_bytes, cap_bytes_per_s});
  return flows;
}

Seconds pipeline_total(Elements k, std::pair<Seconds, Seconds> full, std::pair<Seconds, Seconds> last) {
  if (k <= 1) return last.first;
  return full.first + static_cast<double>(k - 2) * full.second + last.second;
}

std::vector<std::vector<int>> chain_orders(const std::vector<std::vector<int>>& orders, const CollectiveCall& call) {
  std::vector<std::vector<int>> chains;
  chains.reserve(orders.size());
  for (const auto& o : orders) {
    const int n = static_cast<int>(o.size());
    const int root_pos = static_cast<int>(std::find(o.begin(), o.end(), call.root) - o.begin());
    const int first = call.op == CollectiveOp::reduce ? (root_pos + 1) % n : root_pos;
    std::vector<int> chain(n);
    for (int j = 0; j < n; ++j) chain[j] = o[(first + j) % n];
    chains.push_back(std::move(chain));
  }
  return chains;
}

}  // namespace dpt::sim
