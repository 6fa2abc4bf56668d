// The estimates of the large-N formulation (see estimate.hpp).
#include "sim/collectives/large_n/estimate.hpp"

#include <algorithm>
#include <utility>

#include "sim/collectives/large_n/phases.hpp"

namespace dpt::sim {

// The transfers of the first m pieces of a tree all-reduce, in a topological order:
// on every channel, piece by piece, the edges up (children before parents) and then
// down (parents before children). A transfer waits for its children's pieces on the way
// up, its parent's on the way down, and its own previous piece on the same edge.
struct TreeEstimator::Head {
  std::vector<int> piece;        // per transfer: its piece index
  std::vector<int> after_first;  // per transfer: its first entry in `after`; transfers + 1 entries
  std::vector<int> after;        // the transfers each one waits for
  std::vector<double> latency_s;
  LinkIncidence links;
};

// Every edge of every channel, up and down, with the number of those transfers on each link.
struct TreeEstimator::Period {
  std::vector<double> latency_s;  // per transfer
  LinkIncidence links;
  std::vector<double> count;      // per link id: transfers on it
};

TreeEstimator::TreeEstimator(const Platform& p, std::vector<int> gpus, std::vector<TreeChannel> tcs)
    : p_(p), gpus_(std::move(gpus)), tcs_(std::move(tcs)) {}
TreeEstimator::~TreeEstimator() = default;

// The time of the first pieces of a tree all-reduce (sizes in `pieces`): every transfer
// placed after the ones it waits for, each taking its latency plus its bytes times its
// share of its busiest link over that link's bandwidth. The share is the average number
// of transfers on the link during it, found by iterating from unshared durations
// (damped, four placements).
Seconds TreeEstimator::head_time(const std::vector<Bytes>& pieces) {
  if (auto it = head_times_.find(pieces); it != head_times_.end()) return it->second;
  const int m = static_cast<int>(pieces.size());
  auto& slot = heads_[m];
  if (!slot) {
    // One head graph at a time: at 32,768 ranks one takes ~200 MiB, and calls needing a
    // head of another length (the few smallest buckets) are rare.
    for (auto& [length, graph] : heads_)
      if (length != m) graph.reset();
    slot = build_head(p_, gpus_, tcs_, m);
  }
  const Head& h = *slot;
  const LinkIncidence& inc = h.links;
  const int e_count = inc.transfers();
  std::vector<double> bytes(static_cast<size_t>(e_count)), dur(bytes.size()), start(bytes.size()),
      end(bytes.size()), rate(bytes.size()), load;
  for (int i = 0; i < e_count; ++i) {
    bytes[i] = static_cast<double>(pieces[static_cast<size_t>(h.piece[i])]);
    double drain = 0;
    for (int k = inc.first[i]; k < inc.first[i + 1]; ++k) drain = std::max(drain, bytes[i] / inc.bandwidth[inc.link[k]]);
    dur[i] = h.latency_s[i] + drain;
  }
  Seconds total = 0;
  constexpr int kPlacements = 4;
  for (int iter = 0; iter < kPlacements; ++iter) {
    total = 0;
    for (int i = 0; i < e_count; ++i) {
      double s = 0;
      for (int a = h.after_first[i]; a < h.after_first[i + 1]; ++a) s = std::max(s, end[h.after[a]]);
      start[i] = s;
      end[i] = s + dur[i];
      total = std::max(total, end[i]);
    }
    if (iter + 1 == kPlacements) break;  // the last placement's durations are not used
    // A transfer's load on a link: every transfer there, at its own rate, during this one.
    for (int i = 0; i < e_count; ++i) rate[i] = bytes[i] / std::max(dur[i], 1e-30);
    overlap_loads(inc, start, end, rate, load);
    for (int i = 0; i < e_count; ++i) {
      double drain = 0;
      for (int k = inc.first[i]; k < inc.first[i + 1]; ++k)
        drain = std::max(drain, std::max(load[k], bytes[i]) / inc.bandwidth[inc.link[k]]);
      dur[i] = 0.5 * (dur[i] + h.latency_s[i] + drain);
    }
  }
  head_times_.emplace(pieces, total);
  return total;
}

// The steady-state period with pieces of `piece_bytes`: every edge of every channel, up
// and down, busy at once (a phase: see phases.hpp).
Seconds TreeEstimator::period(Bytes piece_bytes) {
  if (auto it = periods_.find(piece_bytes); it != periods_.end()) return it->second;
  if (!period_) {
    period_ = std::make_unique<Period>();
    std::vector<const RouteInfo*> routes;
    for (const auto& tc : tcs_)
      for (int r = 0; r < static_cast<int>(gpus_.size()); ++r)
        if (tc.parent[r] >= 0) {
          routes.push_back(&p_.route(host_of(p_, gpus_, r), host_of(p_, gpus_, tc.parent[r])));
          routes.push_back(&p_.route(host_of(p_, gpus_, tc.parent[r]), host_of(p_, gpus_, r)));
        }
    for (const RouteInfo* r : routes) period_->latency_s.push_back(r->latency_s);
    period_->links = link_incidence(routes);
    period_->count.assign(static_cast<size_t>(period_->links.links()), 0.0);
    for (int l : period_->links.link) period_->count[l] += 1;
    // Only each transfer's links are read from here on.
    period_->links.owner = {};
    period_->links.on = {};
    period_->links.on_first = {};
  }
  const Period& pd = *period_;
  const double b = static_cast<double>(piece_bytes);
  Seconds t = 0;
  for (int i = 0; i < pd.links.transfers(); ++i) {
    double drain = 0;
    for (int k = pd.links.first[i]; k < pd.links.first[i + 1]; ++k) {
      const int l = pd.links.link[k];
      drain = std::max(drain, b * pd.count[l] / pd.links.bandwidth[l]);
    }
    t = std::max(t, pd.latency_s[i] + drain);
  }
  periods_.emplace(piece_bytes, t);
  return t;
}

Seconds TreeEstimator::estimate(const CollectiveCall& call, Elements piece) {
  const int channels = static_cast<int>(tcs_.size());
  const Elements elems = ceil_div(call.count, channels);
  const Elements k = ceil_div(elems, piece);
  const Bytes full = std::min(piece, elems) * call.element_bytes;
  const Bytes last = (elems - (k - 1) * piece) * call.element_bytes;
  const int m = static_cast<int>(std::min<Elements>(k, 3));
  std::vector<Bytes> head(static_cast<size_t>(m), full);
  if (m == k) head.back() = last;
  Seconds t = head_time(head);
  if (k > m) t += static_cast<double>(k - m - 1) * period(full) + period(last);
  return t;
}

Seconds tree_estimate(const Platform& p, const std::vector<int>& gpus, const std::vector<TreeChannel>& tcs,
                      const CollectiveCall& call, Elements piece) {
  return TreeEstimator(p, gpus, tcs).estimate(call, piece);
}

std::unique_ptr<TreeEstimator::Head> TreeEstimator::build_head(const Platform& p, const std::vector<int>& gpus,
                                                              const std::vector<TreeChannel>& tcs, int m) {
  const int n = static_cast<int>(gpus.size());
  auto h = std::make_unique<TreeEstimator::Head>();
  std::vector<const RouteInfo*> routes;
  h->after_first.push_back(0);
  auto add = [&](const RouteInfo& route, int q) {
    routes.push_back(&route);
    h->piece.push_back(q);
    h->latency_s.push_back(route.latency_s);
    h->after_first.push_back(static_cast<int>(h->after.size()));
    return static_cast<int>(routes.size()) - 1;
  };
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
    // Every piece crosses the same edges: their routes looked up once.
    std::vector<const RouteInfo*> up_route(n, nullptr), down_route(n, nullptr);
    for (int r : post)
      if (par[r] >= 0) {
        up_route[r] = &p.route(host_of(p, gpus, r), host_of(p, gpus, par[r]));
        down_route[r] = &p.route(host_of(p, gpus, par[r]), host_of(p, gpus, r));
      }
    std::vector<int> up_prev(n, -1), down_prev(n, -1), up(n, -1), down(n, -1);
    for (int q = 0; q < m; ++q) {
      for (int r : post) {
        if (par[r] < 0) continue;
        for (int c : children[r]) h->after.push_back(up[c]);
        if (q > 0) h->after.push_back(up_prev[r]);
        up[r] = add(*up_route[r], q);
      }
      for (auto it = post.rbegin(); it != post.rend(); ++it) {
        const int r = *it;
        if (par[r] < 0) continue;
        if (par[r] == tc.root) {
          for (int c : children[tc.root]) h->after.push_back(up[c]);
        } else {
          h->after.push_back(down[par[r]]);
        }
        if (q > 0) h->after.push_back(down_prev[r]);
        down[r] = add(*down_route[r], q);
      }
      std::swap(up_prev, up);
      std::swap(down_prev, down);
    }
  }
  h->links = link_incidence(routes);
  return h;
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
// recurrence at its own size.
ChainLinks chain_links(const Platform& p, const std::vector<int>& gpus, const std::vector<std::vector<int>>& chains) {
  ChainLinks out;
  out.channels = static_cast<int>(chains.size());
  out.hops = static_cast<int>(gpus.size()) - 1;
  for (const auto& o : chains)
    for (int q = 0; q < out.hops; ++q) out.routes.push_back(&p.route(host_of(p, gpus, o[q]), host_of(p, gpus, o[q + 1])));
  out.links = link_incidence(out.routes);
  return out;
}

Seconds chain_time(const Platform& p, const std::vector<int>& gpus, const std::vector<std::vector<int>>& chains,
                   const CollectiveCall& call, Elements piece) {
  return chain_time(chain_links(p, gpus, chains), call, piece);
}

Seconds chain_time(const ChainLinks& chain, const CollectiveCall& call, Elements piece) {
  const int channels = chain.channels;
  const int hops = chain.hops;
  const auto& routes = chain.routes;
  const LinkIncidence& inc = chain.links;
  struct Channel {
    Elements pieces = 0;
    double last = 0;  // bytes of the last piece
  };
  std::vector<Channel> chs(static_cast<size_t>(channels));
  std::vector<double> bytes;  // of a full piece, per hop
  for (int c = 0; c < channels; ++c) {
    const Elements elems = piece_count(call.count, channels, c);
    Channel& ch = chs[c];
    ch.pieces = ceil_div(elems, piece);
    const double full = static_cast<double>(std::min(piece, elems) * call.element_bytes);
    ch.last = static_cast<double>((elems - std::max<Elements>(ch.pieces - 1, 0) * piece) * call.element_bytes);
    bytes.insert(bytes.end(), static_cast<size_t>(hops), full);
  }
  const size_t total_hops = routes.size();
  std::vector<double> dur(total_hops), from(total_hops, 0.0), to(total_hops, 0.0), load;
  auto drain_under = [&](size_t i, auto&& load_on) {
    Seconds drain = 0;
    for (int k = inc.first[i]; k < inc.first[i + 1]; ++k)
      drain = std::max(drain, std::max(load_on(k), bytes[i]) / inc.bandwidth[inc.link[k]]);
    return routes[i]->latency_s + drain;
  };
  for (size_t i = 0; i < total_hops; ++i) dur[i] = drain_under(i, [](int) { return 0.0; });
  auto place = [&]() {
    for (int c = 0; c < channels; ++c) {
      if (chs[c].pieces == 0) continue;
      Seconds sum = 0, max = 0;
      for (int j = 0; j < hops; ++j) {
        const size_t i = static_cast<size_t>(c) * hops + j;
        from[i] = sum;
        sum += dur[i];
        max = std::max(max, dur[i]);
        to[i] = sum + static_cast<double>(chs[c].pieces - 1) * max;
      }
    }
  };
  std::vector<Seconds> next(total_hops);
  for (int iter = 0; iter < 6; ++iter) {
    place();
    // Bytes of every hop on the link times its overlap with this hop, over this hop's span.
    overlap_loads(inc, from, to, bytes, load);
    for (size_t i = 0; i < total_hops; ++i) {
      const double span = std::max(to[i] - from[i], 1e-30);
      next[i] = drain_under(i, [&](int k) { return load[k] / span; });
    }
    for (size_t i = 0; i < total_hops; ++i) dur[i] = 0.5 * (dur[i] + next[i]);
  }
  place();
  Seconds total = 0;
  for (int c = 0; c < channels; ++c) {
    const Channel& ch = chs[c];
    if (ch.pieces == 0) continue;
    // The last piece: leaves hop j after the previous piece left it and after it
    // arrived over hop j - 1; it drains at its own size under the same sharing.
    Seconds arrived = 0, sum = 0, max = 0;
    for (int j = 0; j < hops; ++j) {
      const size_t i = static_cast<size_t>(c) * hops + j;
      sum += dur[i];
      max = std::max(max, dur[i]);
      const Seconds prev_left = ch.pieces >= 2 ? sum + static_cast<double>(ch.pieces - 2) * max : 0;
      const double ratio = bytes[i] > 0 ? ch.last / bytes[i] : 1.0;
      const Seconds own = routes[i]->latency_s + (dur[i] - routes[i]->latency_s) * ratio;
      arrived = std::max(arrived, prev_left) + own;
    }
    total = std::max(total, arrived);
  }
  return total;
}

}  // namespace dpt::sim
