// The large-N formulation of the collectives: cost computed per distinct phase on
// the routes' links, so one collective costs O(N x C) route look-ups instead of
// 2 N (N-1) C simulated messages.
//
// Ring (all_reduce, reduce_scatter, all_gather): every step moves equal chunks along
// the same N x C hops. When all flows of a phase start together, max-min sharing gives
// every flow at least min over its links of (link bandwidth / flows on it), and the
// most loaded link cannot drain sooner than (its bytes / its bandwidth); so a step
// lasts max over flows of (route latency + max over its links of load / bandwidth).
// Successive steps wait on each other, so every rank is paced by the slowest hop and
// the collective lasts steps x step time. Property test: within 1 % of the
// message-level simulation for N <= 64 on every hardware file.
//
// Broadcast and reduce (a pipelined chain per channel along the ring, from or to the
// root) and tree all_reduce (per channel, pieces reduced up a tree and broadcast down)
// are replayed transfer by transfer when they have at most kLargeNReplayMaxChainTransfers
// (chains) or kLargeNReplayMaxTreeTransfers (trees) transfers: each transfer starts when
// the ones it waits for ended (collective_exact.cpp's chain and tree actors: a chain hop
// sends piece i once it received piece i and its send of piece i - 1 ended; a tree rank
// sends piece i up once piece i arrived from every child and its previous up-send ended,
// and down to its k-th child once piece i arrived from above and its previous sends to
// children 0..k ended), pays its route latency without using bandwidth, then shares its
// links under SimGrid CM02's weighted max-min (penalty = route latency, so a saturated
// link is split in proportion to 1 / latency among the flows it bottlenecks), the shares
// recomputed whenever a flow starts or stops transferring. This is the rule SimGrid 3.32
// applies with its full solver (src/surf/network_cm02.cpp, src/kernel/lmm/maxmin.cpp;
// TCP-gamma 0 leaves flows unbounded), which the exact formulation runs
// (sim_process.cpp, which also resolves event times to 1 ps: at SimGrid's default 1 ns the
// rounding alone flipped the phase pattern of contending chains). Property tests, N <= 64
// and 1 KiB .. 128 MiB on every hardware file (the bounds cover those calls): chains
// within 0.1 % of the exact formulation within a node and 1 % across nodes, trees within
// 0.1 % (measured: within 1e-5 over ~2,000 random cases; two round-size cases found 0.7 and
// 1.1 % apart, where the two simulations' floating-point event orders diverge in a
// chaotic regime).
//
// Larger calls: the replay's cost grows with the transfers and with the flows active
// during each (every event recomputes every active share), so above the bound, on at
// most kLargeNExtrapolateMaxRanks GPUs, only the first K = extrapolation bound / (transfers per piece) pieces of
// every channel are replayed, and the rest extrapolated: piece i's end is past the pipeline's fill once i >= depth (the most
// transfers on one piece's dependency path) and free of the head's drain while i < K -
// depth, each further piece adds the period measured between the two, and the head's
// drain stands for the call's. This needs K >= 2 depth + kLargeNExtrapolateMinSteadyPieces
// + 1 (measured: shorter steady spans misjudge the period by percents); with the bounds
// below it covers chains within a node at any N, across nodes to 14 GPUs (8 channels),
// and trees to 32 GPUs. Properties (K forced to that minimum, k = K + 1 .. 2K pieces, N <= 16):
// within 1 % in a node (measured 0 .. +0.24 %), 2 % for trees (measured -1.7 .. +0.15 %)
// and 10 % for chains across nodes (measured -8.1 .. +3.2 %, most within 1 %), where the
// exact simulation's period fluctuates by percents from piece to piece and can lock into
// another pattern partway. Calls whose head would be too short use the estimates below.
//
// Tree estimate: the first min(k, 3) pieces of every channel are placed in time
// transfer by transfer (after the transfers they wait for), each transfer's share of
// its busiest link taken as the average number of transfers on that link during it
// (iterated from unshared durations); each further piece adds one steady-state period
// (every edge of every channel busy at once). Measured against the exact simulation
// (N = 9..64, cluster files) -9.1 % .. +5.6 %, largest with partially filled nodes and
// pipelines of a few pieces; against the replay at 1,024 GPUs on dgx-h100-cluster, 3.5 to
// 6.6 % low at 16, 25 and 64 MiB. Its property test holds 12 %.
//
// Chain estimate: each chain is a flow shop; with a constant duration t_j per piece,
// piece i leaves hop j at S_j + i M_j (S_j the sum, M_j the maximum of t_0..t_j). A
// hop's duration is its latency plus its busiest link's drain under the pieces of every
// hop whose busy interval overlaps its own (weighted by the overlap), iterated from
// unshared durations as the tree's head is. It overestimates, by up to +13 % measured
// within a node and +36 % across nodes (N <= 64), because it drains each link at its
// full load where max-min sharing gives the share of flows bottlenecked elsewhere to the
// others; its property test holds 60 %. DDP uses chains for its construction-time
// parameter broadcast, not inside the predicted step. nvls has no large-N formulation
// (it runs within one node only).
//
// NVLS timing here serves only the algorithm selection (plan_collective).
//
// What it does not model: contention with traffic outside the collective during it
// (the exact formulation does). DDP issues its collectives one at a time on one
// stream, so the collective has the links to itself.
#pragma once
#include <vector>

