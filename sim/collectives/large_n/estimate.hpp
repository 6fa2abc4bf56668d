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

// The tree estimate for one set of ranks and channels, kept across calls: one head graph
// of `head_pieces` pieces per channel is built, laid out piece by piece (every channel's
// piece 0, then piece 1, ...), so the head of a call of fewer pieces is the graph's
// prefix: its transfers wait only on the same or earlier pieces, and each link's sweep
// stops at the prefix. The steady-state period reads piece 0 (every edge up and down).
// Head times and periods are memoised by their piece sizes, which calls of different
// counts share (every call of more than 3 pieces per channel has the same head).
// Gives what tree_estimate, which builds exactly the head a call needs, gives, bit for bit.
class TreeEstimator {
 public:
  static constexpr int kHeadPieces = 3;  // the most pieces a head places (see above)
  // `rail_copies` > 1: the rail fold of NVLS-tree (nvls_tree_rail_copies): `tcs` are its
  // channels 0 and 1 (head 0), standing for rail_copies copies turned by one rail each.
  // A GPU's or NIC's link is then loaded by the copies as all links of its kind on its
  // node are by these channels together (times rail_copies / links of that kind per node),
  // a link outside the nodes (the fabric) rail_copies times as much; the call is cut into
  // rail_copies x tcs.size() channels. Equal to the estimate over every channel up to
  // rounding where the platform looks alike from every rail (nvls_tree_test).
  TreeEstimator(const Platform& p, std::vector<int> gpus, std::vector<TreeChannel> tcs,
                int head_pieces = kHeadPieces, int rail_copies = 1);
  ~TreeEstimator();
  Seconds estimate(const CollectiveCall& call, Elements piece);
  const std::vector<TreeChannel>& channels() const { return tcs_; }

 private:
  struct Head;  // the first head_pieces pieces' transfers (see estimate.cpp)
  static std::unique_ptr<Head> build_head(const Platform& p, const std::vector<int>& gpus,
                                          const std::vector<TreeChannel>& tcs, int m, int rail_copies);
  const Head& head();
  Seconds head_time(const std::vector<Bytes>& pieces);
  Seconds period(Bytes piece_bytes);
  const Platform& p_;
  std::vector<int> gpus_;
  std::vector<TreeChannel> tcs_;
  int head_pieces_;
  int rail_copies_;
  std::unique_ptr<Head> head_;
  std::vector<double> period_count_;  // per link id: piece 0's transfers on it
  std::map<std::vector<Bytes>, Seconds> head_times_;
  std::map<Bytes, Seconds> periods_;
};

// The rail fold's copies for an NVLS-tree over `gpus` (see TreeEstimator), or 1 when it
// does not apply: it needs every node's ranks to be all its GPUs, each the head of its own
// NIC (GPU h on NIC h), and the routes of rail 0 (a GPU to the head through the switch, a
// head to the same head of another node) to cross only GPU, NIC and fabric links, alike on
// every rail (same links' bandwidths and latencies).
int nvls_tree_rail_copies(const Platform& p, const std::vector<int>& gpus);

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
