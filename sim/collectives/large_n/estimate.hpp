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

// A tree all-reduce over channels `tcs` in pieces of `piece` elements, `in_flight` pieces
// per hop (CollectivePlan::pieces_in_flight).
Seconds tree_estimate(const Platform& p, const std::vector<int>& gpus, const std::vector<TreeChannel>& tcs,
                      const CollectiveCall& call, Elements piece, int in_flight = 1);

// The tree estimate for one set of ranks and channels, kept across calls: one head graph
// of `head_pieces` pieces per channel is built, laid out piece by piece (every channel's
// piece 0, then piece 1, ...), so the head of a call of fewer pieces is the graph's
// prefix: its transfers wait only on the same or earlier pieces, and each link's sweep
// stops at the prefix. The steady-state period reads piece 0 (every edge up and down).
// Head times and periods are memoised by their piece sizes, which calls of different
// counts share (every call of more than 3 pieces per channel has the same head).
// Pipelined (pieces in flight > 1), a call of k > 3 pieces takes the larger of two
// bounds from a head of 2 full pieces placed once: the head plus k - 2 times its second
// piece's increment (at most the period), and the time the period's busiest link needs
// to carry all k pieces of each of its streams as they arrive at that increment, plus
// what one piece takes after it (estimate.cpp). Within 5 % of the replay at 256 MiB and
// 15 % at 1-16 MiB on 2-5 nodes (tree_pipeline_test).
// Gives what tree_estimate, which builds exactly the head a call needs, gives, bit for bit.
// A rail fold: `copies` copies of a tree's first channels, each turned by `step` more GPUs
// (and so NICs: rails) in every node, stand for all its channels (see TreeEstimator).
struct RailFold {
  int copies = 1;
  int step = 1;
};

class TreeEstimator {
 public:
  static constexpr int kHeadPieces = 3;  // the most pieces a head places (see above)
  // Pipelined calls of more than kHeadPieces pieces place a head of this many full pieces
  // (as accurate against the replay as 3 in tree_pipeline_test, and a third cheaper).
  static constexpr int kPipelinedHeadPieces = 2;
  // fold.copies > 1: `tcs` are the tree's channels 0 and 1, standing for fold.copies copies
  // turned by fold.step GPUs each (nvls_tree_rail_fold, tree_rail_fold). The links of one
  // kind on one node that the turns map onto each other are then loaded as by these
  // channels' transfers on all of them together, times copies / their count; a link
  // outside the nodes (the fabric) copies times as much as by these channels; the call is
  // cut into copies x tcs.size() channels. Equal to the estimate over every channel up to
  // rounding where the platform looks alike from every rail (nvls_tree_test).
  // in_flight > 1: pieces in flight per hop (NCCL_STEPS): a piece's bytes follow the
  // previous piece's on its edge and its latency overlaps them (replay.cpp's
  // tree_transfers); 1: each piece sent once the previous one arrived.
  TreeEstimator(const Platform& p, std::vector<int> gpus, std::vector<TreeChannel> tcs,
                int head_pieces = kHeadPieces, RailFold fold = {}, int in_flight = 1);
  ~TreeEstimator();
  Seconds estimate(const CollectiveCall& call, Elements piece);
  const std::vector<TreeChannel>& channels() const { return tcs_; }
  int in_flight() const { return in_flight_; }

 private:
  struct Head;  // the first head_pieces pieces' transfers (see estimate.cpp)
  static std::unique_ptr<Head> build_head(const Platform& p, const std::vector<int>& gpus,
                                          const std::vector<TreeChannel>& tcs, int m, RailFold fold,
                                          bool pipelined);
  const Head& head();
  Seconds head_time(const std::vector<Bytes>& pieces);
  Seconds period(Bytes piece_bytes);
  Seconds place_pipelined(const std::vector<double>& bytes, const std::vector<double>& dur, int e_count,
                          std::vector<double>& start, std::vector<double>& end);
  struct PipelinedHead {
    int pieces = 0;  // full pieces placed
    Seconds total = 0;
    Seconds marginal = -1;  // -1: a head of one piece
    std::vector<std::pair<Seconds, double>> streams;  // (start of piece 0, link time per byte)
    Seconds after = 0;
  };
  const PipelinedHead& pipelined_head(Bytes piece_bytes);
  const Platform& p_;
  std::vector<int> gpus_;
  std::vector<TreeChannel> tcs_;
  int head_pieces_;
  RailFold fold_;
  int in_flight_ = 1;
  std::unique_ptr<Head> head_;
  std::vector<double> period_count_;  // per link id: piece 0's transfers on it
  std::map<std::vector<Bytes>, Seconds> head_times_;
  std::map<Bytes, Seconds> periods_;
  std::map<Bytes, int> period_link_;  // the link (incidence id) whose drain bounds the period
  std::map<Bytes, PipelinedHead> pipelined_heads_;
};

// The rail folds that apply (else {1, 1}), on `channels` channels over `gpus`: every
// node's ranks are all its GPUs in GPU order, each on its own NIC, and the routes look
// alike from every rail (GPU to GPU within a node, GPU to the same GPU of another node,
// over GPU, NIC and fabric links only). NVLS-tree on 2 x GPUs-per-node channels: head 0's
// two channels stand for all heads' ({GPUs per node, 1}). Tree on 2 x GPUs-per-node
// channels (channels 2j and 2j + 1: trees 0 and 1 over node chains that start at GPU j):
// channels 0 and 1 stand for all, turned by 1 GPU ({GPUs per node, 1}).
RailFold nvls_tree_rail_fold(const Platform& p, const std::vector<int>& gpus, int channels);
RailFold tree_rail_fold(const Platform& p, const std::vector<int>& gpus, int channels);

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
