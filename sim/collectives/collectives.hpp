// Collectives on the modelled links, scheduled as NCCL schedules them.
//
// Algorithms (NCCL_ALGO names):
//   ring  C channels, each a ring over all ranks (rotated per channel so each channel
//         crosses nodes through a different NIC). The buffer is cut into N x C chunks
//         (as even as elements allow). all_reduce = reduce-scatter then all-gather,
//         2(N-1) steps; reduce_scatter and all_gather N-1 steps; in each step every
//         rank sends one chunk per channel to its successor, once the chunk it forwards
//         has arrived from its predecessor (not waiting for its own send to arrive, as
//         NCCL's FIFO lets it run ahead: a chunk's route latencies are those along its
//         path, ring_path_latency, not steps x the slowest hop). NCCL slices a step into
//         pipelined slices so latency is paid per step, not per slice: here a step is
//         one message.
//         broadcast and reduce run as a pipelined chain along the ring from/to the root,
//         in pipeline_chunk_bytes pieces.
//         Homogeneous links (bandwidth B, hop latency a): all_reduce takes
//         2(N-1)/N * S/B + 2(N-1) a; reduce_scatter and all_gather (N-1)/N * S/B + (N-1) a.
//   tree  all_reduce only, C channels (with NCCL's model, as many as NCCL launches: up to
//         twice the ring graph's). Channel c uses tree c mod 2 of NCCL's double binary
//         tree over the nodes, each node's GPUs as a chain (ring order) rotated so that
//         pair j = c / 2 has its head on NIC j mod NICs, so that channel pairs enter and
//         leave each node through different GPUs and NICs and each NIC carries both trees
//         (NCCL duplicates each tree graph channel for the second tree); a node's chain
//         head links to the heads of its tree parent and
//         children. Each channel carries 1/C of the buffer: reduce up, then broadcast down,
//         pipelined in pieces (NCCL's chunks, NCCL_STEPS in flight per hop, with NCCL's
//         model; pipeline_chunk_bytes, one in flight, bare). NCCL orders its channels tree
//         0 first, then tree 1, so a call on fewer channels than it has runs tree 0 only;
//         here a pair runs both trees.
//   nvls  all_reduce only, single node with NVSwitch in-switch reduction (H100 NVSwitch
//         gen3): every GPU sends its buffer to the switch, which reduces and multicasts
//         the result back; pipelined in pipeline_chunk_bytes pieces, so each GPU port
//         carries S up and S down (algbw ~ port bandwidth).
//   nvls_tree  all_reduce only, ranks on >= 2 nodes with NVSwitch in-switch reduction
//         (NCCL's NVLSTree). Each node has NVLS heads, GPUs with a NIC of their own
//         (nvls_heads); head h takes 1/H of the buffer, half of it along each tree of the
//         double binary tree over the nodes, through its own NIC to the same head of the
//         neighbouring nodes. 2H channels, channel c = (head c / 2, tree c mod 2), each a
//         tree like the tree algorithm's: reduce up, broadcast down, pipelined in
//         pipeline_chunk_bytes pieces. Within a node the other ranks are the head's
//         children through the NVSwitch: they stand for the switch's reduction and
//         multicast. Where NVLS moves a channel's share once through the head's switch
//         port each way, they move it (ranks per node - 1) times: a head's port then
//         carries about 7x its NIC's bytes, at 9x the NIC's rate on H100 (18 NVLinks
//         against one 400 Gb/s NIC), so the network still bounds it.
//
// Selection (when not forced) is NCCL's tuner (nccl_model.hpp): among the algorithms that
// can run the op on these ranks (nvls needs one node whose NVSwitch reduces in-switch;
// tree needs >= 2 nodes; nvls_tree >= 2 nodes whose NVSwitch reduces in-switch and an
// NVLS graph of >= 2 heads; only all_reduce has a choice) and the protocols LL, LL128 and
// Simple, the pair with the least NCCL model time (latency + bytes / bandwidth). The plan
// then shapes the simulated flows after NCCL's model: the protocol's wire bytes, each
// flow bounded by NCCL's per-channel bandwidth (ring, chain, nvls), and NCCL's latency term
// paid on top of the route latency the schedule already pays.
// Channels (NCCL's nChannels), unless forced: NCCL's ring graph (nccl_graph): the
// per-channel speed and channel count its search finds on these links (DGX A100: 12 x
// 20 GB/s; DGX H100: 12 x 30 GB/s; across nodes about one channel per NIC); tree: the
// channels NCCL launches for the size (with NCCL's model; up to twice the ring graph's,
// each graph channel once per tree); nvls_tree: 2 x the NVLS graph's heads (8 on DGX
// H100 nodes: 16).
// Trees (tree, nvls_tree) share the links freely: their flows carry no per-channel bound.
//
// Formulation: the exact one sends every message as a SimGrid comm (2 N (N-1) C comms
// for a ring all-reduce). Above exact_max_ranks ranks (default 8, one DGX node: a DDP
// step's hundreds of buckets across 8 nodes take minutes exactly), ring (every op:
// broadcast and reduce as pipelined chains), tree and nvls_tree all_reduce use the large-N
// formulation of large_n/dispatch.hpp: no simulated messages at all (its property tests
// state how close it stays to the exact one). nvls always runs exact (one node only, so
// at most a node's GPUs x pieces messages). With NCCL's model, tree and nvls_tree keep
// NCCL_STEPS pieces in flight per hop and run large-N at any rank count (see
// CollectivePlan::pieces_in_flight); a forced exact formulation is refused for them.
//
// Calling convention: every rank's actor calls CollectiveGroup::run(rank, call) with the
// same calls in the same order; run blocks that actor in simulated time only (SimGrid
// activities, semaphores and barriers; never an OS primitive) until the collective
// finished on that rank.
#pragma once
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/collective.hpp"
#include "engine/core/units.hpp"
#include "sim/collectives/nccl_model.hpp"
#include "sim/net/platform.hpp"

