// Message-level collectives: see collective_exact.hpp and the algorithm notes in
// collectives.hpp.
#include "sim/collectives/collective_exact.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "sim/collectives/large_n/phases.hpp"

namespace sg4 = simgrid::s4u;

namespace dpt::sim {

namespace {

// Streams: which part of which algorithm a connection carries.
enum Stream : int { kRing = 0, kChain = 1, kTreeUp0 = 2, kTreeDown0 = 3, kNvlsUp = 6, kNvlsDown = 7 };  // tree: channel in the key
constexpr int kSwitch = -1;  // the NVSwitch as a connection end

void wait_all(std::vector<sg4::CommPtr>& comms) {
  for (auto& c : comms)
    if (c) c->wait();
  comms.clear();
}

Elements ceil_div(Elements a, Elements b) { return (a + b - 1) / b; }

}  // namespace

Elements pipeline_piece_elements(const CollectiveSettings& s, Bytes element_bytes) {
  return std::max<Elements>(1, s.pipeline_chunk_bytes / element_bytes);
}

Elements pipeline_piece_elements(const CollectivePlan& plan, const CollectiveSettings& s, Bytes element_bytes,
                                 double wire_factor) {
  if (plan.piece_bytes <= 0) return pipeline_piece_elements(s, element_bytes);
  const double wire_bytes = static_cast<double>(plan.piece_bytes) * wire_factor;
  return std::max<Elements>(1, static_cast<Elements>(wire_bytes / static_cast<double>(element_bytes)));
}

ExactTransport::Box& ExactTransport::box(const Key& key) {
  Box& b = boxes_[key];
  if (!b.posted) b.posted = sg4::Semaphore::create(0);
  return b;
}

sg4::CommPtr ExactTransport::send(const Key& key, sg4::Host* from, sg4::Host* to, Bytes n,
                                  Seconds arrives_not_before) {
  sg4::CommPtr comm = platform_.transfer_async(from, to, n);
  Box& b = box(key);
  b.comms.emplace_back(comm, arrives_not_before);
  b.posted->release();
  return comm;
}

std::pair<sg4::CommPtr, Seconds> ExactTransport::recv_bounded(const Key& key) {
  Box* b = &box(key);
  b->posted->acquire();
  b = &boxes_.at(key);  // the map may have grown while this actor slept
  auto message = b->comms.front();
  b->comms.pop_front();
  // Each connection has one receiver, so an empty box has nobody waiting on it.
  if (b->comms.empty()) boxes_.erase(key);
  return message;
}

sg4::CommPtr ExactTransport::recv(const Key& key) { return recv_bounded(key).first; }

const std::vector<std::vector<int>>& ExactTransport::ring_orders_cached(const std::vector<int>& rank_gpus,
                                                                        int channels) {
  auto it = orders_.find(channels);
  if (it == orders_.end()) it = orders_.emplace(channels, ring_orders(platform_, rank_gpus, channels)).first;
  return it->second;
}

const ExactTransport::RingHops& ExactTransport::ring_hops(const std::vector<int>& rank_gpus, int channels,
                                                          Bytes chunk_wire_bytes, BytesPerSecond cap_bytes_per_s) {
  const auto key = std::make_tuple(channels, chunk_wire_bytes, cap_bytes_per_s);
  auto it = hops_.find(key);
  if (it != hops_.end()) return it->second;
  if (hops_.size() >= 64) hops_.clear();  // a step's bucket sizes at a time
  const auto& orders = ring_orders_cached(rank_gpus, channels);
  const auto flows = ring_step_flows(platform_, rank_gpus, orders, chunk_wire_bytes, cap_bytes_per_s);
  const LinkLoad load = phase_load(platform_, flows);
  const size_t n = rank_gpus.size();
  RingHops hops;
  hops.drain.assign(orders.size(), std::vector<Seconds>(n));
  hops.alike = true;
  for (size_t c = 0; c < orders.size(); ++c)
    for (size_t i = 0; i < n; ++i) {
      const PhaseFlow& f = flows[c * n + i];
      hops.drain[c][i] = flow_drain_with(platform_, f, load);
      const PhaseFlow& first = flows.front();
      hops.alike = hops.alike && f.route->latency_s == first.route->latency_s && hops.drain[c][i] == hops.drain[0][0];
    }
  return hops_.emplace(key, std::move(hops)).first->second;
}

std::vector<std::vector<int>> node_chains(const Platform& p, const std::vector<int>& rank_gpus) {
  const auto order = ring_orders(p, rank_gpus, 1)[0];
  std::vector<std::vector<int>> chains;
  int last_node = -1;
  for (int r : order) {
    const int node = p.node_of_gpu(rank_gpus[r]);
    if (node != last_node) chains.emplace_back();
    chains.back().push_back(r);
    last_node = node;
  }
  return chains;
}

namespace {

struct Ctx {
  ExactTransport& t;
  Platform& p;
  const std::vector<int>& gpus;
  int call;
  double wire_factor = 1.0;           // protocol's wire bytes per data byte
  BytesPerSecond cap_bytes_per_s = 0;  // per-flow rate bound (0: none)
  sg4::Host* host(int rank) const { return rank == kSwitch ? nullptr : p.gpu_host(gpus[rank]); }
  // At least one byte: NCCL sends no empty chunk, and SimGrid serialises empty comms.
  Bytes wire(Bytes data) const {
    return std::max<Bytes>(1, static_cast<Bytes>(std::llround(static_cast<double>(data) * wire_factor)));
  }
  // Sends `data` bytes as the protocol puts them on the wire.
  sg4::CommPtr send(const ExactTransport::Key& key, sg4::Host* from, sg4::Host* to, Bytes data,
                    Seconds arrives_not_before = 0) const {
    return t.send(key, from, to, wire(data), arrives_not_before);
  }

