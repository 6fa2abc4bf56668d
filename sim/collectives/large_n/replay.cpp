// Replay of chains and trees transfer by transfer, and extrapolation of a replayed head
// (see replay.hpp).
#include "sim/collectives/large_n/replay.hpp"

#include <algorithm>
#include <stdexcept>

#include "sim/collectives/large_n/fluid_sim.hpp"
#include "sim/collectives/large_n/phases.hpp"

namespace dpt::sim {

namespace {

// PieceEnds of a replay: piece_of[t] is transfer t's piece index.
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

// The transfers of a tree all-reduce with `pieces[c]` pieces on channel c
// (collective_exact.cpp's tree actors, per channel), `in_flight` pieces per hop:
// - 1: a rank sends piece i up once piece i arrived from every child and its send of
//   piece i - 1 ended; it sends piece i down to its k-th child (children in rank order)
//   once piece i arrived from its parent (at the root: from every child) and its sends of
//   piece i - 1 to children 0..k ended;
// - W > 1 (NCCL's NCCL_STEPS): piece i goes over an edge once it arrived (from every child
//   going up; from the parent, or at the root from every child, going down) and piece
//   i - W arrived over that edge (a free buffer slot); its bytes follow piece i - 1's on
//   that edge (the FIFO gate) while its latency runs meanwhile.
std::vector<FluidTransfer> tree_transfers(const Platform& p, const std::vector<int>& gpus,
                                          const std::vector<TreeChannel>& tcs, const CollectiveCall& call,
                                          Elements piece, const std::vector<Elements>& pieces, int in_flight,
                                          std::vector<int>* piece_of = nullptr) {
  const int n = static_cast<int>(gpus.size());
  const int channels = static_cast<int>(tcs.size());
  const bool pipelined = in_flight > 1;
  std::vector<FluidTransfer> ts;
  auto dep = [&](int before, int after) {
    ts[before].then.push_back(after);
    ++ts[after].waits;
  };
  for (int c = 0; c < channels; ++c) {
    const auto& par = tcs[c].parent;
    const int root = tcs[c].root;
    const auto& children = tcs[c].children;
    const Elements elems = piece_count(call.count, channels, c);
    std::vector<const RouteInfo*> up_route(n, nullptr), down_route(n, nullptr);
    for (int r = 0; r < n; ++r)
      if (par[r] >= 0) {
        up_route[r] = &p.gpu_route(gpus[r], gpus[par[r]]);
        down_route[r] = &p.gpu_route(gpus[par[r]], gpus[r]);
      }
    // up[r], down[r]: the transfer of the current piece over edge r -> parent, parent -> r;
    // pipelined, every piece's (by piece index, per edge).
    std::vector<int> up(n, -1), down(n, -1), prev_up(n, -1), prev_down(n, -1);
    std::vector<std::vector<int>> up_of(pipelined ? n : 0), down_of(pipelined ? n : 0);
    for (Elements i = 0; i < pieces[c]; ++i) {
      const double bytes = static_cast<double>(std::min(piece, elems - i * piece) * call.element_bytes);
      for (int r = 0; r < n; ++r)
        if (par[r] >= 0) {
          up[r] = static_cast<int>(ts.size());
          ts.push_back({up_route[r], bytes, 0, {}, -1});
          down[r] = static_cast<int>(ts.size());
          ts.push_back({down_route[r], bytes, 0, {}, -1});
          if (pipelined) {
            up_of[r].push_back(up[r]);
            down_of[r].push_back(down[r]);
          }
        }
      // Pipelined: the FIFO gate behind piece i - 1 and the slot of piece i - W.
      auto hop_order = [&](const std::vector<int>& of, int t) {
        if (i > 0) ts[t].gate = of[static_cast<size_t>(i - 1)];
        if (i >= in_flight) dep(of[static_cast<size_t>(i - in_flight)], t);
      };
      for (int r = 0; r < n; ++r) {
        if (par[r] >= 0) {
          for (int ch : children[r]) dep(up[ch], up[r]);
          if (pipelined) hop_order(up_of[r], up[r]);
          else if (i > 0) dep(prev_up[r], up[r]);
        }
        for (size_t k = 0; k < children[r].size(); ++k) {
          const int to = down[children[r][k]];
          if (r == root) {
            for (int ch : children[r]) dep(up[ch], to);
          } else {
            dep(down[r], to);
          }
          if (pipelined) hop_order(down_of[children[r][k]], to);
          else if (i > 0)
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

}  // namespace

PieceEnds chain_replay(const Platform& p, const std::vector<int>& gpus, const std::vector<std::vector<int>>& chains,
                       const CollectiveCall& call, Elements piece, Elements head) {
  const int n = static_cast<int>(gpus.size());
  const int channels = static_cast<int>(chains.size());
  const int hops = n - 1;
  std::vector<FluidTransfer> ts;
  std::vector<int> piece_of;
  for (int c = 0; c < channels; ++c) {
    const auto& o = chains[c];
    const Elements elems = piece_count(call.count, channels, c);
    const int m = static_cast<int>(std::min(head, ceil_div(elems, piece)));
    const int b = static_cast<int>(ts.size());
    std::vector<const RouteInfo*> routes(hops);
    for (int j = 0; j < hops; ++j)
      routes[j] = &p.gpu_route(gpus[o[j]], gpus[o[j + 1]]);
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
  const auto end = fluid_sim_end_times(ts, &p);
  return piece_ends(ts, end, piece_of);
}

Seconds extrapolate_pieces(const PieceEnds& head, Elements k, double last_ratio) {
  const auto K = static_cast<Elements>(head.end.size());
  const Elements a = head.depth, b = K - 1 - head.depth;
  if (b - a < kLargeNExtrapolateMinSteadyPieces)
    throw std::logic_error("extrapolate_pieces: head too short");
  const Seconds period = (head.end[b] - head.end[a]) / static_cast<double>(b - a);
  // A piece's bytes take the whole period when its latency overlaps the previous piece's.
  const Seconds drain = head.latency_overlapped ? period : std::max(0.0, period - head.max_latency_s);
  return head.end[K - 1] + static_cast<double>(k - K) * period - drain * (1.0 - last_ratio);
}

PieceEnds tree_replay(const Platform& p, const std::vector<int>& gpus, const std::vector<TreeChannel>& tcs,
                      const CollectiveCall& call, Elements piece, Elements head, int in_flight) {
  const int channels = static_cast<int>(tcs.size());
  std::vector<Elements> pieces(channels);
  for (int c = 0; c < channels; ++c) pieces[c] = std::min(head, ceil_div(piece_count(call.count, channels, c), piece));
  std::vector<int> piece_of;
  auto ts = tree_transfers(p, gpus, tcs, call, piece, pieces, in_flight, &piece_of);
  const auto end = fluid_sim_end_times(ts, &p);
  PieceEnds out = piece_ends(ts, end, piece_of);
  out.latency_overlapped = in_flight > 1;
  return out;
}

std::pair<Elements, double> pieces_per_channel(const CollectiveCall& call, int channels, Elements piece) {
  const Elements elems = piece_count(call.count, channels, 0);
  const Elements k = ceil_div(elems, piece);
  return {k, static_cast<double>(elems - (k - 1) * piece) / static_cast<double>(std::min(piece, elems))};
}

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

const char* large_n_timed_by_name(LargeNTimedBy by) {
  switch (by) {
    case LargeNTimedBy::phases: return "phases";
    case LargeNTimedBy::replay: return "replay";
    case LargeNTimedBy::extrapolation: return "extrapolation";
    case LargeNTimedBy::estimate: return "estimate";
  }
  return "?";
}

}  // namespace dpt::sim
