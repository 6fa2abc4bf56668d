// The large-N formulation's entry points (see dispatch.hpp).
#include "sim/collectives/large_n/dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/collective_exact.hpp"
#include "sim/collectives/large_n/estimate.hpp"
#include "sim/collectives/large_n/phases.hpp"

namespace sg4 = simgrid::s4u;

namespace dpt::sim {

namespace {

// Per-link crossings of a traffic pattern, per channel: the pattern's bytes on a link are
// the sum over channels of that channel's bytes per transfer times its crossings there.
struct TrafficShape {
  std::vector<int> links;  // by Platform::link_id
  std::vector<std::vector<std::int32_t>> crossings;  // [channel][link index]
  std::vector<Bytes> total_crossings;                // [link index]: summed over channels
};

// A ring step's flows folded by what their times depend on: flows whose routes have the
// same latency and the same (flows on the link, bandwidth) on every link last equally
// long in a phase, so one of each class stands for all. With the per-link flow counts,
// a step of any chunk size is timed from a few flows instead of N x C.
struct RingStepShape {
  std::vector<PhaseFlow> representatives;   // one per class, bytes unset
  std::vector<int> flow_class;              // per flow of ring_step_flows (channel-major): its class
  std::vector<std::pair<int, Bytes>> counts;  // flows on each link of theirs (by link id)
};

// What a call's ranks and channel count determine, kept across calls: ring orders and
// their step shape, tree channels and their estimator, and traffic shapes by (algorithm,
// op, root). DDP's calls differ in count only, so at 32,768 ranks building these per call
// was most of a prediction's time.
struct RankSet {
  std::optional<std::vector<std::vector<int>>> orders;
  std::optional<RingStepShape> ring_step;
  std::unique_ptr<TreeEstimator> tree;
  std::unique_ptr<TreeEstimator> nvls_tree;
  // Every channel of each (the estimators may fold them: see tree_of).
  std::optional<std::vector<TreeChannel>> tree_channels, nvls_tree_channels;
  std::map<std::pair<int, int>, ChainLinks> chains;  // by (op, root)
  std::map<std::tuple<int, int, int>, TrafficShape> traffic;
};

// The cache of one platform (a process builds one: one SimGrid engine per process);
// a different platform, told by its address, first GPU host and GPU count, empties it.
struct RankSetCache {
  std::mutex mutex;
  const Platform* platform = nullptr;
  const sg4::Host* first_gpu = nullptr;
  int gpu_count = 0;
  std::map<std::pair<int, std::vector<int>>, RankSet> sets;  // by (channels, rank GPUs)
};

RankSetCache& rank_set_cache() {
  static RankSetCache cache;
  return cache;
}

// The cached entry for (p, rank_gpus, channels); call with the cache's mutex held.
RankSet& rank_set(RankSetCache& cache, const Platform& p, const std::vector<int>& rank_gpus, int channels) {
  if (cache.platform != &p || cache.first_gpu != p.gpu_host(0) || cache.gpu_count != p.gpu_count()) {
    cache.sets.clear();
    cache.platform = &p, cache.first_gpu = p.gpu_host(0), cache.gpu_count = p.gpu_count();
  }
  constexpr size_t kMaxRankSets = 16;  // a process times a few groups; bound the memory all the same
  // Planted: the channel count left out of the key (a call then gets another count's orders).
  auto key = std::make_pair(fault_active(Fault::large_n_cache_ignores_channels) ? 0 : channels, rank_gpus);
  auto it = cache.sets.find(key);
  if (it == cache.sets.end()) {
    if (cache.sets.size() >= kMaxRankSets) cache.sets.clear();
    it = cache.sets.try_emplace(std::move(key)).first;
  }
  return it->second;
}

const std::vector<std::vector<int>>& orders_of(RankSet& set, const Platform& p, const std::vector<int>& rank_gpus,
                                               int channels) {
  if (!set.orders) set.orders = ring_orders(p, rank_gpus, channels);
  return *set.orders;
}

// A ring collective of `steps` steps with chunks of `chunk_bytes`: every hop's drain under
// the step's load (flow_drain_with of its class representative, every link loaded as all
// the step's flows load it: the count times the chunk, the same double phase_load sums),
// then each channel's ring_channel_path; equal to ring_time_by_phases.
Seconds ring_time(RankSet& set, const Platform& p, const std::vector<int>& rank_gpus, int channels,
                  Bytes chunk_bytes, BytesPerSecond cap_bytes_per_s, Elements steps) {
  const size_t n = rank_gpus.size();
  if (!set.ring_step) {
    const auto flows = ring_step_flows(p, rank_gpus, orders_of(set, p, rank_gpus, channels), 0);
    std::unordered_map<int, Bytes> count;
    for (const auto& f : flows)
      for (const int id : f.route->link_ids) ++count[id];
    RingStepShape shape;
    std::map<std::pair<double, std::vector<std::pair<Bytes, double>>>, int> classes;
    std::unordered_map<int, Bytes> used;
    for (const auto& f : flows) {
      const RouteInfo& r = *f.route;
      std::vector<std::pair<Bytes, double>> signature;
      for (const int id : r.link_ids) signature.emplace_back(count.at(id), p.link_bandwidth(id));
      std::sort(signature.begin(), signature.end());
      const auto [it, added] =
          classes.try_emplace({r.latency_s, std::move(signature)}, static_cast<int>(shape.representatives.size()));
      shape.flow_class.push_back(it->second);
      if (!added) continue;
      shape.representatives.push_back(f);
      for (const int id : r.link_ids) used.emplace(id, count.at(id));
    }
    shape.counts.assign(used.begin(), used.end());
    set.ring_step = std::move(shape);
  }
  const RingStepShape& shape = *set.ring_step;
  LinkLoad load;
  for (const auto& [l, c] : shape.counts) load[l] = static_cast<double>(chunk_bytes) * static_cast<double>(c);
  std::vector<Seconds> class_lat, class_drain;
  for (PhaseFlow f : shape.representatives) {
    f.bytes = chunk_bytes;
    f.cap_bytes_per_s = cap_bytes_per_s;
    class_lat.push_back(f.route->latency_s);
    class_drain.push_back(flow_drain_with(p, f, load));
  }
  Seconds t = 0;
  std::vector<Seconds> lat(n), drain(n);
  for (size_t c = 0; c < static_cast<size_t>(channels); ++c) {
    for (size_t i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(shape.flow_class[c * n + i]);
      lat[i] = class_lat[k];
      drain[i] = class_drain[k];
    }
    t = std::max(t, ring_channel_path(lat, drain, steps));
  }
  return t;
}

// The tree estimator of the tree or NVLS-tree algorithm (their channels differ, and so
// their cache entries: a DDP step on NVLink SHARP nodes that runs its small buckets as tree
// and the rest as NVLS-tree keeps both), rail-folded where that applies (estimate.hpp):
// channels 0 and 1 standing for every channel.
TreeEstimator& tree_of(RankSet& set, const Platform& p, const std::vector<int>& rank_gpus, int channels,
                       CollectiveAlgorithm a, int in_flight) {
  const bool nvls = a == CollectiveAlgorithm::nvls_tree;
  auto& kept = nvls ? set.nvls_tree : set.tree;
  if (!kept || kept->in_flight() != in_flight) {
    const RailFold fold = (nvls ? nvls_tree_rail_fold : tree_rail_fold)(p, rank_gpus, channels);
    const int built = fold.copies > 1 ? 2 : channels;
    kept = std::make_unique<TreeEstimator>(
        p, rank_gpus, nvls ? nvls_tree_channels(p, rank_gpus, built) : tree_channels(p, rank_gpus, built),
        TreeEstimator::kHeadPieces, fold, in_flight);
  }
  return *kept;
}

// Every channel of the tree or NVLS-tree algorithm (what replays and traffic need).
const std::vector<TreeChannel>& tree_channels_of(RankSet& set, const Platform& p, const std::vector<int>& rank_gpus,
                                                 int channels, CollectiveAlgorithm a) {
  auto& kept = a == CollectiveAlgorithm::nvls_tree ? set.nvls_tree_channels : set.tree_channels;
  if (!kept)
    kept = a == CollectiveAlgorithm::nvls_tree ? nvls_tree_channels(p, rank_gpus, channels)
                                               : tree_channels(p, rank_gpus, channels);
  return *kept;
}

// The shape of transfers given per channel as (from, to) host pairs.
TrafficShape traffic_shape(const Platform& p, const std::vector<std::vector<std::pair<int, int>>>& per_channel) {
  TrafficShape shape;
  LinkIndexer index(&p);  // first-met order, as shape.links lists them
  shape.crossings.resize(per_channel.size());
  std::vector<int> ids;
  for (size_t c = 0; c < per_channel.size(); ++c)
    for (const auto& [a, b] : per_channel[c]) {
      p.gpu_route_link_ids(a, b, ids);
      for (size_t j = 0; j < ids.size(); ++j) {
        const auto [i, added] = index.index(p.link_by_id(ids[j]), ids[j]);
        if (added) {
          shape.links.push_back(ids[j]);
          for (auto& row : shape.crossings) row.push_back(0);
        }
        ++shape.crossings[c][static_cast<size_t>(i)];
      }
    }
  shape.total_crossings.assign(shape.links.size(), 0);
  for (const auto& row : shape.crossings)
    for (size_t i = 0; i < row.size(); ++i) shape.total_crossings[i] += row[i];
  return shape;
}

LinkBytes traffic_of(const TrafficShape& shape, const std::vector<Bytes>& bytes_per_channel) {
  LinkBytes out;
  out.reserve(shape.links.size());
  if (std::adjacent_find(bytes_per_channel.begin(), bytes_per_channel.end(), std::not_equal_to<>()) ==
      bytes_per_channel.end()) {
    // Every channel moves the same bytes per transfer (ring steps; a count the channels
    // divide): the bytes times the crossings of all channels, the same integers.
    const Bytes b = bytes_per_channel.empty() ? 0 : bytes_per_channel.front();
    for (size_t i = 0; i < shape.links.size(); ++i) out.emplace_back(shape.links[i], b * shape.total_crossings[i]);
    return out;
  }
  for (size_t i = 0; i < shape.links.size(); ++i) {
    Bytes b = 0;
    for (size_t c = 0; c < shape.crossings.size(); ++c) b += bytes_per_channel[c] * Bytes{shape.crossings[c][i]};
    out.emplace_back(shape.links[i], b);
  }
  return out;
}

// The call as its protocol puts it on the wire (LL and LL128 lines carry flag bytes).
CollectiveCall wire_call(const CollectiveCall& call, double wire_factor) {
  CollectiveCall w = call;
  w.count = static_cast<Elements>(std::llround(static_cast<double>(call.count) * wire_factor));
  return w;
}

Seconds time_large_n(RankSet& set, const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& data_call,
                     const CollectivePlan& plan, const CollectiveSettings& settings, LargeNMethod method,
                     LargeNTimedBy& by) {
  by = LargeNTimedBy::phases;
  const CollectiveCall call = wire_call(data_call, plan.wire_factor);
  const BytesPerSecond cap = plan.flow_cap_bytes_per_s;
  const int n = static_cast<int>(rank_gpus.size());
  if (n == 1 || call.count == 0) return 0;
  const Elements piece = pipeline_piece_elements(plan, settings, call.element_bytes, plan.wire_factor);
  const int channels = plan.channels;
  switch (plan.algorithm) {
    case CollectiveAlgorithm::ring: {
      const auto& orders = orders_of(set, p, rank_gpus, channels);
      if (call.op == CollectiveOp::broadcast || call.op == CollectiveOp::reduce) {
        const auto chains = chain_orders(orders, call);
        const auto [k, last_ratio] = pieces_per_channel(call, channels, piece);
        const auto t = replay_or_extrapolate(
            method, n, k, last_ratio, static_cast<Elements>(channels) * (n - 1), kLargeNReplayMaxChainTransfers,
            kLargeNExtrapolateMaxChainTransfers,
            [&](Elements head) { return chain_replay(p, rank_gpus, chains, call, piece, head); }, by);
        if (t) return *t;
        auto it = set.chains.find({static_cast<int>(call.op), call.root});
        if (it == set.chains.end()) {
          if (set.chains.size() >= 4) set.chains.clear();  // a few roots at a time: each holds C (n - 1) hops
          it = set.chains.emplace(std::make_pair(static_cast<int>(call.op), call.root), chain_links(p, rank_gpus, chains)).first;
        }
        return chain_time(it->second, call, piece);
      }
      const int steps = call.op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1;
      const Bytes chunk = ceil_div(call.count, static_cast<Elements>(n) * channels) * call.element_bytes;
      return ring_time(set, p, rank_gpus, channels, chunk, cap, steps);
    }
    case CollectiveAlgorithm::tree:
    case CollectiveAlgorithm::nvls_tree: {
      const auto& tcs = tree_channels_of(set, p, rank_gpus, channels, plan.algorithm);
      const auto [pieces, last_ratio] = pieces_per_channel(call, channels, piece);
      const auto replayed = replay_or_extrapolate(
          method, n, pieces, last_ratio, 2 * static_cast<Elements>(channels) * (n - 1), kLargeNReplayMaxTreeTransfers,
          kLargeNExtrapolateMaxTreeTransfers,
          [&](Elements head) { return tree_replay(p, rank_gpus, tcs, call, piece, head, plan.pieces_in_flight); }, by);
      return replayed ? *replayed
                      : tree_of(set, p, rank_gpus, channels, plan.algorithm, plan.pieces_in_flight).estimate(call, piece);
    }
    case CollectiveAlgorithm::nvls: {
      // Every GPU's piece up to the switch, then the reduced piece down to every GPU.
      sg4::Host* sw = p.nvswitch_host(p.node_of_gpu(rank_gpus[0]));
      const Elements k = ceil_div(call.count, piece);
      auto timing = [&](Bytes piece_bytes) {
        std::vector<PhaseFlow> ups, downs;
        for (int r = 0; r < n; ++r) {
          ups.push_back({&p.route(host_of(p, rank_gpus, r), sw), piece_bytes, cap});
          downs.push_back({&p.route(sw, host_of(p, rank_gpus, r)), piece_bytes, cap});
        }
        std::vector<PhaseFlow> flows = ups;
        flows.insert(flows.end(), downs.begin(), downs.end());
        const LinkLoad load = phase_load(p, flows);
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
  RankSetCache& cache = rank_set_cache();
  const std::lock_guard<std::mutex> lock(cache.mutex);
  RankSet& set = rank_set(cache, p, rank_gpus, plan.channels);
  const Seconds t = time_large_n(set, p, rank_gpus, call, plan, settings, method, by);
  if (timed_by) *timed_by = by;
  return t;
}

LinkBytes large_n_traffic(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& data_call,
                          const CollectivePlan& plan, const CollectiveSettings& settings) {
  (void)settings;
  const CollectiveCall call = wire_call(data_call, plan.wire_factor);
  const int n = static_cast<int>(rank_gpus.size());
  if (n == 1 || call.count == 0) return {};
  const Bytes total = call.bytes();
  const int c = plan.channels;
  auto h = [&](int r) -> const sg4::Host* { return host_of(p, rank_gpus, r); };
  auto g = [&](int r) { return rank_gpus[static_cast<size_t>(r)]; };
  using Transfers = std::vector<std::vector<std::pair<int, int>>>;  // GPU to GPU, per channel
  // Each channel's share of a call cut per channel (piece_count).
  std::vector<Bytes> per_channel(static_cast<size_t>(c));
  for (int ch = 0; ch < c; ++ch) per_channel[ch] = piece_count(call.count, c, ch) * call.element_bytes;
  RankSetCache& cache = rank_set_cache();
  const std::lock_guard<std::mutex> lock(cache.mutex);
  RankSet& set = rank_set(cache, p, rank_gpus, c);
  const bool chain = call.op == CollectiveOp::broadcast || call.op == CollectiveOp::reduce;
  // Ring all_reduce, reduce_scatter and all_gather cross the same hops whatever the op.
  const int op_key = plan.algorithm == CollectiveAlgorithm::ring && !chain ? -1 : static_cast<int>(call.op);
  const auto key = std::make_tuple(static_cast<int>(plan.algorithm), op_key, chain ? call.root : -1);
  auto shape = set.traffic.find(key);
  if (plan.algorithm != CollectiveAlgorithm::nvls && shape == set.traffic.end()) {
    Transfers t(static_cast<size_t>(c));
    if (plan.algorithm == CollectiveAlgorithm::ring) {
      const auto& orders = orders_of(set, p, rank_gpus, c);
      if (chain) {
        const auto chains = chain_orders(orders, call);
        for (int ch = 0; ch < c; ++ch)
          for (int q = 0; q + 1 < n; ++q) t[ch].emplace_back(g(chains[ch][q]), g(chains[ch][q + 1]));
      } else {
        for (int ch = 0; ch < c; ++ch)
          for (int i = 0; i < n; ++i) t[ch].emplace_back(g(orders[ch][i]), g(orders[ch][(i + 1) % n]));
      }
    } else {
      const auto& tcs = tree_channels_of(set, p, rank_gpus, c, plan.algorithm);
      for (int ch = 0; ch < c; ++ch)
        for (int r = 0; r < n; ++r)
          if (tcs[ch].parent[r] >= 0) {
            t[ch].emplace_back(g(r), g(tcs[ch].parent[r]));
            t[ch].emplace_back(g(tcs[ch].parent[r]), g(r));
          }
    }
    shape = set.traffic.emplace(key, traffic_shape(p, t)).first;
  }
  switch (plan.algorithm) {
    case CollectiveAlgorithm::ring: {
      if (chain) return traffic_of(shape->second, per_channel);
      const int steps = call.op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1;
      // Each hop carries `steps` chunks of about total / (N C) bytes.
      const Bytes per_hop = static_cast<Bytes>(static_cast<double>(total) * steps / (static_cast<double>(n) * c));
      return traffic_of(shape->second, std::vector<Bytes>(static_cast<size_t>(c), per_hop));
    }
    case CollectiveAlgorithm::tree:
    case CollectiveAlgorithm::nvls_tree:
      return traffic_of(shape->second, per_channel);
    case CollectiveAlgorithm::nvls: {
      std::unordered_map<int, Bytes> on;  // by link id
      const sg4::Host* sw = p.nvswitch_host(p.node_of_gpu(rank_gpus[0]));
      for (int r = 0; r < n; ++r) {
        for (const int id : p.route(h(r), sw).link_ids) on[id] += total;
        for (const int id : p.route(sw, h(r)).link_ids) on[id] += total;
      }
      // Order does not matter: link_usage() merges and sorts by name when asked.
      return LinkBytes(on.begin(), on.end());
    }
  }
  return {};
}

void account_large_n(Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                     const CollectivePlan& plan, const CollectiveSettings& settings) {
  p.account_pattern(std::make_shared<const LinkBytes>(large_n_traffic(p, rank_gpus, call, plan, settings)));
}

}  // namespace dpt::sim
