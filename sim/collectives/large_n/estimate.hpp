// Estimates for chains and trees too large to replay: closed forms iterated over link
// sharing, far cheaper than the fluid simulation and less exact (their property tests
// state how far they may be from the exact formulation).
//
// Tree: the first min(k, 3) pieces of every channel are placed in time transfer by
// transfer (after the transfers they wait for), each taking its latency plus its bytes
// times its share of its busiest link; the share is the average number of transfers on
// that link during it, iterated from unshared durations. Each further piece adds one
// steady-state period, in which every edge of every channel is busy at once.
//
// Chain: each channel is a flow shop; with a constant duration t_j per piece, piece i
// leaves hop j at S_j + i M_j (S_j the sum, M_j the maximum of t_0..t_j). A hop's
// duration is its latency plus its busiest link's drain under the pieces of every hop
// whose busy interval overlaps its own, iterated as the tree's head is. It drains each
// link at its full load where max-min sharing would give flows bottlenecked elsewhere
// less, so it overestimates.
//
// The loads on shared links are swept (link_sweep.hpp), so a call costs
// O(iterations x transfers x links per route x log), not the square of a link's
// transfers.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "engine/core/units.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/collectives/large_n/link_sweep.hpp"
#include "sim/net/platform.hpp"

namespace dpt::sim {

// A tree all-reduce over channels `tcs` in pieces of `piece` elements.
Seconds tree_estimate(const Platform& p, const std::vector<int>& gpus, const std::vector<TreeChannel>& tcs,
                      const CollectiveCall& call, Elements piece);

// The tree estimate for one set of ranks and channels, kept across calls: the head's
// transfer graph and link incidence are built once per head length (1 to 3 pieces), and
// head times and periods are memoised by their piece sizes, which calls of different
// counts share (every call of more than 3 pieces per channel has the same head).
// Gives what tree_estimate gives, bit for bit.
class TreeEstimator {
 public:
  TreeEstimator(const Platform& p, std::vector<int> gpus, std::vector<TreeChannel> tcs);
  ~TreeEstimator();
  Seconds estimate(const CollectiveCall& call, Elements piece);
  const std::vector<TreeChannel>& channels() const { return tcs_; }

 private:
  struct Head;    // the first m pieces' transfers (see estimate.cpp)
  struct Period;  // every edge up and down at once
  static std::unique_ptr<Head> build_head(const Platform& p, const std::vector<int>& gpus,
                                          const std::vector<TreeChannel>& tcs, int m);
  Seconds head_time(const std::vector<Bytes>& pieces);
  Seconds period(Bytes piece_bytes);
  const Platform& p_;
  std::vector<int> gpus_;
  std::vector<TreeChannel> tcs_;
  std::map<int, std::unique_ptr<Head>> heads_;  // by piece count
  std::unique_ptr<Period> period_;
  std::map<std::vector<Bytes>, Seconds> head_times_;
  std::map<Bytes, Seconds> periods_;
};

// The hops of `chains` (hop j of channel c at c (n - 1) + j) and their links: what a
// chain's estimate needs besides the call, kept across calls with the same chains.
struct ChainLinks {
  int channels = 0;
  int hops = 0;  // per channel: n - 1
  std::vector<const RouteInfo*> routes;
  LinkIncidence links;
};
ChainLinks chain_links(const Platform& p, const std::vector<int>& gpus, const std::vector<std::vector<int>>& chains);

// A ring broadcast or reduce along `chains` (from chain_orders) in pieces of `piece`
// elements. Cost: O(iterations x C n x links per route x log).
Seconds chain_time(const Platform& p, const std::vector<int>& gpus, const std::vector<std::vector<int>>& chains,
                   const CollectiveCall& call, Elements piece);
// The same on the chains' links built before.
Seconds chain_time(const ChainLinks& chains, const CollectiveCall& call, Elements piece);

}  // namespace dpt::sim
