// The large-N formulation's entry points (see dispatch.hpp).
#include "sim/collectives/large_n/dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>

#include "sim/collectives/collective_exact.hpp"
#include "sim/collectives/large_n/estimate.hpp"
#include "sim/collectives/large_n/phases.hpp"

namespace sg4 = simgrid::s4u;

namespace dpt::sim {

namespace {
// The call as its protocol puts it on the wire (LL and LL128 lines carry flag bytes).
CollectiveCall wire_call(const CollectiveCall& call, double wire_factor) {
  CollectiveCall w = call;
  w.count = static_cast<Elements>(std::llround(static_cast<double>(call.count) * wire_factor));
  return w;
}

Seconds time_large_n(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& data_call,
                     const CollectivePlan& plan, const CollectiveSettings& settings, LargeNMethod method,
                     LargeNTimedBy& by) {
  by = LargeNTimedBy::phases;
  const CollectiveCall call = wire_call(data_call, plan.wire_factor);
  const BytesPerSecond cap = plan.flow_cap_bytes_per_s;
  const int n = static_cast<int>(rank_gpus.size());
  if (n == 1 || call.count == 0) return 0;
  const Elements piece = pipeline_piece_elements(settings, call.element_bytes);
  const int channels = plan.channels;
  switch (plan.algorithm) {
    case CollectiveAlgorithm::ring: {
      const auto orders = ring_orders(p, rank_gpus, channels);
      if (call.op == CollectiveOp::broadcast || call.op == CollectiveOp::reduce) {
        const auto chains = chain_orders(orders, call);
        const auto [k, last_ratio] = pieces_per_channel(call, channels, piece);
        const auto t = replay_or_extrapolate(
            method, n, k, last_ratio, static_cast<Elements>(channels) * (n - 1), kLargeNReplayMaxChainTransfers,
            kLargeNExtrapolateMaxChainTransfers,
            [&](Elements head) { return chain_replay(p, rank_gpus, chains, call, piece, head); }, by);
        return t ? *t : chain_time(p, rank_gpus, chains, call, piece);
      }
      const int steps = call.op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1;
      const Bytes chunk = ceil_div(call.count, static_cast<Elements>(n) * channels) * call.element_bytes;
      return steps * phase_time(p, ring_step_flows(p, rank_gpus, orders, chunk, cap));
    }
    case CollectiveAlgorithm::tree: {
      const auto tcs = tree_channels(p, rank_gpus, channels);
      const auto [pieces, last_ratio] = pieces_per_channel(call, channels, piece);
      const auto replayed = replay_or_extrapolate(
          method, n, pieces, last_ratio, 2 * static_cast<Elements>(channels) * (n - 1), kLargeNReplayMaxTreeTransfers,
          kLargeNExtrapolateMaxTreeTransfers,
          [&](Elements head) { return tree_replay(p, rank_gpus, tcs, call, piece, head); }, by);
      return replayed ? *replayed : tree_estimate(p, rank_gpus, tcs, call, piece);
    }
    case CollectiveAlgorithm::nvls: {
      // Every GPU's piece up to the switch, then the reduced piece down to every GPU.
      sg4::Host* sw = p.nvswitch_host(p.node_of_gpu(rank_gpus[0]));
      const Elements k = ceil_div(call.count, piece);
      auto timing = [&](Bytes piece_bytes) {
        std::vector<PhaseFlow> ups, downs;
        for (int r = 0; r < n; ++r) {
          ups.push_back({host_of(p, rank_gpus, r), sw, piece_bytes, cap});
          downs.push_back({sw, host_of(p, rank_gpus, r), piece_bytes, cap});
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
  const Seconds t = time_large_n(p, rank_gpus, call, plan, settings, method, by);
  if (timed_by) *timed_by = by;
  return t;
}

LinkBytes large_n_traffic(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& data_call,
                          const CollectivePlan& plan, const CollectiveSettings& settings) {
  (void)settings;
  const CollectiveCall call = wire_call(data_call, plan.wire_factor);
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
        const auto chains = chain_orders(orders, call);
        for (int ch = 0; ch < c; ++ch) {
          const auto& o = chains[ch];
          const Bytes bytes = piece_count(call.count, c, ch) * call.element_bytes;
          for (int q = 0; q + 1 < n; ++q) acc.account(h(o[q]), h(o[q + 1]), bytes);
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
