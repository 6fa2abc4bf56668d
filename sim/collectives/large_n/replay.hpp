// Broadcast, reduce (a pipelined chain per channel along the ring, from or to the root)
// and tree all-reduce (per channel, pieces reduced up a tree and broadcast down), timed by
// replaying their transfers in the fluid simulation (fluid_sim.hpp): each transfer starts
// when the ones it waits for ended, as collective_exact.cpp's actors send. A chain hop
// sends piece i once it received piece i and its send of piece i - 1 ended; a tree rank
// sends piece i up once piece i arrived from every child and its previous up-send ended,
// and down to its k-th child once piece i arrived from above and its previous sends to
// children 0..k ended.
//
// The replay's cost grows with the transfers and with the flows active during each, so it
// is bounded: a call within the replay bound is replayed whole; on at most
// kLargeNExtrapolateMaxRanks ranks a larger one replays a head of K pieces per channel
// (K = extrapolation bound / transfers per piece) and extrapolates the rest; anything
// else falls back to the estimates (estimate.hpp). The bounds trade simulation time
// against fidelity: with these values every call on at most 64 GPUs up to 128 MiB is
// replayed, and DDP's first-iteration all-reduce of every gradient at once stays cheap.
//
// Extrapolation: piece i's end is past the pipeline's fill once i >= depth (the most
// transfers on one piece's dependency path) and free of the head's drain while
// i < K - depth; each further piece adds the period measured between the two, and the
// head's drain stands for the call's. A steady span shorter than
// kLargeNExtrapolateMinSteadyPieces misjudges the period, so such heads are not used.
#pragma once
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "engine/core/units.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/net/platform.hpp"

namespace dpt::sim {

// Replay bounds, in transfers (hops or edges x pieces per channel, all channels).
constexpr Elements kLargeNReplayMaxChainTransfers = 16384;
constexpr Elements kLargeNReplayMaxTreeTransfers = 32768;
constexpr Elements kLargeNExtrapolateMaxChainTransfers = 16384;
constexpr Elements kLargeNExtrapolateMaxTreeTransfers = 98304;
constexpr int kLargeNExtrapolateMaxRanks = 64;
// The least number of steady-state pieces (past the fill, before the drain) a replayed
// head must have to be extrapolated.
constexpr Elements kLargeNExtrapolateMinSteadyPieces = 128;

// How collective_time_large_n times broadcast, reduce and tree all_reduce.
enum class LargeNMethod {
  automatic,    // whole replay, head replay and extrapolation, or estimate (see above)
  estimate,     // always the estimate (tests compare it with the exact formulation)
  extrapolate,  // a head of the smallest length the automatic path accepts, extrapolated
                // (tests: the automatic path's worst case, at sizes exact can run)
};

// Which way collective_time_large_n timed a call.
enum class LargeNTimedBy {
  phases,         // ring steps (all_reduce, reduce_scatter, all_gather) and nvls: phase formula
  replay,         // broadcast, reduce, tree: every transfer replayed
  extrapolation,  // the first pieces replayed, the rest extrapolated
  estimate,       // chain or tree estimate
};
const char* large_n_timed_by_name(LargeNTimedBy by);

// The end of every piece index (over all channels and hops or edges) in a replay, the
// largest route latency of its transfers, and the pipeline's depth: the most transfers
// on one dependency path within one piece (a chain's hops; a tree's up plus down edges).
struct PieceEnds {
  std::vector<Seconds> end;  // end[i]: when the last transfer of piece i (any channel) ended
  Seconds max_latency_s = 0;
  int depth = 0;
  bool latency_overlapped = false;  // pieces in flight: a piece's latency overlaps the previous piece's bytes
};

// Replays the first min(head, its pieces) pieces of every channel's chain (`chains` from
// chain_orders).
PieceEnds chain_replay(const Platform& p, const std::vector<int>& gpus, const std::vector<std::vector<int>>& chains,
                       const CollectiveCall& call, Elements piece, Elements head);
// Replays the first min(head, its pieces) pieces of every channel's tree, `in_flight`
// pieces per hop (CollectivePlan::pieces_in_flight; see replay.cpp's tree_transfers).
PieceEnds tree_replay(const Platform& p, const std::vector<int>& gpus, const std::vector<TreeChannel>& tcs,
                      const CollectiveCall& call, Elements piece, Elements head, int in_flight = 1);

// A call of k pieces per channel from the replay of its first K < k (full) pieces (see
// above). The last piece, `last_ratio` of a full one, shortens the final period's drain.
// Throws std::logic_error if the head is shorter than 2 depth + the minimum steady span.
Seconds extrapolate_pieces(const PieceEnds& head, Elements k, double last_ratio);

// Pieces per channel (channel 0 has the most) and the last piece's share of a full one.
std::pair<Elements, double> pieces_per_channel(const CollectiveCall& call, int channels, Elements piece);

// Whole replay, head replay plus extrapolation, or neither (nullopt: use the estimate),
// for a call over n ranks of k pieces per channel and `transfers_per_piece` transfers per
// piece index; `replay(K)` replays the first K pieces of every channel; `by` says which.
std::optional<Seconds> replay_or_extrapolate(LargeNMethod method, int n, Elements k, double last_ratio,
                                             Elements transfers_per_piece, Elements replay_bound,
                                             Elements extrapolate_bound,
                                             const std::function<PieceEnds(Elements)>& replay, LargeNTimedBy& by);

}  // namespace dpt::sim
