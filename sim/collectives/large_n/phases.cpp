// Phases, ring steps and chains of the large-N formulation (see phases.hpp).
#include "sim/collectives/large_n/phases.hpp"

#include <algorithm>
#include <deque>
#include <limits>

#include "engine/core/fault_injection.hpp"

namespace dpt::sim {

LinkLoad phase_load(const Platform& p, const std::vector<PhaseFlow>& flows) {
  (void)p;  // the flows' routes are the platform's
  LinkLoad load;
  for (const auto& f : flows)
    for (const int id : f.route->link_ids) load[id] += static_cast<double>(f.bytes);
  return load;
}

Seconds flow_drain_with(const Platform& p, const PhaseFlow& f, const LinkLoad& load) {
  Seconds drain = 0;
  for (const int id : f.route->link_ids) drain = std::max(drain, load.at(id) / p.link_bandwidth(id));
  if (f.cap_bytes_per_s > 0) drain = std::max(drain, static_cast<double>(f.bytes) / f.cap_bytes_per_s);
  return drain;
}

namespace {
// One flow's duration in a phase with link loads `load`: its latency plus its drain.
Seconds flow_time(const Platform& p, const PhaseFlow& f, const LinkLoad& load) {
  return f.route->latency_s + flow_drain_with(p, f, load);
}
}  // namespace

Seconds ring_channel_path(const std::vector<Seconds>& lat, const std::vector<Seconds>& drain, Elements steps) {
  const size_t n = lat.size();
  if (n == 0 || steps <= 0) return 0;
  const Seconds slowest = *std::max_element(drain.begin(), drain.end());
  if (fault_active(Fault::ring_lock_step_latency)) {  // planted: every step waits for the slowest hop
    Seconds hop = 0;
    for (size_t i = 0; i < n; ++i) hop = std::max(hop, lat[i] + drain[i]);
    return static_cast<double>(steps) * hop;
  }
  // Every step a move: the heaviest `steps` consecutive hops of latency + drain (whole
  // turns of the ring, then the heaviest window of the rest).
  std::vector<double> hop(n);
  double turn = 0;
  for (size_t i = 0; i < n; ++i) turn += hop[i] = lat[i] + drain[i];
  const Elements turns = steps / static_cast<Elements>(n);
  const size_t rest = static_cast<size_t>(steps % static_cast<Elements>(n));
  double window = 0;
  for (size_t i = 0; i < rest; ++i) window += hop[i];
  double widest = window;
  for (size_t i = 1; i < n && rest > 0; ++i) {
    window += hop[(i + rest - 1) % n] - hop[i - 1];
    widest = std::max(widest, window);
  }
  const Seconds moves = static_cast<double>(turns) * turn + widest;
  // Windows [a, b) of at most `steps` hops through a slowest hop: steps x the slowest drain
  // plus the window's sum of (latency + drain - slowest drain). Prefix sums over the hops
  // laid out n + steps long (a window may go round more than once); for each start a, the
  // best end b in (first slowest hop at or after a, a + steps] by a sliding maximum.
  const size_t len = n + static_cast<size_t>(steps);
  std::vector<double> prefix(len + 1, 0.0);
  for (size_t k = 0; k < len; ++k) prefix[k + 1] = prefix[k] + hop[k % n] - slowest;
  std::vector<size_t> next_slowest(n);
  size_t seen = 2 * n;  // the first slowest hop at or after k, looking up to 2n - 1
  for (size_t k = 2 * n; k-- > 0;) {
    if (drain[k % n] >= slowest) seen = k;
    if (k < n) next_slowest[k] = seen;
  }
  std::deque<size_t> best;  // candidate ends b, prefix decreasing
  size_t offered = 0;       // ends 1..offered were offered to the deque
  double through = -std::numeric_limits<double>::infinity();
  for (size_t a = 0; a < n; ++a) {
    const size_t lo = next_slowest[a] + 1, hi = std::min(len, a + static_cast<size_t>(steps));
    if (lo > hi) continue;
    for (; offered < hi; ++offered) {
      const size_t b = offered + 1;
      while (!best.empty() && prefix[best.back()] <= prefix[b]) best.pop_back();
      best.push_back(b);
    }
    while (!best.empty() && best.front() < lo) best.pop_front();
    if (!best.empty()) through = std::max(through, prefix[best.front()] - prefix[a]);
  }
  const Seconds stays = static_cast<double>(steps) * slowest + through;
  return std::max(moves, stays);
}

Seconds ring_time_by_phases(const Platform& p, const std::vector<int>& rank_gpus,
                            const std::vector<std::vector<int>>& orders, Bytes chunk_bytes,
                            BytesPerSecond cap_bytes_per_s, Elements steps) {
  const auto flows = ring_step_flows(p, rank_gpus, orders, chunk_bytes, cap_bytes_per_s);
  const LinkLoad load = phase_load(p, flows);
  const size_t n = rank_gpus.size();
  Seconds t = 0;
  std::vector<Seconds> lat(n), drain(n);
  for (size_t c = 0; c < orders.size(); ++c) {
    for (size_t i = 0; i < n; ++i) {
      const PhaseFlow& f = flows[c * n + i];
      lat[i] = f.route->latency_s;
      drain[i] = flow_drain_with(p, f, load);
    }
    t = std::max(t, ring_channel_path(lat, drain, steps));
  }
  return t;
}

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
