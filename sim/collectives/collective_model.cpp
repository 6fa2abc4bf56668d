// The large-N formulation of the collectives: see collective_model.hpp.
#include "sim/collectives/collective_model.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/collectives/collective_exact.hpp"

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
Seconds chain_time(const Platform& p, const std::vector<int>& gpus, const std::vector<std::vector<int>>& orders,
                   const CollectiveCall& call, Elements piece) {
  const int n = static_cast<int>(gpus.size());
  const int channels = static_cast<int>(orders.size());
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
    const auto& o = orders[c];
    const int root_pos = static_cast<int>(std::find(o.begin(), o.end(), call.root) - o.begin());
    const int first = call.op == CollectiveOp::reduce ? (root_pos + 1) % n : root_pos;
    const Elements elems = piece_count(call.count, channels, c);
    Channel& ch = chs[c];
    ch.first_hop = static_cast<int>(all.size());
    ch.pieces = ceil_div(elems, piece);
    const double full = static_cast<double>(std::min(piece, elems) * call.element_bytes);
    ch.last = static_cast<double>((elems - std::max<Elements>(ch.pieces - 1, 0) * piece) * call.element_bytes);
    for (int q = 0; q < hops; ++q)
      all.push_back({&p.route(host_of(p, gpus, o[(first + q) % n]), host_of(p, gpus, o[(first + q + 1) % n])), full});
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

// ---- fluid simulation of a transfer DAG, with SimGrid's CM02 sharing --------------------
// SimGrid's CM02 network model (sim_process.cpp sets CM02, crosstraffic 0, TCP-gamma 0,
// the full solver;
// SimGrid 3.32 src/surf/network_cm02.cpp, src/kernel/lmm/maxmin.cpp): a comm first pays
// its route's latency without using bandwidth (its max-min variable has penalty 0), then
// shares every link of its route under weighted max-min fairness with sharing penalty =
// its route latency (weight-S is 0 in CM02), i.e. each saturated link is split in
// proportion to 1 / latency among the flows it bottlenecks; the bound min(link bw,
// TCP-gamma / 2 lat) is 0 with TCP-gamma 0, which the solver reads as unbounded. A comm
// ends when its bytes are through. (A route of zero latency keeps penalty 1, as SimGrid
// creates its variable.) Here the same rule runs on plain arrays, event to event,
// recomputing the max-min rates whenever a flow starts or stops transferring; events
// closer than 1e-9 relative are taken together.
struct FluidTransfer {
  const RouteInfo* route = nullptr;
  double bytes = 0;
  int waits = 0;              // number of transfers it waits for
  std::vector<int> then;      // transfers waiting for its end
};

class FluidSim {
 public:
  explicit FluidSim(std::vector<FluidTransfer>& ts) : ts_(ts) {}

  // End time of every transfer (those that wait for nothing start at 0).
  std::vector<Seconds> run() {
    const int n = static_cast<int>(ts_.size());
    end_.assign(n, -1);
    link_of_.clear();
    bw_.clear();
    flow_links_.clear();
    flows_.assign(n, {});
    for (int i = 0; i < n; ++i) {
      Flow& f = flows_[i];
      f.waits = ts_[i].waits;
      const RouteInfo* r = ts_[i].route;
      f.lat = r->latency_s;
      f.weight = r->latency_s > 0 ? 1.0 / r->latency_s : 1.0;
      f.rem = ts_[i].bytes;
      f.first_link = static_cast<int>(flow_links_.size());
      for (const auto* l : r->links) flow_links_.push_back(link_id(l));
      f.last_link = static_cast<int>(flow_links_.size());
    }
    usage_.assign(bw_.size(), 0);
    cap_.assign(bw_.size(), 0);
    version_.assign(bw_.size(), 0);
    on_link_.assign(bw_.size(), {});
    count_.assign(bw_.size(), 0);
    for (int i = 0; i < n; ++i)
      if (flows_[i].waits == 0) start(i, 0.0);
    double t = 0;
    std::vector<int> done;
    while (!lat_heap_.empty() || !active_.empty()) {
      if (dirty_) share();
      double t_next = std::numeric_limits<double>::infinity();
      if (!lat_heap_.empty()) t_next = lat_heap_.top().first;
      for (int i : active_) t_next = std::min(t_next, t + flows_[i].rem / flows_[i].rate);
      if (!std::isfinite(t_next)) break;  // only flows with no bandwidth left: cannot happen on real links
      const double dt = t_next - t;
      t = t_next;
      const double eps_t = 1e-9 * t + 1e-15;
      done.clear();
      for (int i : active_) {
        Flow& f = flows_[i];
        if (std::isinf(f.rate)) {  // a route without links: done as soon as its latency is paid
          done.push_back(i);
          continue;
        }
        f.rem -= f.rate * dt;
        if (f.rem <= f.rate * eps_t) done.push_back(i);
      }
      while (!lat_heap_.empty() && lat_heap_.top().first <= t + eps_t) {
        const int i = lat_heap_.top().second;
        lat_heap_.pop();
        if (flows_[i].rem <= 0) {
          finish(i, t);
        } else {
          activate(i);
        }
      }
      if (!done.empty()) {
        dirty_ = true;
        for (int i : done) flows_[i].ended = true;
        std::erase_if(active_, [&](int i) { return flows_[i].ended; });
        for (int i : done) finish(i, t);
      }
    }
    return end_;
  }

 private:
  struct Flow {
    int waits = 0;
    double lat = 0, weight = 1, rem = 0, rate = 0;
    int first_link = 0, last_link = 0;
    bool ended = false;
  };

  int link_id(const simgrid::s4u::Link* l) {
    auto [it, added] = link_of_.try_emplace(l, static_cast<int>(bw_.size()));
    if (added) bw_.push_back(l->get_bandwidth());
    return it->second;
  }

  void start(int i, double t) {
    Flow& f = flows_[i];
    if (f.lat > 0) lat_heap_.push({t + f.lat, i});
    else if (f.rem > 0) activate(i);
    else finish(i, t);
  }
  void activate(int i) {
    active_.push_back(i);
    dirty_ = true;
  }
  void finish(int i, double t) {
    end_[i] = t;
    for (int j : ts_[i].then)
      if (--flows_[j].waits == 0) start(j, t);
  }

  // Weighted max-min (progressive filling): the link with the least capacity per unit
  // of weight saturates first; its flows get that share times their weight.
  void share() {
    dirty_ = false;
    std::vector<int>& links = touched_;
    links.clear();
    for (int i : active_) {
      Flow& f = flows_[i];
      f.rate = -1;
      for (int k = f.first_link; k < f.last_link; ++k) {
        const int l = flow_links_[k];
        if (on_link_[l].empty()) {
          links.push_back(l);
          usage_[l] = 0;
          cap_[l] = bw_[l];
        }
        on_link_[l].push_back(i);
        usage_[l] += f.weight;
      }
    }
    size_t left = active_.size();
    // Links by capacity per unit of weight, least first; entries made stale by a later
    // change of the link (its version) are skipped.
    heap_ = {};
    for (int l : links) {
      count_[l] = static_cast<int>(on_link_[l].size());
      version_[l] = 0;
      heap_.push({cap_[l] / usage_[l], l, 0});
    }
    while (left > 0 && !heap_.empty()) {
      const auto [m, best, ver] = heap_.top();
      heap_.pop();
      if (ver != version_[best] || count_[best] <= 0) continue;
      for (int i : on_link_[best]) {
        Flow& f = flows_[i];
        if (f.rate >= 0) continue;
        f.rate = m * f.weight;
        --left;
        for (int k = f.first_link; k < f.last_link; ++k) {
          const int l = flow_links_[k];
          cap_[l] = std::max(0.0, cap_[l] - f.rate);
          usage_[l] -= f.weight;
          --count_[l];
          if (l != best && count_[l] > 0) heap_.push({cap_[l] / usage_[l], l, ++version_[l]});
        }
      }
      count_[best] = 0;
    }
    for (int i : active_)
      if (flows_[i].rate < 0) flows_[i].rate = std::numeric_limits<double>::infinity();  // no links
    for (int l : links) on_link_[l].clear();
  }

  std::vector<FluidTransfer>& ts_;
  std::vector<Flow> flows_;
  std::vector<int> flow_links_;
  std::unordered_map<const simgrid::s4u::Link*, int> link_of_;
  std::vector<double> bw_, usage_, cap_;
  std::vector<std::vector<int>> on_link_;
  std::vector<int> count_, version_;
  std::vector<int> active_, touched_;
  std::priority_queue<std::tuple<double, int, int>, std::vector<std::tuple<double, int, int>>, std::greater<>> heap_;
  std::vector<Seconds> end_;
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>> lat_heap_;
  bool dirty_ = false;
};

// The end of every piece index (over all channels and hops or edges) in a replay, the
// largest route latency of its transfers, and the pipeline's depth: the most transfers
// on one dependency path within one piece (a chain's hops; a tree's up plus down edges).
struct PieceEnds {
  std::vector<Seconds> end;  // end[i]: when the last transfer of piece i (any channel) ended
  Seconds max_latency_s = 0;
  int depth = 0;
};

PieceEnds piece_ends(const std::vector<FluidTransfer>& ts, const std::vector<Seconds>& end,
                     const std::vector<int>& piece_of) {
  PieceEnds out;
  std::vector<int> waits(ts.size(), 0), longest(ts.size(), 1);
  for (size_t t = 0; t < ts.size(); ++t) {
    const auto i = static_cast<size_t>(piece_of[t]);
    if (out.end.size() <= i) out.end.resize(i + 1, 0.0);
    out.end[i] = std::max(out.end[i], end[t]);
    out.max_latency_s = std::max(out.max_latency_s, ts[t].route->latency_s);
    if (piece_of[t] == 0)
      for (int u : ts[t].then)
        if (piece_of[u] == 0) ++waits[u];
  }
  // Longest path through piece 0's transfers (Kahn's order).
  std::vector<int> ready;
  for (size_t t = 0; t < ts.size(); ++t)
    if (piece_of[t] == 0 && waits[t] == 0) ready.push_back(static_cast<int>(t));
  while (!ready.empty()) {
    const int t = ready.back();
    ready.pop_back();
    out.depth = std::max(out.depth, longest[t]);
    for (int u : ts[t].then)
      if (piece_of[u] == 0) {
        longest[u] = std::max(longest[u], longest[t] + 1);
        if (--waits[u] == 0) ready.push_back(u);
      }
  }
  return out;
}

// Replays the first min(head, its pieces) pieces of every channel's chain. The transfers
// of a ring broadcast or reduce: on every channel a pipelined chain of n - 1 hops along
// the ring from the root (or to it), cut into pieces; hop j sends piece i once it
// received it over hop j - 1 and its send of piece i - 1 ended (collective_exact.cpp's
// chain actors). The replay's cost grows with the transfers and with the flows
// overlapping each (a whole 250 MiB broadcast at 1,024 GPUs took over a second), hence
// the bounds and the extrapolation (collective_model.hpp).
PieceEnds chain_replay(const Platform& p, const std::vector<int>& gpus, const std::vector<std::vector<int>>& orders,
                       const CollectiveCall& call, Elements piece, Elements head) {
  const int n = static_cast<int>(gpus.size());
  const int channels = static_cast<int>(orders.size());
  const int hops = n - 1;
  std::vector<FluidTransfer> ts;
  std::vector<int> piece_of;
  for (int c = 0; c < channels; ++c) {
    const auto& o = orders[c];
    const int root_pos = static_cast<int>(std::find(o.begin(), o.end(), call.root) - o.begin());
    const int first = call.op == CollectiveOp::reduce ? (root_pos + 1) % n : root_pos;
    const Elements elems = piece_count(call.count, channels, c);
    const int m = static_cast<int>(std::min(head, ceil_div(elems, piece)));
    const int b = static_cast<int>(ts.size());
    std::vector<const RouteInfo*> routes(hops);
    for (int j = 0; j < hops; ++j)
      routes[j] = &p.route(host_of(p, gpus, o[(first + j) % n]), host_of(p, gpus, o[(first + j + 1) % n]));
    ts.resize(b + static_cast<size_t>(m) * hops);
    piece_of.resize(ts.size());
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < hops; ++j) {
        FluidTransfer& t = ts[b + i * hops + j];
        piece_of[b + i * hops + j] = i;
        t.route = routes[j];
        t.bytes = static_cast<double>(std::min(piece, elems - i * piece) * call.element_bytes);
        if (j + 1 < hops) {
          t.then.push_back(b + i * hops + j + 1);
          ++ts[b + i * hops + j + 1].waits;
        }
        if (i + 1 < m) {
          t.then.push_back(b + (i + 1) * hops + j);
          ++ts[b + (i + 1) * hops + j].waits;
        }
      }
  }
  const auto end = FluidSim(ts).run();
  return piece_ends(ts, end, piece_of);
}