namespace dpt::sim {

// The engine's collective vocabulary (engine/core/collective.hpp), by its sim:: names too.
using dpt::CollectiveCall;
using dpt::CollectiveOp;
using dpt::collective_op_name;
using dpt::parse_collective_op;

enum class CollectiveAlgorithm { ring, tree, nvls, nvls_tree };
enum class Formulation { exact, large_n };

const char* collective_algorithm_name(CollectiveAlgorithm a);  // "ring", "tree", "nvls", "nvls_tree"
const char* formulation_name(Formulation f);               // "exact", "large_n"
// Parses a name (case-insensitive). Throws std::invalid_argument naming the value and
// the allowed names.
CollectiveAlgorithm parse_collective_algorithm(std::string_view name);

struct CollectiveSettings {
  std::optional<CollectiveAlgorithm> algorithm;  // forced, like NCCL_ALGO
  std::optional<Formulation> formulation;        // forced; else exact up to exact_max_ranks
  std::optional<int> channels;                   // forced channel count
  std::optional<NcclProtocol> protocol;          // forced, like NCCL_PROTO
  // false: the bare schedule on the links (no NCCL latency term, protocol overhead, flow
  // bound or size-dependent channel count), for tests of the schedules' closed forms.
  bool nccl_model = true;
  int exact_max_ranks = 8;   // exact within a DGX-size node; large-N across nodes (see below)
  Bytes pipeline_chunk_bytes = 512 * kKiB;       // NCCL Simple protocol: 4 MiB buffer / 8 steps
};

// What will run for one call and why.
struct CollectivePlan {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  NcclProtocol protocol = NcclProtocol::simple;
  int channels = 1;
  Formulation formulation = Formulation::exact;
  std::optional<Seconds> model_s;  // the large-N model's time, when the selection computed it
  Seconds nccl_time_s = 0;         // NCCL's tuner time for the chosen pair (its own prediction)
  Seconds latency_s = 0;           // NCCL's latency term for the chosen pair
  // Latency added to the simulated schedule so that it pays NCCL's latency term: that term
  // less the route latency the schedule already pays at zero bytes (never negative).
  Seconds extra_latency_s = 0;
  double wire_factor = 1.0;        // wire bytes per data byte of the protocol
  // Bound on each flow's rate (wire bytes per second): NCCL's per-channel bandwidth for the
  // chosen pair (ring, chain, NVLS); 0 = none (tree: its flows share the links freely).
  BytesPerSecond flow_cap_bytes_per_s = 0;
  // Data bytes per pipeline piece of chains and trees; 0: settings.pipeline_chunk_bytes.
  // With NCCL's model, trees take NCCL's chunk (nccl_tree_chunk_bytes,
  // nccl_nvls_tree_chunk_bytes).
  Bytes piece_bytes = 0;
  // Pieces a tree hop keeps in flight: 1, each piece sent once the previous one arrived
  // (the bare schedule); with NCCL's model NCCL_STEPS (8): a hop's pieces go out back to
  // back, each one's bytes after the previous one's (FIFO) while its latency overlaps
  // them, and a piece waits for the one 8 ahead of it to have arrived (the connection's
  // buffer slots). SimGrid's comm pays its latency before its bytes and cannot overlap
  // them, so such trees run in the large-N formulation (its fluid replay shares links
  // exactly as SimGrid does: fluid_sim.hpp), never exact.
  int pieces_in_flight = 1;
  // NVLS on one node: the gather stage of the last round (kNvlsOneNodeStages): NCCL's
  // kernel copies each round out a round after the switch multicast it, so the call ends
  // one round's time (its data at the flow bound) after the last round arrived. The
  // schedule's pieces are the rounds (piece_bytes: NVLS channels x heads x NCCL's NVLS
  // chunk), scattered up and multicast down in a pipeline.
  Seconds trailing_stage_s = 0;
  std::string reason;  // e.g. "tree/LL128: least NCCL tuner time (ring/LL 14.2 us, ...)" or "forced"
};

// Whether NCCL connects local GPUs a and b of one node with its P2P transport, else SHM
// through host memory, as ncclTopoCheckP2p decides (src/graph/paths.cc). `node_gpus`: the
// communicator's GPUs on that node. NVSwitch, a direct NVLink, or two NVLinks through one
// GPU (PATH_NVB) are P2P. Over PCIe the driver must allow peer access (Platform::
// peer_to_peer: within one socket), and the path must stay within NCCL's p2pLevel: a
// shared PCIe switch (PATH_PIX/PXB) always does; a path through the CPU's root complex
// (PATH_PHB) does in 2.18.5 on CPUs other than Intel's, Zhaoxin's and ARM's (their
// p2pLevel is PATH_PXB, the others' PATH_SYS), and in master only on AMD x86 where the
// communicator has at most 2 GPUs on the node.
bool nccl_p2p_within_node(const HardwareSpec& hw, int local_a, int local_b, int node_gpus);

// Nodes spanned by the ranks (distinct node_of_gpu).
int nodes_spanned(const Platform& p, const std::vector<int>& rank_gpus);
// NCCL's graph for these ranks (nccl_model.hpp): nodes spanned, peer access.
NcclGraph nccl_graph_of(const Platform& p, const std::vector<int>& rank_gpus);
// Channel count used when not forced: NCCL's ring graph's nChannels.
int default_channels(const Platform& p, const std::vector<int>& rank_gpus);
// The parts of schedule_latency that depend on the rank set and channel count but not on
// the call, by channel count: at 32k ranks a tree's deepest path is ~1.3 M route look-ups.
// Valid for one platform and rank set only (a CollectiveGroup keeps one).
struct ScheduleLatencyMemo {
  std::map<int, Seconds> ring_hop_s;      // slowest hop of any ring channel (chains)
  std::map<int, Seconds> ring_path_s;     // ring_path_latency, by 2 x channels + (all_reduce ? 1 : 0)
  std::map<int, Seconds> tree_deepest_s;  // deepest path up any tree channel
  std::map<int, Seconds> nvls_tree_deepest_s;  // the same for NVLS-tree channels
};
// The route latency the plan's schedule pays at zero bytes: a ring's path latency
// (ring_path_latency); a chain's n - 1 hops at its slowest; a tree's deepest path up and
// down; nvls up and down.
// With a memo, the call-independent parts are looked up there (computed on first use).
Seconds schedule_latency(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                         const CollectivePlan& plan, ScheduleLatencyMemo* memo = nullptr);
// The route latency along a ring collective's critical path: the largest sum of `steps`
// consecutive hop latencies of any channel's ring (hop i: orders[c][i] to the next). A
// ring whose ranks forward each chunk once it arrives (NCCL's) pays these, not steps x
// its slowest hop: on 2 nodes of 8 GPUs an all_gather crosses the network twice, not 15
// times.
Seconds ring_path_latency(const Platform& p, const std::vector<int>& rank_gpus,
                          const std::vector<std::vector<int>>& orders, Elements steps);
// Whether (algorithm, op) has a large-N formulation (see above).
bool has_large_n_formulation(CollectiveAlgorithm a, CollectiveOp op);
// The algorithms that can run `op` on these ranks (ring always).
std::vector<CollectiveAlgorithm> eligible_algorithms(const Platform& p, const std::vector<int>& rank_gpus,
                                                     CollectiveOp op);
// The selection rule above; throws std::invalid_argument if a forced algorithm cannot run
// the op or on these ranks (e.g. nvls without in-switch reduction, tree for all_gather).
CollectivePlan plan_collective(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                               const CollectiveSettings& settings, ScheduleLatencyMemo* memo = nullptr);

// ---- schedules as pure functions (the properties test them directly) -------------------
// Per channel, the ranks in ring order (a permutation of 0..N-1). On one node with
// direct NVLink, channel c runs the link-disjoint NVLink cycle (c / 2) mod k, reversed
// for odd c. Otherwise ranks are grouped by node in node order; within a node in the
// order that uses NVLink neighbours where the node has NVLink (DGX-1's cube-mesh ring),
// else in GPU order; across nodes, where every GPU has a NIC of its own, channel c rotates
// every node's order by c + (c mod 2), and where GPUs share a NIC channel c enters and
// leaves every node through the GPUs of NIC c mod NICs (on direct NVLink along the NVLink
// path between them that loads its busiest link least); odd channels are reversed, so with
// one channel per NIC each NIC carries one channel out of the node and one in.
std::vector<std::vector<int>> ring_orders(const Platform& p, const std::vector<int>& rank_gpus, int channels);

// One binary tree over n items: parent (-1 for the root) and children of each item.
struct TreeShape {
  std::vector<int> parent;
  std::vector<std::vector<int>> children;
  int root = 0;
};
// NCCL's double binary tree over n items (src/graph/trees.cc): tree 0 from the bit
// pattern of the index; tree 1 mirrored (n even) or shifted by one (n odd), so that an
// item is interior in at most one of the two.
std::array<TreeShape, 2> double_binary_tree(int n);

// One channel of a tree all-reduce: each rank's parent (-1 at the root).
struct TreeChannel {
  int tree = 0;             // which tree of the double binary tree (c mod 2)
  int root = 0;             // root rank
  std::vector<int> parent;  // by rank
  std::vector<std::vector<int>> children;  // by rank, in rank order (built from parent once)
};
// The channels of a tree all-reduce (see "tree" above). Throws if the ranks span one node.
std::vector<TreeChannel> tree_channels(const Platform& p, const std::vector<int>& rank_gpus, int channels);

// NCCL's NVLS heads of each node (node_chains order): per NIC in NIC order, the first of
// the node's ranks whose GPU crosses nodes through it (Platform::nic_of_gpu), so at most
// one head per NIC and per GPU (search.cc, ncclTopoSearchTryNvls' heads).
std::vector<std::vector<int>> nvls_heads(const Platform& p, const std::vector<int>& rank_gpus);
// The channels of an NVLS-tree all-reduce (see "nvls_tree" above): channel c serves head
// c / 2 (mod the node's heads) along tree c mod 2 of the double binary tree over the
// nodes; every other rank of a node has that head as its parent (the NVLS reduction and
// multicast through the switch), the head the same head of its parent node (the rail).
// Throws if the ranks span one node.
std::vector<TreeChannel> nvls_tree_channels(const Platform& p, const std::vector<int>& rank_gpus, int channels);

// Elements of piece i when `count` is cut into `pieces` pieces as evenly as possible
// (the first count % pieces pieces get one more).
Elements piece_count(Elements count, int pieces, int i);

// ---- running collectives -----------------------------------------------------------
struct CollectiveRecord {
  CollectiveCall call;
  CollectivePlan plan;
  Seconds start_s = 0;  // when the last rank arrived
  Seconds end_s = 0;    // when the last rank finished
};

class CollectiveGroup {
 public:
  // Ranks 0..N-1 live on rank_gpus[r] (distinct global GPU indices of `platform`).
  //
  // Symmetric ranks: with participants = P < N, only ranks 0..P-1 call run(); they
  // stand for all N ranks, which are assumed to arrive together (a DDP step on
  // identical GPUs with equal batches: every rank issues the same collective after
  // the same work). Each collective then completes when the P participants have
  // arrived and is timed for all N ranks in the large-N formulation (the exact one
  // needs every rank's actor), with every link's traffic accounted. P = N (the
  // default, participants = 0) is the ordinary group.
  CollectiveGroup(Platform& platform, std::vector<int> rank_gpus, CollectiveSettings settings = {},
                  int participants = 0);
  ~CollectiveGroup();
  CollectiveGroup(const CollectiveGroup&) = delete;
  CollectiveGroup& operator=(const CollectiveGroup&) = delete;