#include "engine/core/units.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/net/platform.hpp"

namespace dpt::sim {

// One transfer of a phase.
struct PhaseFlow {
  const simgrid::s4u::Host* from = nullptr;
  const simgrid::s4u::Host* to = nullptr;
  Bytes bytes = 0;
};

// Chains and trees of at most this many transfers (hops or edges x pieces per channel,
// all channels) are replayed whole, transfer by transfer under SimGrid's sharing rule
// (see above). Within kLargeNExtrapolateMaxRanks ranks, larger calls replay up to the
// extrapolation bound (whole, or a head and extrapolate); others use the estimates.
// Together they cover every call on at most 64 GPUs up to 128 MiB. Replay cost measured
// on this machine kind (dptwin bench on dgx-h100-cluster, 128 MiB .. 4 GiB): chains up
// to 0.75 s at 64 GPUs (every hop of every channel transfers at once), trees up to 0.8 s
// at 16 and 32 GPUs; a whole replay at 16,384 chain or 32,768 tree transfers stays under
// 0.7 s up to 1,024 GPUs. The extrapolation bounds are a cost trade: 196,608 tree
// transfers would extrapolate trees to 64 GPUs (a 1 GiB all-reduce within 0.3 % of
// exact, where the estimate is 7 % off) but cost 1.6 s for DDP's first-iteration
// all-reduce of every gradient at once (6.2 GB for GPT-2 1.5B), where the predicted
// step takes 0.06 s to simulate; 24,576 chain transfers would take chains across nodes
// to 19 GPUs instead of 14 but replay DDP's construction-time broadcast at 64 GPUs.
constexpr Elements kLargeNReplayMaxChainTransfers = 16384;
constexpr Elements kLargeNReplayMaxTreeTransfers = 32768;
constexpr Elements kLargeNExtrapolateMaxChainTransfers = 16384;
constexpr Elements kLargeNExtrapolateMaxTreeTransfers = 98304;
constexpr int kLargeNExtrapolateMaxRanks = 64;

// Above the whole-replay bound (and within kLargeNExtrapolateMaxRanks ranks), the first
// K = extrapolation bound / (transfers per piece index) pieces of every channel are
// replayed and the rest extrapolated, when the head has at least this many pieces in
// steady state (past the pipeline's fill, before its drain).
constexpr Elements kLargeNExtrapolateMinSteadyPieces = 128;

// How collective_time_large_n times broadcast, reduce and tree all_reduce.
enum class LargeNMethod {
  automatic,    // whole replay, head replay and extrapolation, or estimate (see above)
  estimate,     // always the estimate (tests compare it with the exact formulation)
  extrapolate,  // a head of the smallest length the automatic path accepts, extrapolated
                // (tests: the automatic path's worst case, at sizes exact can run)
};

// Duration of one phase whose flows all start together on idle links (see above).
Seconds phase_time(const Platform& p, const std::vector<PhaseFlow>& flows);

// The flows of one step of ring `orders` (from ring_orders) when each channel's chunk
// is `chunk_bytes`: rank order[i] sends to order[i+1] on every channel.
std::vector<PhaseFlow> ring_step_flows(const Platform& p, const std::vector<int>& rank_gpus,
                                       const std::vector<std::vector<int>>& orders, Bytes chunk_bytes);

// Which way collective_time_large_n timed a call.
enum class LargeNTimedBy {
  phases,         // ring steps (all_reduce, reduce_scatter, all_gather) and nvls: phase formula
  replay,         // broadcast, reduce, tree: every transfer replayed
  extrapolation,  // the first pieces replayed, the rest extrapolated
  estimate,       // chain or tree estimate
};
const char* large_n_timed_by_name(LargeNTimedBy by);

// Duration of `call` under `plan` (plan.formulation is ignored) in the large-N
// formulation, counted from the moment the last rank arrived; `timed_by`, when given,
// says how it was timed.
Seconds collective_time_large_n(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                                const CollectivePlan& plan, const CollectiveSettings& settings,
                                LargeNMethod method = LargeNMethod::automatic, LargeNTimedBy* timed_by = nullptr);

// The bytes the collective moves on each link (as the exact formulation would put every
// message on every link of its route).
LinkBytes large_n_traffic(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                          const CollectivePlan& plan, const CollectiveSettings& settings);
// Records large_n_traffic on the platform's link counters.
void account_large_n(Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                     const CollectivePlan& plan, const CollectiveSettings& settings);

}  // namespace dpt::sim