// A call of k pieces per channel from the replay of its first K < k (full) pieces. Piece
// i's end is past the pipeline's fill once i >= depth and unaffected by the head's
// drain while i < K - depth (no later piece of the head is still upstream to contend
// with it); the period is measured over that span, each further piece adds it, and the
// head's drain stands for the call's. The last piece, `last_ratio` of a full one,
// shortens the final period's drain. Needs K >= 2 depth + kLargeNExtrapolateMinSteadyPieces + 1.
Seconds extrapolate_pieces(const PieceEnds& head, Elements k, double last_ratio) {
  const auto K = static_cast<Elements>(head.end.size());
  const Elements a = head.depth, b = K - 1 - head.depth;
  if (b - a < kLargeNExtrapolateMinSteadyPieces)
    throw std::logic_error("extrapolate_pieces: head too short");
  const Seconds period = (head.end[b] - head.end[a]) / static_cast<double>(b - a);
  const Seconds drain = std::max(0.0, period - head.max_latency_s);
  return head.end[K - 1] + static_cast<double>(k - K) * period - drain * (1.0 - last_ratio);
}

// The transfers of a tree all-reduce with `pieces[c]` pieces on channel c
// (collective_exact.cpp's tree actors, per channel): a rank sends piece i up once piece i
// arrived from every child and its send of piece i - 1 ended; it sends piece i down to
// its k-th child (children in rank order) once piece i arrived from its parent (at the
// root: from every child) and its sends of piece i - 1 to children 0..k ended.
std::vector<FluidTransfer> tree_transfers(const Platform& p, const std::vector<int>& gpus,
                                          const std::vector<TreeChannel>& tcs, const CollectiveCall& call,
                                          Elements piece, const std::vector<Elements>& pieces,
                                          std::vector<int>* piece_of = nullptr) {
  const int n = static_cast<int>(gpus.size());
  const int channels = static_cast<int>(tcs.size());
  std::vector<FluidTransfer> ts;
  auto dep = [&](int before, int after) {
    ts[before].then.push_back(after);
    ++ts[after].waits;
  };
  for (int c = 0; c < channels; ++c) {
    const auto& par = tcs[c].parent;
    const int root = tcs[c].root;
    std::vector<std::vector<int>> children(n);
    for (int r = 0; r < n; ++r)
      if (par[r] >= 0) children[par[r]].push_back(r);
    const Elements elems = piece_count(call.count, channels, c);
    std::vector<const RouteInfo*> up_route(n, nullptr), down_route(n, nullptr);
    for (int r = 0; r < n; ++r)
      if (par[r] >= 0) {
        up_route[r] = &p.route(host_of(p, gpus, r), host_of(p, gpus, par[r]));
        down_route[r] = &p.route(host_of(p, gpus, par[r]), host_of(p, gpus, r));
      }
    // up[r], down[r]: the transfer of the current piece over edge r -> parent, parent -> r.
    std::vector<int> up(n, -1), down(n, -1), prev_up(n, -1), prev_down(n, -1);
    for (Elements i = 0; i < pieces[c]; ++i) {
      const double bytes = static_cast<double>(std::min(piece, elems - i * piece) * call.element_bytes);
      for (int r = 0; r < n; ++r)
        if (par[r] >= 0) {
          up[r] = static_cast<int>(ts.size());
          ts.push_back({up_route[r], bytes, 0, {}});
          down[r] = static_cast<int>(ts.size());
          ts.push_back({down_route[r], bytes, 0, {}});
        }
      for (int r = 0; r < n; ++r) {
        if (par[r] >= 0) {
          for (int ch : children[r]) dep(up[ch], up[r]);
          if (i > 0) dep(prev_up[r], up[r]);
        }
        for (size_t k = 0; k < children[r].size(); ++k) {
          const int to = down[children[r][k]];
          if (r == root) {
            for (int ch : children[r]) dep(up[ch], to);
          } else {
            dep(down[r], to);
          }
          if (i > 0)
            for (size_t q = 0; q <= k; ++q) dep(prev_down[children[r][q]], to);
        }
      }
      if (piece_of) piece_of->resize(ts.size(), static_cast<int>(i));
      prev_up = up;
      prev_down = down;
    }
  }
  return ts;
}