  int size() const { return static_cast<int>(rank_gpus_.size()); }
  // Ranks that call run(): size() unless the group is symmetric (see the constructor).
  int participants() const { return participants_; }
  int gpu_of_rank(int rank) const { return rank_gpus_.at(rank); }
  const std::vector<int>& rank_gpus() const { return rank_gpus_; }
  Platform& platform() const { return platform_; }
  const CollectiveSettings& settings() const { return settings_; }

  // Runs `call` for `rank`; see the calling convention above. Throws
  // std::invalid_argument for a bad call (negative count, root out of range, ...).
  void run(int rank, const CollectiveCall& call);

  // Completed collectives in issue order (recorded when the last rank finished).
  const std::vector<CollectiveRecord>& records() const;

  // Untimed (large-N formulation only): calls complete as soon as every participant has
  // arrived and account no traffic. For calls whose duration no reported figure reads:
  // a prediction's setup before its warm-up (DDP's construction broadcast, which at
  // 32,768 GPUs cost a tenth of the prediction to time). Timed by default. Calls planned
  // in the exact formulation (a small group) are simulated as ever.
  void set_timed(bool timed) { timed_ = timed; }

 private:
  struct State;
  Platform& platform_;
  std::vector<int> rank_gpus_;
  CollectiveSettings settings_;
  int participants_;
  bool timed_ = true;
  std::unique_ptr<State> state_;
};

// ---- DataParallel's copies (plain copies, not collectives) -------------------------------
// Copies n bytes from GPU src to GPU dst: direct over NVLink/NVSwitch/PCIe when the pair
// is peer-to-peer, else staged through host memory (the route the platform gives).
// Blocks the calling actor in simulated time.
void copy_gpu_to_gpu(Platform& p, int src_gpu, int dst_gpu, Bytes n);
simgrid::s4u::CommPtr copy_gpu_to_gpu_async(Platform& p, int src_gpu, int dst_gpu, Bytes n);
// Host memory (the GPU's socket) to GPU and back.
void copy_host_to_gpu(Platform& p, int gpu, Bytes n);
void copy_gpu_to_host(Platform& p, int gpu, Bytes n);

}  // namespace dpt::sim