  // When a flow of `data` bytes from `from` to `to` started at `t0` may end at the earliest
  // under the flow bound: its route latency plus its wire bytes at the bound (SimGrid 3.32
  // ignores a comm's own rate bound under TCP-gamma 0, so the bound is kept here, as the
  // large-N phase model keeps it). t0 when there is no bound.
  Seconds bound_end(Seconds t0, sg4::Host* from, sg4::Host* to, Bytes data) const {
    if (cap_bytes_per_s <= 0 || data == 0) return t0;
    return t0 + p.route(from, to).latency_s + static_cast<double>(wire(data)) / cap_bytes_per_s;
  }
};

// The steps of `chs` (channels of one rank) kept in step with one another: each step waits
// for the chunks of the step before on every one of them, then sends on each, a hop's drain
// after its previous send (`spacing`, per channel).
void ring_channels(Ctx& c, int rank, const CollectiveCall& call, int channels, const std::vector<int>& chs,
                   const std::vector<std::vector<int>>& orders, const std::vector<std::vector<Seconds>>& drain) {
  const int n = static_cast<int>(c.gpus.size());
  const int steps = call.op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1;
  std::vector<int> pos, next, prev;
  std::vector<Seconds> spacing;
  for (const int ch : chs) {
    const auto& o = orders[static_cast<size_t>(ch)];
    pos.push_back(static_cast<int>(std::find(o.begin(), o.end(), rank) - o.begin()));
    next.push_back(o[(pos.back() + 1) % n]);
    prev.push_back(o[(pos.back() + n - 1) % n]);
    spacing.push_back(drain[static_cast<size_t>(ch)][static_cast<size_t>(pos.back())]);
  }
  std::vector<sg4::CommPtr> sends;
  std::vector<std::pair<sg4::CommPtr, Seconds>> arriving;  // the last step's chunks from the predecessors
  auto wait_arrivals = [&] {
    Seconds arrived = 0;
    for (auto& [comm, not_before] : arriving) {
      comm->wait();
      arrived = std::max(arrived, not_before);
    }
    arriving.clear();
    if (arrived > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(arrived);
  };
  Seconds sender_free = sg4::Engine::get_clock();  // when the previous sends have left
  for (int s = 0; s < steps; ++s) {
    wait_arrivals();  // step s forwards (reduced) what step s - 1 brought
    if (sender_free > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(sender_free);
    const Seconds t0 = sg4::Engine::get_clock();
    for (size_t k = 0; k < chs.size(); ++k) {
      // Chunk sent at step s by the rank at ring position q (reduce-scatter, then all-gather).
      int chunk;
      if (call.op == CollectiveOp::all_gather) chunk = pos[k] - s;
      else if (s < n - 1) chunk = pos[k] - s;
      else chunk = pos[k] + 1 - (s - (n - 1));
      chunk = ((chunk % n) + n) % n;
      const Bytes bytes =
          piece_count(call.count, static_cast<Elements>(n) * channels, chs[k] * n + chunk) * call.element_bytes;
      sends.push_back(c.send({c.call, kRing, rank, next[k], chs[k]}, c.host(rank), c.host(next[k]), bytes,
                             c.bound_end(t0, c.host(rank), c.host(next[k]), bytes)));
      sender_free = std::max(sender_free, t0 + spacing[k]);
    }
    for (size_t k = 0; k < chs.size(); ++k) arriving.push_back(c.t.recv_bounded({c.call, kRing, prev[k], rank, chs[k]}));
  }
  wait_arrivals();
  wait_all(sends);
}

// Ring reduce-scatter / all-gather / all-reduce: see collectives.hpp. Channels progress
// independently, as NCCL's do: one actor per channel. A rank forwards each step's chunk once
// it has arrived from its predecessor (NCCL's FIFO lets a sender run ahead of its sends'
// arrival): no step waits for the ring's slowest hop, so the route latencies paid are those
// along the path a chunk travels. A channel's sends leave one after the other, as its FIFO
// puts them on the wire: the next no sooner than the previous one's drain at the channel's
// share of its links (ExactTransport::ring_hops; latency overlapped), since two of them
// started together would share the link and each arrive late. Where every hop of every
// channel is alike (a switched node) the channels keep step by symmetry, and this actor
// runs them all in step, without an actor each (a DDP step's hundreds of calls on 8 GPUs
// would start thousands). Under the flow bound a chunk counts as arrived no sooner than
// its route latency plus its wire bytes at the bound after it was sent.
void ring_steps(Ctx& c, int rank, const CollectiveCall& call, int channels) {
  const int n = static_cast<int>(c.gpus.size());
  if (n == 1) return;
  const auto& orders = c.t.ring_orders_cached(c.gpus, channels);
  const auto& hops = c.t.ring_hops(
      c.gpus, channels, c.wire(ceil_div(call.count, static_cast<Elements>(n) * channels) * call.element_bytes),
      c.cap_bytes_per_s);
  if (hops.alike) {
    std::vector<int> all(static_cast<size_t>(channels));
    for (int ch = 0; ch < channels; ++ch) all[static_cast<size_t>(ch)] = ch;
    ring_channels(c, rank, call, channels, all, orders, hops.drain);
    return;
  }
  // The helpers keep their own copies: the transport's caches may be cleared meanwhile.
  const auto shared_orders = std::make_shared<const std::vector<std::vector<int>>>(orders);
  const auto shared_drain = std::make_shared<const std::vector<std::vector<Seconds>>>(hops.drain);
  std::vector<sg4::ActorPtr> helpers;
  for (int ch = 0; ch < channels; ++ch) {
    Ctx ctx = c;
    const CollectiveCall one = call;
    helpers.push_back(sg4::Actor::create(fmt::format("ring{}-r{}", ch, rank), c.host(rank),
                                         [ctx, rank, one, channels, ch, shared_orders, shared_drain]() mutable {
                                           ring_channels(ctx, rank, one, channels, {ch}, *shared_orders,
                                                         *shared_drain);
                                         }));
  }
  for (auto& h : helpers) h->join();
}

// Pipelined chain along each channel's ring from the root (broadcast) or to it (reduce).
void chain_pipeline(Ctx& c, int rank, const CollectiveCall& call, int channels, Elements piece) {
  const int n = static_cast<int>(c.gpus.size());
  if (n == 1) return;
  const auto& orders = c.t.ring_orders_cached(c.gpus, channels);
  const bool to_root = call.op == CollectiveOp::reduce;
  std::vector<int> prev(channels, -1), next(channels, -1);
  std::vector<Elements> elems(channels);
  for (int ch = 0; ch < channels; ++ch) {
    // The chain starts at the root (broadcast) or ends there (reduce).
    const auto& o = orders[ch];
    const int root_pos = static_cast<int>(std::find(o.begin(), o.end(), call.root) - o.begin());
    const int me = static_cast<int>(std::find(o.begin(), o.end(), rank) - o.begin());
    const int q = to_root ? ((me - root_pos - 1) % n + n) % n : ((me - root_pos) % n + n) % n;
    if (q > 0) prev[ch] = o[((me - 1) % n + n) % n];
    if (q < n - 1) next[ch] = o[(me + 1) % n];
    elems[ch] = piece_count(call.count, channels, ch);
  }
  // One actor per channel: channels progress independently, as NCCL's do (one actor
  // serving all channels in turn would couple them and can deadlock crossing chains).
  std::vector<sg4::ActorPtr> helpers;
  for (int ch = 0; ch < channels; ++ch) {
    const Elements elems_ch = elems[ch];
    const Elements pieces = ceil_div(elems_ch, piece);
    const int from = prev[ch], to = next[ch];
    const Bytes eb = call.element_bytes;
    Ctx ctx = c;
    helpers.push_back(sg4::Actor::create(fmt::format("chain{}-r{}", ch, rank), c.host(rank),
                                         [ctx, rank, ch, from, to, pieces, piece, elems_ch, eb]() mutable {
                                           // A piece counts as arrived, and the channel's next may
                                           // leave, no sooner than the flow bound lets it (a chain
                                           // over SHM shares the host-staged rate: shape_flows).
                                           auto not_before = [](Seconds t) {
                                             if (t > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(t);
                                           };
                                           sg4::CommPtr last;
                                           Seconds last_bound = 0;
                                           for (Elements i = 0; i < pieces; ++i) {
                                             if (from >= 0) {
                                               auto [comm, bound] = ctx.t.recv_bounded({ctx.call, kChain, from, rank, ch});
                                               comm->wait();
                                               not_before(bound);
                                             }
                                             if (to < 0) continue;
                                             const Bytes bytes = std::min(piece, elems_ch - i * piece) * eb;
                                             if (last) {
                                               last->wait();
                                               not_before(last_bound);
                                             }
                                             last_bound = ctx.bound_end(sg4::Engine::get_clock(), ctx.host(rank),
                                                                        ctx.host(to), bytes);
                                             last = ctx.send({ctx.call, kChain, rank, to, ch}, ctx.host(rank),
                                                               ctx.host(to), bytes, last_bound);
                                           }
                                           if (last) {
                                             last->wait();
                                             not_before(last_bound);
                                           }
                                         }));
  }
  for (auto& h : helpers) h->join();
}

// Tree all-reduce over C channels (see collectives.hpp): per channel one actor reduces
// pieces up (children first, then to the parent) and one broadcasts them down.
void tree_all_reduce(Ctx& c, int rank, const CollectiveCall& call, const std::vector<TreeChannel>& trees,
                     Elements piece) {
  const int channels = static_cast<int>(trees.size());
  std::vector<sg4::ActorPtr> helpers;
  for (int ch = 0; ch < channels; ++ch) {
    const TreeChannel& tc = trees[ch];
    const int parent = tc.parent[rank];
    const std::vector<int> children = tc.children[rank];
    const Elements elems = piece_count(call.count, channels, ch);
    const Elements pieces = ceil_div(elems, piece);
    const Bytes eb = call.element_bytes;
    auto bytes_of = [=](Elements i) { return std::min(piece, elems - i * piece) * eb; };
    auto reduced = sg4::Semaphore::create(0);  // at the root: piece i reduced, ready to go down
    Ctx ctx = c;
    helpers.push_back(sg4::Actor::create(
        fmt::format("tree{}-up-r{}", ch, rank), c.host(rank),
        [ctx, rank, parent, children, pieces, bytes_of, reduced, ch]() mutable {
          sg4::CommPtr last;
          for (Elements i = 0; i < pieces; ++i) {
            for (int child : children) ctx.t.recv({ctx.call, kTreeUp0, child, rank, ch})->wait();
            if (parent < 0) {
              reduced->release();
              continue;
            }
            if (last) last->wait();
            last = ctx.send({ctx.call, kTreeUp0, rank, parent, ch}, ctx.host(rank), ctx.host(parent), bytes_of(i));
          }
          if (last) last->wait();
        }));
    helpers.push_back(sg4::Actor::create(
        fmt::format("tree{}-down-r{}", ch, rank), c.host(rank),
        [ctx, rank, parent, children, pieces, bytes_of, reduced, ch]() mutable {
          std::vector<sg4::CommPtr> last(children.size());
          for (Elements i = 0; i < pieces; ++i) {
            if (parent < 0) reduced->acquire();
            else ctx.t.recv({ctx.call, kTreeDown0, parent, rank, ch})->wait();
            for (size_t k = 0; k < children.size(); ++k) {
              if (last[k]) last[k]->wait();
              last[k] = ctx.send({ctx.call, kTreeDown0, rank, children[k], ch}, ctx.host(rank),
                                   ctx.host(children[k]), bytes_of(i));
            }
          }
          wait_all(last);
        }));
  }
  for (auto& h : helpers) h->join();
}

// NVLS all-reduce: every GPU to the switch, reduced there, multicast back (see collectives.hpp).
void nvls_all_reduce(Ctx& c, int rank, const CollectiveCall& call, Elements piece) {
  const int n = static_cast<int>(c.gpus.size());
  const int node = c.p.node_of_gpu(c.gpus[0]);
  sg4::Host* sw = c.p.nvswitch_host(node);
  const Elements pieces = ceil_div(call.count, piece);
  auto bytes_of = [=](Elements i) { return std::min(piece, call.count - i * piece) * call.element_bytes; };
  Ctx ctx = c;
  std::vector<sg4::ActorPtr> helpers;
  if (rank == 0) {
    helpers.push_back(sg4::Actor::create("nvls-switch", sw, [ctx, n, sw, pieces, bytes_of]() mutable {
      std::vector<sg4::CommPtr> last(n);
      for (Elements i = 0; i < pieces; ++i) {
        for (int r = 0; r < n; ++r) ctx.t.recv({ctx.call, kNvlsUp, r, kSwitch, 0})->wait();
        for (int r = 0; r < n; ++r) {
          if (last[r]) last[r]->wait();
          last[r] = ctx.send({ctx.call, kNvlsDown, kSwitch, r, 0}, sw, ctx.host(r), bytes_of(i));
        }
      }
      wait_all(last);
    }));
  }
  helpers.push_back(sg4::Actor::create(fmt::format("nvls-up-r{}", rank), c.host(rank), [ctx, rank, sw, pieces, bytes_of]() mutable {
    sg4::CommPtr last;
    Seconds not_before = 0;  // the previous piece's end under the flow bound
    for (Elements i = 0; i < pieces; ++i) {
      if (last) last->wait();
      if (not_before > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(not_before);
      // Pieces pipeline: the bound spaces them by their wire time, latency overlapped.
      not_before = sg4::Engine::get_clock() + static_cast<double>(ctx.wire(bytes_of(i))) /
                                                  std::max(ctx.cap_bytes_per_s, 1e-300) * (ctx.cap_bytes_per_s > 0);
      last = ctx.send({ctx.call, kNvlsUp, rank, kSwitch, 0}, ctx.host(rank), sw, bytes_of(i));
    }
    if (last) last->wait();
    if (not_before > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(not_before);
  }));
  for (Elements i = 0; i < pieces; ++i) c.t.recv({c.call, kNvlsDown, kSwitch, rank, 0})->wait();
  for (auto& h : helpers) h->join();
}

}  // namespace

void run_exact(ExactTransport& t, Platform& p, const std::vector<int>& rank_gpus, int rank, int call_index,
               const CollectiveCall& call, const CollectivePlan& plan, const CollectiveSettings& settings) {
  Ctx c{t, p, rank_gpus, call_index, plan.wire_factor, plan.flow_cap_bytes_per_s};
  // NCCL's latency beyond the route latency the schedule pays (see CollectivePlan).
  if (plan.extra_latency_s > 0) sg4::this_actor::sleep_for(plan.extra_latency_s);
  const Elements piece = pipeline_piece_elements(plan, settings, call.element_bytes);
  switch (plan.algorithm) {
    case CollectiveAlgorithm::ring:
      if (call.op == CollectiveOp::broadcast || call.op == CollectiveOp::reduce)
        chain_pipeline(c, rank, call, plan.channels, piece);
      else
        ring_steps(c, rank, call, plan.channels);
      return;
    case CollectiveAlgorithm::tree: tree_all_reduce(c, rank, call, tree_channels(p, rank_gpus, plan.channels), piece); return;
    case CollectiveAlgorithm::nvls_tree:
      tree_all_reduce(c, rank, call, nvls_tree_channels(p, rank_gpus, plan.channels), piece);
      return;
    case CollectiveAlgorithm::nvls:
      nvls_all_reduce(c, rank, call, piece);
      if (plan.trailing_stage_s > 0) sg4::this_actor::sleep_for(plan.trailing_stage_s);
      return;
  }
}

}  // namespace dpt::sim