// Replays the first min(head, its pieces) pieces of every channel's tree.
PieceEnds tree_replay(const Platform& p, const std::vector<int>& gpus, const std::vector<TreeChannel>& tcs,
                      const CollectiveCall& call, Elements piece, Elements head) {
  const int channels = static_cast<int>(tcs.size());
  std::vector<Elements> pieces(channels);
  for (int c = 0; c < channels; ++c) pieces[c] = std::min(head, ceil_div(piece_count(call.count, channels, c), piece));
  std::vector<int> piece_of;
  auto ts = tree_transfers(p, gpus, tcs, call, piece, pieces, &piece_of);
  const auto end = FluidSim(ts).run();
  return piece_ends(ts, end, piece_of);
}

// Pieces per channel (channel 0 has the most) and the last piece's share of a full one.
std::pair<Elements, double> pieces_per_channel(const CollectiveCall& call, int channels, Elements piece) {
  const Elements elems = piece_count(call.count, channels, 0);
  const Elements k = ceil_div(elems, piece);
  return {k, static_cast<double>(elems - (k - 1) * piece) / static_cast<double>(std::min(piece, elems))};
}

// Whole replay, truncated replay plus extrapolation, or neither (nullopt: use the
// estimate), for a call over n ranks of k pieces per channel and `transfers_per_piece`
// transfers per piece index; `replay(K)` replays the first K pieces of every channel.
std::optional<Seconds> replay_or_extrapolate(LargeNMethod method, int n, Elements k, double last_ratio,
                                             Elements transfers_per_piece, Elements replay_bound,
                                             Elements extrapolate_bound,
                                             const std::function<PieceEnds(Elements)>& replay, LargeNTimedBy& by) {
  by = LargeNTimedBy::estimate;
  if (method == LargeNMethod::estimate) return std::nullopt;
  auto whole = [&]() {
    by = LargeNTimedBy::replay;
    const auto r = replay(k);
    return r.end.empty() ? 0.0 : *std::max_element(r.end.begin(), r.end.end());
  };
  auto extrapolated = [&](Elements head) {
    by = LargeNTimedBy::extrapolation;
    return extrapolate_pieces(replay(head), k, last_ratio);
  };
  // The smallest head with kLargeNExtrapolateMinSteadyPieces steady pieces (one piece
  // replayed for the pipeline's depth).
  auto min_head = [&]() {
    return 2 * static_cast<Elements>(replay(1).depth) + kLargeNExtrapolateMinSteadyPieces + 1;
  };
  if (method == LargeNMethod::extrapolate) {
    const Elements head = min_head();
    return k <= head ? whole() : extrapolated(head);
  }
  const Elements per_piece = std::max<Elements>(1, transfers_per_piece);
  if (k <= replay_bound / per_piece) return whole();
  if (n > kLargeNExtrapolateMaxRanks) return std::nullopt;
  const Elements head = extrapolate_bound / per_piece;
  if (k <= head) return whole();
  if (head < min_head()) return std::nullopt;
  return extrapolated(head);
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

const char* large_n_timed_by_name(LargeNTimedBy by) {
  switch (by) {
    case LargeNTimedBy::phases: return "phases";
    case LargeNTimedBy::replay: return "replay";
    case LargeNTimedBy::extrapolation: return "extrapolation";
    case LargeNTimedBy::estimate: return "estimate";
  }
  return "?";
}

namespace {
Seconds time_large_n(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                     const CollectivePlan& plan, const CollectiveSettings& settings, LargeNMethod method,
                     LargeNTimedBy& by) {
  by = LargeNTimedBy::phases;
  const int n = static_cast<int>(rank_gpus.size());
  if (n == 1 || call.count == 0) return 0;
  const Elements piece = pipeline_piece_elements(settings, call.element_bytes);
  const int channels = plan.channels;
  switch (plan.algorithm) {
    case CollectiveAlgorithm::ring: {
      const auto orders = ring_orders(p, rank_gpus, channels);
      if (call.op == CollectiveOp::broadcast || call.op == CollectiveOp::reduce) {
        const auto [k, last_ratio] = pieces_per_channel(call, channels, piece);
        const auto t = replay_or_extrapolate(
            method, n, k, last_ratio, static_cast<Elements>(channels) * (n - 1), kLargeNReplayMaxChainTransfers,
            kLargeNExtrapolateMaxChainTransfers,
            [&](Elements head) { return chain_replay(p, rank_gpus, orders, call, piece, head); }, by);
        return t ? *t : chain_time(p, rank_gpus, orders, call, piece);
      }
      const int steps = call.op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1;
      const Bytes chunk = ceil_div(call.count, static_cast<Elements>(n) * channels) * call.element_bytes;
      return steps * phase_time(p, ring_step_flows(p, rank_gpus, orders, chunk));
    }
    case CollectiveAlgorithm::tree: {
      const auto tcs = tree_channels(p, rank_gpus, channels);
      const auto [pieces, last_ratio] = pieces_per_channel(call, channels, piece);
      const auto replayed = replay_or_extrapolate(
          method, n, pieces, last_ratio, 2 * static_cast<Elements>(channels) * (n - 1), kLargeNReplayMaxTreeTransfers,
          kLargeNExtrapolateMaxTreeTransfers,
          [&](Elements head) { return tree_replay(p, rank_gpus, tcs, call, piece, head); }, by);
      if (replayed) return *replayed;
      // The estimate: the first min(k, 3) pieces placed in time transfer by transfer;
      // every further piece adds one steady-state period (the last one its own, shorter).
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
}  // namespace

Seconds collective_time_large_n(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                                const CollectivePlan& plan, const CollectiveSettings& settings, LargeNMethod method,
                                LargeNTimedBy* timed_by) {
  LargeNTimedBy by = LargeNTimedBy::phases;
  const Seconds t = time_large_n(p, rank_gpus, call, plan, settings, method, by);
  if (timed_by) *timed_by = by;
  return t;
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
