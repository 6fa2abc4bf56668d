// The estimates of the large-N formulation (see estimate.hpp).
#include "sim/collectives/large_n/estimate.hpp"

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "sim/collectives/large_n/phases.hpp"

namespace sg4 = simgrid::s4u;

namespace dpt::sim {

namespace {

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
    const auto& children = tc.children;
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

Seconds tree_estimate(const Platform& p, const std::vector<int>& gpus, const std::vector<TreeChannel>& tcs,
                      const CollectiveCall& call, Elements piece) {
  const int channels = static_cast<int>(tcs.size());
  const Elements elems = ceil_div(call.count, channels);
  const Elements k = ceil_div(elems, piece);
  const Bytes full = std::min(piece, elems) * call.element_bytes;
  const Bytes last = (elems - (k - 1) * piece) * call.element_bytes;
  const int m = static_cast<int>(std::min<Elements>(k, 3));
  std::vector<Bytes> head(m, full);
  if (m == k) head.back() = last;
  Seconds t = tree_head_time(p, gpus, tcs, head);
  if (k > m) t += static_cast<double>(k - m - 1) * tree_period(p, gpus, tcs, full) + tree_period(p, gpus, tcs, last);
  return t;
}

// A ring broadcast or reduce: on every channel a pipelined chain of n - 1 hops along the
// ring from the root (or to it), cut into k pieces. The chain is a flow shop: hop j sends
// piece i once it has received piece i over hop j - 1 and finished sending piece i - 1.
// With a constant duration t_j per piece, piece i leaves hop j at S_j + i M_j (S_j the
// sum, M_j the maximum of t_0..t_j), so hop j is busy from S_j - t_j to S_j + (k-1) M_j.
// A hop's duration is its latency plus its busiest link's drain, the link's load being
// the bytes per piece of every hop (any channel) on it weighted by how much of this hop's
// busy interval that hop's busy interval overlaps; found by iterating from unshared
// durations (damped, as the tree's head). The last piece then runs through the same
// recurrence at its own size. Cost: O(iterations x C (n + k) x hops sharing a link).
Seconds chain_time(const Platform& p, const std::vector<int>& gpus, const std::vector<std::vector<int>>& chains,
                   const CollectiveCall& call, Elements piece) {
  const int n = static_cast<int>(gpus.size());
  const int channels = static_cast<int>(chains.size());
  const int hops = n - 1;
  struct Hop {
    const RouteInfo* route;
    double bytes;           // of a full piece
    Seconds dur = 0;        // per full piece
    Seconds from = 0, to = 0;  // busy interval
  };
  struct Channel {
    int first_hop = 0;  // index of its hop 0 in `all`
    Elements pieces = 0;
    double last = 0;  // bytes of the last piece
  };
  std::vector<Hop> all;
  std::vector<Channel> chs(channels);
  for (int c = 0; c < channels; ++c) {
    const auto& o = chains[c];
    const Elements elems = piece_count(call.count, channels, c);
    Channel& ch = chs[c];
    ch.first_hop = static_cast<int>(all.size());
    ch.pieces = ceil_div(elems, piece);
    const double full = static_cast<double>(std::min(piece, elems) * call.element_bytes);
    ch.last = static_cast<double>((elems - std::max<Elements>(ch.pieces - 1, 0) * piece) * call.element_bytes);
    for (int q = 0; q < hops; ++q)
      all.push_back({&p.route(host_of(p, gpus, o[q]), host_of(p, gpus, o[q + 1])), full});
  }
  std::unordered_map<const sg4::Link*, std::vector<int>> on_link;
  for (int i = 0; i < static_cast<int>(all.size()); ++i)
    for (const auto* l : all[i].route->links) on_link[l].push_back(i);
  auto duration_under = [&](const Hop& h, double bytes, const std::function<double(const sg4::Link*)>& load) {
    Seconds drain = 0;
    for (const auto* l : h.route->links) drain = std::max(drain, std::max(load(l), bytes) / l->get_bandwidth());
    return h.route->latency_s + drain;
  };
  for (auto& h : all) h.dur = duration_under(h, h.bytes, [](const sg4::Link*) { return 0.0; });
  auto place = [&]() {
    for (const auto& ch : chs) {
      if (ch.pieces == 0) continue;
      Seconds sum = 0, max = 0;
      for (int j = 0; j < hops; ++j) {
        Hop& h = all[ch.first_hop + j];
        h.from = sum;
        sum += h.dur;
        max = std::max(max, h.dur);
        h.to = sum + static_cast<double>(ch.pieces - 1) * max;
      }
    }
  };
  for (int iter = 0; iter < 6; ++iter) {
    place();
    std::vector<Seconds> next(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      const Hop& h = all[i];
      const double span = std::max(h.to - h.from, 1e-30);
      next[i] = duration_under(h, h.bytes, [&](const sg4::Link* l) {
        double load = 0;
        for (int j : on_link.at(l)) {
          const Hop& o = all[j];
          const double overlap = std::min(h.to, o.to) - std::max(h.from, o.from);
          if (overlap > 0) load += o.bytes * std::min(1.0, overlap / span);
        }
        return load;
      });
    }
    for (size_t i = 0; i < all.size(); ++i) all[i].dur = 0.5 * (all[i].dur + next[i]);
  }
  place();
  Seconds total = 0;
  for (const auto& ch : chs) {
    if (ch.pieces == 0) continue;
    // The last piece: leaves hop j after the previous piece left it and after it
    // arrived over hop j - 1; it drains at its own size under the same sharing.
    Seconds arrived = 0, sum = 0, max = 0;
    for (int j = 0; j < hops; ++j) {
      const Hop& h = all[ch.first_hop + j];
      sum += h.dur;
      max = std::max(max, h.dur);
      const Seconds prev_left = ch.pieces >= 2 ? sum + static_cast<double>(ch.pieces - 2) * max : 0;
      const double ratio = h.bytes > 0 ? ch.last / h.bytes : 1.0;
      const Seconds own = h.route->latency_s + (h.dur - h.route->latency_s) * ratio;
      arrived = std::max(arrived, prev_left) + own;
    }
    total = std::max(total, arrived);
  }
  return total;
}

}  // namespace dpt::sim
