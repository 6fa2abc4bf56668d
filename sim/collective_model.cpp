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

// The steady-state period of a tree all-reduce with pieces of `piece_bytes`: every edge
// of every channel, up and down, busy at once.
Seconds tree_period(const Platform& p, const std::vector<int>& gpus, const std::vector<TreeChannel>& tcs,
                    Bytes piece_bytes) {
  std::vector<PhaseFlow> all;
  for (const auto& tc : tcs)
    for (int r = 0; r < static_cast<int>(gpus.size()); ++r)
      if (tc.parent[r] >= 0) {
        all.push_back({host_of(p, gpus, r), host_of(p, gpus, tc.parent[r]), piece_bytes});
        all.push_back({host_of(p, gpus, tc.parent[r]), host_of(p, gpus, r), piece_bytes});
      }
  return phase_time(p, all);
}

// The time of the first pieces of a tree all-reduce (sizes in `pieces`): every transfer
// placed after the ones it waits for (its children's pieces on the way up, its parent's
// on the way down, its own previous piece on the same edge), each taking its latency
// plus its bytes times its share of its busiest link over that link's bandwidth. The
// share is the average number of transfers on the link during it, found by iterating
// from unshared durations (damped, four rounds).
Seconds tree_head_time(const Platform& p, const std::vector<int>& gpus, const std::vector<TreeChannel>& tcs,
                       const std::vector<Bytes>& pieces) {
  const int n = static_cast<int>(gpus.size());
  const int m = static_cast<int>(pieces.size());
  struct Edge {
    const RouteInfo* route;
    Bytes bytes;
    std::vector<int> after;  // transfers this one waits for
    Seconds start = 0, end = 0, dur = 0;
  };
  std::vector<Edge> edges;  // in a topological order
  for (const auto& tc : tcs) {
    const auto& par = tc.parent;
    std::vector<std::vector<int>> children(n);
    for (int r = 0; r < n; ++r)
      if (par[r] >= 0) children[par[r]].push_back(r);
    std::vector<int> post, stack{tc.root};  // post-order: children before parents
    while (!stack.empty()) {
      const int r = stack.back();
      stack.pop_back();
      post.push_back(r);
      for (int c : children[r]) stack.push_back(c);
    }
    std::reverse(post.begin(), post.end());
    std::vector<std::vector<int>> up(m, std::vector<int>(n, -1)), down(m, std::vector<int>(n, -1));
    for (int q = 0; q < m; ++q) {
      for (int r : post) {
        if (par[r] < 0) continue;
        Edge e{&p.route(host_of(p, gpus, r), host_of(p, gpus, par[r])), pieces[q], {}};
        for (int c : children[r]) e.after.push_back(up[q][c]);
        if (q > 0) e.after.push_back(up[q - 1][r]);
        up[q][r] = static_cast<int>(edges.size());
        edges.push_back(std::move(e));
      }
      for (auto it = post.rbegin(); it != post.rend(); ++it) {
        const int r = *it;
        if (par[r] < 0) continue;
        Edge e{&p.route(host_of(p, gpus, par[r]), host_of(p, gpus, r)), pieces[q], {}};
        if (par[r] == tc.root) {
          for (int c : children[tc.root]) e.after.push_back(up[q][c]);
        } else {
          e.after.push_back(down[q][par[r]]);
        }
        if (q > 0) e.after.push_back(down[q - 1][r]);
        down[q][r] = static_cast<int>(edges.size());
        edges.push_back(std::move(e));
      }
    }
  }
  std::unordered_map<const sg4::Link*, std::vector<int>> on_link;
  for (int i = 0; i < static_cast<int>(edges.size()); ++i)
    for (const auto* l : edges[i].route->links) on_link[l].push_back(i);
  for (auto& e : edges) {
    Seconds drain = 0;
    for (const auto* l : e.route->links) drain = std::max(drain, e.bytes / l->get_bandwidth());
    e.dur = e.route->latency_s + drain;
  }
  Seconds total = 0;
  for (int iter = 0; iter < 4; ++iter) {
    total = 0;
    for (auto& e : edges) {
      e.start = 0;
      for (int j : e.after) e.start = std::max(e.start, edges[j].end);
      e.end = e.start + e.dur;
      total = std::max(total, e.end);
    }
    std::vector<Seconds> next(edges.size());
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      Seconds drain = 0;
      for (const auto* l : e.route->links) {
        double load = 0;  // bytes of all transfers on l, weighted by their overlap with e
        for (int j : on_link.at(l)) {
          const Edge& o = edges[j];
          const double overlap = std::min(e.end, o.end) - std::max(e.start, o.start);
          if (overlap > 0) load += o.bytes * std::min(1.0, overlap / std::max(o.dur, 1e-30));
        }
        drain = std::max(drain, std::max<double>(load, e.bytes) / l->get_bandwidth());
      }
      next[i] = e.route->latency_s + drain;
    }
    for (size_t i = 0; i < edges.size(); ++i) edges[i].dur = 0.5 * (edges[i].dur + next[i]);
  }
  return total;
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
      // The first min(k, 3) pieces placed in time transfer by transfer; every further
      // piece adds one steady-state period (the last one its own, shorter period).
      const auto tcs = tree_channels(p, rank_gpus, channels);
      const Elements elems = ceil_div(call.count, channels);
      const Elements k = ceil_div(elems, piece);
      const Bytes full = std::min(piece, elems) * call.element_bytes;
      const Bytes last = (elems - (k - 1) * piece) * call.element_bytes;
      const int m = static_cast<int>(std::min<Elements>(k, 3));
      std::vector<Bytes> head(m, full);
      if (m == k) head.back() = last;
      Seconds t = tree_head_time(p, rank_gpus, tcs, head);
      if (k > m) t += static_cast<double>(k - m - 1) * tree_period(p, rank_gpus, tcs, full) +
                     tree_period(p, rank_gpus, tcs, last);
      return t;
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

