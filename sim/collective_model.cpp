// The large-N formulation of the collectives: see collective_model.hpp.
#include "sim/collective_model.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/collective_exact.hpp"

namespace sg4 = simgrid::s4u;

namespace dpt::sim {

namespace {

using Load = std::unordered_map<const sg4::Link*, double>;  // bytes per link in a phase

Load phase_load(const Platform& p, const std::vector<PhaseFlow>& flows) {
  Load load;
  for (const auto& f : flows)
    for (const auto* l : p.route(f.from, f.to).links) load[l] += static_cast<double>(f.bytes);
  return load;
}

// One flow's duration in a phase with link loads `load`: its latency plus the slowest
// drain among its links (every link drains its whole load at its bandwidth).
Seconds flow_time(const Platform& p, const PhaseFlow& f, const Load& load) {
  const RouteInfo& r = p.route(f.from, f.to);
  Seconds drain = 0;
  for (const auto* l : r.links) drain = std::max(drain, load.at(l) / l->get_bandwidth());
  return r.latency_s + drain;
}

Seconds phase_time_with(const Platform& p, const std::vector<PhaseFlow>& flows, const Load& load) {
  Seconds t = 0;
  for (const auto& f : flows) t = std::max(t, flow_time(p, f, load));
  return t;
}

Elements ceil_div(Elements a, Elements b) { return (a + b - 1) / b; }

// A pipeline of k pieces given (first-piece path time, period) for a full piece and for
// the last one: the first piece fills the pipeline, the middle ones leave one period
// apart, the last one leaves the bottleneck one (shorter) period later.
Seconds pipeline_total(Elements k, std::pair<Seconds, Seconds> full, std::pair<Seconds, Seconds> last) {
  if (k <= 1) return last.first;
  return full.first + static_cast<double>(k - 2) * full.second + last.second;
}

sg4::Host* host_of(const Platform& p, const std::vector<int>& gpus, int rank) { return p.gpu_host(gpus[rank]); }

// The edges of the two trees of a tree all-reduce (child -> parent), as rank pairs.
struct TreeEdges {
  std::vector<std::pair<int, int>> up[2];  // (child, parent)
  int root[2] = {0, 0};
};

TreeEdges tree_edges(const Platform& p, const std::vector<int>& gpus) {
  const auto chains = node_chains(p, gpus);
  const int nodes = static_cast<int>(chains.size());
  const auto trees = double_binary_tree(nodes);
  TreeEdges e;
  for (int t = 0; t < 2; ++t) {
    auto chain_of = [&](int v) {
      auto ch = chains[v];
      if (t == 1) std::reverse(ch.begin(), ch.end());
      return ch;
    };
    for (int v = 0; v < nodes; ++v) {
      const auto ch = chain_of(v);
      for (size_t q = 1; q < ch.size(); ++q) e.up[t].push_back({ch[q], ch[q - 1]});
      if (trees[t].parent[v] >= 0) e.up[t].push_back({ch[0], chain_of(trees[t].parent[v])[0]});
    }
    e.root[t] = chain_of(trees[t].root)[0];
  }
  return e;
}

// Longest sum of flow times along parent links from any rank up to the root (dist_up) or
// down from the root (dist_down), given per-edge times.
Seconds longest_path(const std::vector<std::pair<int, int>>& edges, const std::map<std::pair<int, int>, Seconds>& time,
                     int n) {
  std::vector<int> parent(n, -1);
  for (auto& [c, par] : edges) parent[c] = par;
  Seconds best = 0;
  for (int r = 0; r < n; ++r) {
    Seconds s = 0;
    for (int x = r; parent[x] >= 0; x = parent[x]) s += time.at({x, parent[x]});
    best = std::max(best, s);
  }
  return best;
}

}  // namespace

Seconds phase_time(const Platform& p, const std::vector<PhaseFlow>& flows) {
  return phase_time_with(p, flows, phase_load(p, flows));
}

std::vector<PhaseFlow> ring_step_flows(const Platform& p, const std::vector<int>& rank_gpus,
                                       const std::vector<std::vector<int>>& orders, Bytes chunk_bytes) {
  std::vector<PhaseFlow> flows;
  for (const auto& o : orders)
    for (size_t i = 0; i < o.size(); ++i)
      flows.push_back({host_of(p, rank_gpus, o[i]), host_of(p, rank_gpus, o[(i + 1) % o.size()]), chunk_bytes});
  return flows;
}

Seconds collective_time_large_n(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                                const CollectivePlan& plan, const CollectiveSettings& settings) {
  const int n = static_cast<int>(rank_gpus.size());
  if (n == 1 || call.count == 0) return 0;
  const Elements piece = pipeline_piece_elements(settings, call.element_bytes);
  const int channels = plan.channels;
  switch (plan.algorithm) {
    case CollectiveAlgorithm::ring: {
      const auto orders = ring_orders(p, rank_gpus, channels);
      if (call.op == CollectiveOp::broadcast || call.op == CollectiveOp::reduce)
        throw std::invalid_argument(fmt::format("{} has no large-N formulation: it runs exact (its message count "
                                                "grows as N x pieces, not N^2)",
                                                collective_op_name(call.op)));
      const int steps = call.op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1;
      const Bytes chunk = ceil_div(call.count, static_cast<Elements>(n) * channels) * call.element_bytes;
      return steps * phase_time(p, ring_step_flows(p, rank_gpus, orders, chunk));
    }
    case CollectiveAlgorithm::tree: {
      // Both trees' edges, up and down, busy with one piece each per period; the first
      // piece climbs the deepest branch and comes down the deepest branch.
      const TreeEdges e = tree_edges(p, rank_gpus);
      const Elements half = ceil_div(call.count, 2);
      const Elements k = ceil_div(half, piece);
      auto timing = [&](Bytes piece_bytes) {
        std::vector<PhaseFlow> flows;
        for (int t = 0; t < 2; ++t)
          for (auto& [c, par] : e.up[t]) {
            flows.push_back({host_of(p, rank_gpus, c), host_of(p, rank_gpus, par), piece_bytes});
            flows.push_back({host_of(p, rank_gpus, par), host_of(p, rank_gpus, c), piece_bytes});
          }
        const Load load = phase_load(p, flows);
        Seconds path = 0;
        for (int t = 0; t < 2; ++t) {
          std::map<std::pair<int, int>, Seconds> up, down;
          for (auto& [c, par] : e.up[t]) {
            up[{c, par}] = flow_time(p, {host_of(p, rank_gpus, c), host_of(p, rank_gpus, par), piece_bytes}, load);
            down[{c, par}] = flow_time(p, {host_of(p, rank_gpus, par), host_of(p, rank_gpus, c), piece_bytes}, load);
          }
          path = std::max(path, longest_path(e.up[t], up, n) + longest_path(e.up[t], down, n));
        }
        return std::make_pair(path, phase_time_with(p, flows, load));
      };
      const Bytes full = std::min(piece, half) * call.element_bytes;
      const Bytes last = (half - (k - 1) * piece) * call.element_bytes;
      return pipeline_total(k, timing(full), timing(last));
    }
    case CollectiveAlgorithm::nvls: {
      // Every GPU's piece up to the switch, then the reduced piece down to every GPU.
      sg4::Host* sw = p.nvswitch_host(p.node_of_gpu(rank_gpus[0]));
      const Elements k = ceil_div(call.count, piece);
      auto timing = [&](Bytes piece_bytes) {
        std::vector<PhaseFlow> ups, downs;
        for (int r = 0; r < n; ++r) {
          ups.push_back({host_of(p, rank_gpus, r), sw, piece_bytes});
          downs.push_back({sw, host_of(p, rank_gpus, r), piece_bytes});
        }
        std::vector<PhaseFlow> flows = ups;
        flows.insert(flows.end(), downs.begin(), downs.end());
        const Load load = phase_load(p, flows);
        return std::make_pair(phase_time_with(p, ups, load) + phase_time_with(p, downs, load),
                              phase_time_with(p, flows, load));
      };
      const Bytes full = std::min(piece, call.count) * call.element_bytes;
      const Bytes last = (call.count - (k - 1) * piece) * call.element_bytes;
      return pipeline_total(k, timing(full), timing(last));
    }
  }
  return 0;
}

void account_large_n(Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                     const CollectivePlan& plan, const CollectiveSettings& settings) {
  (void)settings;
  const int n = static_cast<int>(rank_gpus.size());
  if (n == 1 || call.count == 0) return;
  const Bytes total = call.bytes();
  auto h = [&](int r) { return host_of(p, rank_gpus, r); };
  switch (plan.algorithm) {
    case CollectiveAlgorithm::ring: {
      const auto orders = ring_orders(p, rank_gpus, plan.channels);
      const int c = plan.channels;
      if (call.op == CollectiveOp::broadcast || call.op == CollectiveOp::reduce) {
        for (int ch = 0; ch < c; ++ch) {
          const auto& o = orders[ch];
          const int root_pos = static_cast<int>(std::find(o.begin(), o.end(), call.root) - o.begin());
          const int first = call.op == CollectiveOp::reduce ? (root_pos + 1) % n : root_pos;
          const Bytes bytes = piece_count(call.count, c, ch) * call.element_bytes;
          for (int q = 0; q + 1 < n; ++q) p.account(h(o[(first + q) % n]), h(o[(first + q + 1) % n]), bytes);
        }
        return;
      }
      const int steps = call.op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1;
      // Each hop carries `steps` chunks of about total / (N C) bytes.
      const Bytes per_hop = static_cast<Bytes>(static_cast<double>(total) * steps / (static_cast<double>(n) * c));
      for (const auto& o : orders)
        for (int i = 0; i < n; ++i) p.account(h(o[i]), h(o[(i + 1) % n]), per_hop);
      return;
    }
    case CollectiveAlgorithm::tree: {
      const TreeEdges e = tree_edges(p, rank_gpus);
      for (int t = 0; t < 2; ++t) {
        const Bytes bytes = piece_count(call.count, 2, t) * call.element_bytes;
        for (auto& [c, par] : e.up[t]) {
          p.account(h(c), h(par), bytes);
          p.account(h(par), h(c), bytes);
        }
      }
      return;
    }
    case CollectiveAlgorithm::nvls: {
      sg4::Host* sw = p.nvswitch_host(p.node_of_gpu(rank_gpus[0]));
      for (int r = 0; r < n; ++r) {
        p.account(h(r), sw, total);
        p.account(sw, h(r), total);
      }
      return;
    }
  }
}

}  // namespace dpt::sim