LinkBytes large_n_traffic(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                     const CollectivePlan& plan, const CollectiveSettings& settings) {
  (void)settings;
  const int n = static_cast<int>(rank_gpus.size());
  std::unordered_map<const sg4::Link*, Bytes> bytes_on;
  struct Acc {
    const Platform& p;
    std::unordered_map<const sg4::Link*, Bytes>& on;
    void account(const sg4::Host* a, const sg4::Host* b, Bytes n) const {
      for (const auto* l : p.route(a, b).links) on[l] += n;
    }
  } acc{p, bytes_on};
  auto result = [&]() {
    LinkBytes out(bytes_on.begin(), bytes_on.end());
    // Order does not matter: link_usage() merges and sorts by name when asked.
    return out;
  };
  if (n == 1 || call.count == 0) return result();
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
          for (int q = 0; q + 1 < n; ++q) acc.account(h(o[(first + q) % n]), h(o[(first + q + 1) % n]), bytes);
        }
        return result();
      }
      const int steps = call.op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1;
      // Each hop carries `steps` chunks of about total / (N C) bytes.
      const Bytes per_hop = static_cast<Bytes>(static_cast<double>(total) * steps / (static_cast<double>(n) * c));
      for (const auto& o : orders)
        for (int i = 0; i < n; ++i) acc.account(h(o[i]), h(o[(i + 1) % n]), per_hop);
      return result();
    }
    case CollectiveAlgorithm::tree: {
      const auto tcs = tree_channels(p, rank_gpus, plan.channels);
      for (int c = 0; c < plan.channels; ++c) {
        const Bytes bytes = piece_count(call.count, plan.channels, c) * call.element_bytes;
        for (int r = 0; r < n; ++r)
          if (tcs[c].parent[r] >= 0) {
            acc.account(h(r), h(tcs[c].parent[r]), bytes);
            acc.account(h(tcs[c].parent[r]), h(r), bytes);
          }
      }
      return result();
    }
    case CollectiveAlgorithm::nvls: {
      sg4::Host* sw = p.nvswitch_host(p.node_of_gpu(rank_gpus[0]));
      for (int r = 0; r < n; ++r) {
        acc.account(h(r), sw, total);
        acc.account(sw, h(r), total);
      }
      return result();
    }
  }
  return result();
}

void account_large_n(Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                     const CollectivePlan& plan, const CollectiveSettings& settings) {
  p.account_pattern(std::make_shared<const LinkBytes>(large_n_traffic(p, rank_gpus, call, plan, settings)));
}

}  // namespace dpt::sim
