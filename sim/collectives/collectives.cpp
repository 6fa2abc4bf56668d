// Collective planning and the CollectiveGroup that runs plans: see collectives.hpp. The
// schedules (rings, trees, NVLink cycles) are in schedules.cpp, the message-level executors
// in collective_exact.cpp, the large-N formulation in large_n/.
#include "sim/collectives/collectives.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/collective_exact.hpp"
#include "sim/collectives/gloo_model.hpp"
#include "sim/collectives/large_n/dispatch.hpp"
#include "sim/collectives/large_n/phases.hpp"

namespace sg4 = simgrid::s4u;

namespace dpt::sim {

const char* collective_algorithm_name(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::ring: return "ring";
    case CollectiveAlgorithm::tree: return "tree";
    case CollectiveAlgorithm::nvls: return "nvls";
    case CollectiveAlgorithm::nvls_tree: return "nvls_tree";
  }
  return "?";
}

const char* formulation_name(Formulation f) { return f == Formulation::exact ? "exact" : "large_n"; }

CollectiveAlgorithm parse_collective_algorithm(std::string_view name) {
  const std::string n = normalise_collective_name(name);
  for (auto a : {CollectiveAlgorithm::ring, CollectiveAlgorithm::tree, CollectiveAlgorithm::nvls,
                 CollectiveAlgorithm::nvls_tree})
    if (n == normalise_collective_name(collective_algorithm_name(a))) return a;  // NCCL's "NVLSTree" too
  throw std::invalid_argument(
      fmt::format("unknown collective algorithm '{}' (allowed: ring, tree, nvls, nvls_tree)", name));
}

Elements piece_count(Elements count, int pieces, int i) {
  const Elements base = count / pieces, extra = count % pieces;
  return base + (i < extra ? 1 : 0);
}

int nodes_spanned(const Platform& p, const std::vector<int>& rank_gpus) {
  std::set<int> nodes;
  for (int g : rank_gpus) nodes.insert(p.node_of_gpu(g));
  return static_cast<int>(nodes.size());
}

bool nccl_p2p_within_node(const HardwareSpec& hw, int a, int b, int node_gpus) {
  // NCCL_P2P_DISABLE=1: p2pLevel PATH_LOC, which no pair of GPUs is within.
  if (hw.nccl_p2p_disable && !fault_active(Fault::nccl_p2p_disable_ignored)) return false;
  // NVLink: NVSwitch, a direct link, or two links through one GPU (NCCL's PATH_NVB, within
  // every p2pLevel; DGX-1's GPUs 0 and 5).
  if (hw.nvswitch) return true;
  if (hw.nvlink) {
    if (hw.nvlink->links_between(a, b) > 0) return true;
    for (int k = 0; k < hw.gpus_per_node; ++k)
      if (k != a && k != b && hw.nvlink->links_between(a, k) > 0 && hw.nvlink->links_between(k, b) > 0) return true;
  }
  // PCIe: the driver's peer access, then NCCL's p2pLevel: a shared switch always; the root
  // complex by CPU and release.
  if (!gpu_peer_access(hw, a, b)) return false;
  const int sa = pcie_switch_of(hw, a);
  if (sa >= 0 && sa == pcie_switch_of(hw, b)) return true;
  if (fault_active(Fault::nccl_p2p_through_any_cpu)) return true;  // planted: p2pLevel ignored
  const std::string& cpu = hw.host.cpu;
  const auto has = [&](const char* s) { return cpu.find(s) != std::string::npos; };
  const bool arm = has("Grace") || has("Neoverse") || has("ARM");
  const NcclTuner release =
      fault_active(Fault::nccl_version_ignored) ? NcclTuner::master : parse_nccl_tuner(hw.nccl_version);
  // 2.18.5: PATH_PXB on ARM, Intel and Zhaoxin; PATH_SYS on the rest (AMD, POWER).
  if (release == NcclTuner::v2_18_5) return !arm && !has("Intel") && !has("Zhaoxin");
  // master: PATH_PXB, but PATH_SYS on AMD x86 where the communicator has at most 2 GPUs on
  // the node (topo.cc puts only the communicator's GPUs in its topology).
  return !arm && !has("POWER") && has("AMD") && node_gpus <= 2;
}

namespace {
// Whether every pair of the ranks connects over NCCL's P2P transport (else SHM).
// Nodes are identical, so the pairs of the first node with several ranks stand for all.
bool all_p2p(const Platform& p, const std::vector<int>& rank_gpus) {
  std::map<int, std::vector<int>> by_node;
  for (int g : rank_gpus) by_node[p.node_of_gpu(g)].push_back(g);
  for (const auto& [node, gpus] : by_node) {
    if (gpus.size() < 2) continue;
    for (size_t i = 0; i < gpus.size(); ++i)
      for (size_t j = i + 1; j < gpus.size(); ++j)
        if (!nccl_p2p_within_node(p.hardware(), p.local_index(gpus[i]), p.local_index(gpus[j]),
                                  static_cast<int>(gpus.size())))
          return false;
    return true;
  }
  return true;
}
}  // namespace

namespace {
// NVLS heads of the node with the fewest: the NICs its ranks' GPUs cross nodes through
// (nvls_heads, counted without building the node chains).
int fewest_nvls_heads(const Platform& p, const std::vector<int>& rank_gpus) {
  std::map<int, std::set<int>> nics_of_node;
  for (int g : rank_gpus) nics_of_node[p.node_of_gpu(g)].insert(p.nic_of_gpu(p.local_index(g)));
  size_t fewest = std::numeric_limits<size_t>::max();
  for (const auto& [node, nics] : nics_of_node) fewest = std::min(fewest, nics.size());
  return static_cast<int>(fewest);
}
}  // namespace

NcclGraph nccl_graph_of(const Platform& p, const std::vector<int>& rank_gpus) {
  const int nodes = nodes_spanned(p, rank_gpus);
  const bool nvls_tree = nodes > 1 && p.has_in_switch_reduction() && p.hardware().network;
  // One node's GPUs, as NCCL's search sees them (the nodes of a platform mirror node 0).
  std::vector<int> local;
  const int first_node = rank_gpus.empty() ? 0 : p.node_of_gpu(rank_gpus.front());
  for (int g : rank_gpus)
    if (p.node_of_gpu(g) == first_node) local.push_back(p.local_index(g));
  return nccl_graph(p.hardware(), static_cast<int>(rank_gpus.size()), nodes, all_p2p(p, rank_gpus),
                    nvls_tree ? fewest_nvls_heads(p, rank_gpus) : -1, std::move(local));
}

int default_channels(const Platform& p, const std::vector<int>& rank_gpus) {
  return nccl_graph_of(p, rank_gpus).ring_channels;
}

namespace {
// eligible_algorithms with NCCL's graph for these ranks already at hand.
std::vector<CollectiveAlgorithm> eligible_with(const Platform& p, const std::vector<int>& rank_gpus, CollectiveOp op,
                                               const NcclGraph& g) {
  std::vector<CollectiveAlgorithm> out{CollectiveAlgorithm::ring};
  if (op != CollectiveOp::all_reduce || rank_gpus.size() < 2) return out;
  if (g.nodes > 1) out.push_back(CollectiveAlgorithm::tree);
  if (g.nodes == 1 && p.has_in_switch_reduction()) out.push_back(CollectiveAlgorithm::nvls);
  // NVLS-tree where NCCL's NVLS graph across nodes has at least 2 heads (Hopper and later).
  if (g.nodes > 1 && p.has_in_switch_reduction() && g.nvls_channels >= 2) out.push_back(CollectiveAlgorithm::nvls_tree);
  return out;
}
}  // namespace

std::vector<CollectiveAlgorithm> eligible_algorithms(const Platform& p, const std::vector<int>& rank_gpus,
                                                     CollectiveOp op) {
  return eligible_with(p, rank_gpus, op, nccl_graph_of(p, rank_gpus));
}

bool has_large_n_formulation(CollectiveAlgorithm a, CollectiveOp op) {
  (void)op;  // ring covers every op (broadcast and reduce as chains), the trees only all_reduce
  return a != CollectiveAlgorithm::nvls;
}

namespace {
// Large-N above exact_max_ranks where the algorithm has that formulation; a forced
// large_n where it has none is an error.
void choose_formulation(CollectivePlan& plan, int n, const CollectiveCall& call, const CollectiveSettings& settings) {
  const bool has = has_large_n_formulation(plan.algorithm, call.op);
  if (plan.pieces_in_flight > 1) {
    if (settings.formulation == Formulation::exact)
      throw std::invalid_argument(fmt::format(
          "{} with NCCL's model has no exact formulation: it keeps {} pieces in flight per hop, whose latencies "
          "overlap their bytes, which SimGrid's comms cannot (use the large-N formulation, or nccl_model off)",
          collective_algorithm_name(plan.algorithm), plan.pieces_in_flight));
    plan.formulation = Formulation::large_n;
    return;
  }
  if (settings.formulation == Formulation::large_n && !has)
    throw std::invalid_argument(fmt::format("{} {} has no large-N formulation (it runs exact: its message count "
                                            "grows as N x pieces, not N^2)",
                                            collective_algorithm_name(plan.algorithm), collective_op_name(call.op)));
  plan.formulation =
      settings.formulation.value_or(has && n > settings.exact_max_ranks ? Formulation::large_n : Formulation::exact);
}
}  // namespace

namespace {
NcclAlgo to_nccl(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::ring: return NcclAlgo::ring;
    case CollectiveAlgorithm::tree: return NcclAlgo::tree;
    case CollectiveAlgorithm::nvls: return NcclAlgo::nvls;
    case CollectiveAlgorithm::nvls_tree: return NcclAlgo::nvls_tree;
  }
  return NcclAlgo::ring;
}
CollectiveAlgorithm from_nccl(NcclAlgo a) {
  switch (a) {
    case NcclAlgo::ring: return CollectiveAlgorithm::ring;
    case NcclAlgo::tree: return CollectiveAlgorithm::tree;
    case NcclAlgo::nvls: return CollectiveAlgorithm::nvls;
    case NcclAlgo::nvls_tree: return CollectiveAlgorithm::nvls_tree;
  }
  return CollectiveAlgorithm::ring;
}

// Throws when a forced algorithm cannot run the op on these ranks.
void check_forced(const Platform& p, const CollectiveCall& call, CollectiveAlgorithm forced,
                  const std::vector<CollectiveAlgorithm>& eligible) {
  if (std::find(eligible.begin(), eligible.end(), forced) != eligible.end()) return;
  std::string why;
  if (forced != CollectiveAlgorithm::ring && call.op != CollectiveOp::all_reduce)
    why = fmt::format("{} runs only all_reduce", collective_algorithm_name(forced));
  else if (forced == CollectiveAlgorithm::tree)
    why = "tree needs ranks on at least 2 nodes";
  else if (forced == CollectiveAlgorithm::nvls_tree)
    why = fmt::format("nvls_tree needs ranks on at least 2 nodes whose NVSwitch reduces in-switch, with at least "
                      "2 GPUs per node that have a NIC of their own (hardware {})",
                      p.hardware().name);
  else
    why = fmt::format("nvls needs all ranks on one node whose NVSwitch reduces in-switch (hardware {})",
                      p.hardware().name);
  throw std::invalid_argument(fmt::format("algorithm {} cannot run {} here: {}", collective_algorithm_name(forced),
                                          collective_op_name(call.op), why));
}

// The flow bound and latency of the chosen (algorithm, protocol), from NCCL's model.
// `ring_share`: the fraction of the ring's bus bandwidth one schedule channel carries.
void shape_flows(CollectivePlan& plan, const NcclGraph& g, const NcclChoice& c,
                 const CollectiveCall& call, double ring_share) {
  plan.protocol = c.protocol;
  plan.nccl_time_s = c.time_us * 1e-6;
  const double bw_bytes_per_s = c.cost.alg_bw_gbs * 1e9;
  plan.latency_s = std::max(0.0, plan.nccl_time_s - static_cast<double>(call.bytes()) / bw_bytes_per_s);
  plan.wire_factor = nccl_wire_bytes_per_data_byte(c.protocol);
  // Per channel: its share of the bus bandwidth (a ring hop carries one channel's share
  // at that rate); nvls: each GPU's one flow up and down at algbw. Chains (broadcast,
  // reduce) and trees share the links freely.
  double data_cap = 0;
  const bool chain = call.op == CollectiveOp::broadcast || call.op == CollectiveOp::reduce;
  if (plan.algorithm == CollectiveAlgorithm::ring && !chain) {
    data_cap = c.cost.bus_bw_gbs * 1e9 * ring_share;
    // LL's llMaxBw is NCCL's ceiling on the communicator's whole LL bus bandwidth
    // (tuning.cc applies it to nChannels x bw): the channels enqueue launches for a small
    // operation each run at their own LL rate (ring_share of the bandwidth before the
    // ceiling) until together they reach it, as the tuner, which ignores the launched
    // count, assumes. Spreading the ceiling over every runtime channel made one launched
    // channel of 16 carry 1/16 of it: on 4 DGX H100 nodes a 512 KiB LL all_gather took
    // 149 us, where the tuner said 68 us and LL128 at 1 MiB took 83 us.
    if (c.cost.uncapped_bus_bw_gbs > c.cost.bus_bw_gbs && !fault_active(Fault::nccl_ll_ceiling_per_channel))
      data_cap = std::min(c.cost.bus_bw_gbs * 1e9 / std::max(1, plan.channels), c.cost.uncapped_bus_bw_gbs * 1e9 * ring_share);
  }
  if (plan.algorithm == CollectiveAlgorithm::nvls) data_cap = c.cost.alg_bw_gbs * 1e9;
  if (fault_active(Fault::nccl_channel_cap_omitted)) data_cap = 0;
  plan.flow_cap_bytes_per_s = data_cap * plan.wire_factor;
  // SHM (no P2P): in a ring every GPU writes its share to host memory and reads its
  // neighbour's at once, so each GPU link carries staged traffic both ways; the ring's
  // channels together put at most the machine's host-staged bidirectional rate on the
  // wire (flag bytes included: the copies move them too): the file's figure, else the
  // published share of the link's rate (staged_bidirectional_rate), shared by the
  // schedule's rings (plan.channels). A chain (broadcast, reduce) of three or more ranks
  // does the same at every rank between its ends, which receives each piece while it
  // sends the one before; only a two-rank chain moves its bytes one way.
  // The published share (kStagedBidirectionalLinkShare) was measured on GPUs with a root
  // port each: the root port serves it, so GPUs behind one PCIe switch share their uplink's
  // (8 A100s of a DGX A100 with NCCL_P2P_DISABLE=1: two per x16 uplink, half each;
  // shm_rate_per_gpu). A file's own figure is its GPU pair's as measured there, sharing
  // included.
  if (!g.p2p && plan.algorithm == CollectiveAlgorithm::ring && (!chain || g.ranks >= 3) &&
      !fault_active(Fault::nccl_shm_duplex_cap_omitted)) {
    const double shm_cap = g.shm_rate_per_gpu / std::max(1, plan.channels);
    plan.flow_cap_bytes_per_s = plan.flow_cap_bytes_per_s > 0 ? std::min(plan.flow_cap_bytes_per_s, shm_cap) : shm_cap;
  }
}
// NCCL's chunk and NCCL_STEPS pieces in flight per hop for a tree or NVLS-tree plan (the
// launched channels as NCCL counts them: the tree's by size, NVLS-tree's heads).
void pipeline_tree(CollectivePlan& plan, const Platform& p, const std::vector<int>& rank_gpus, const NcclGraph& g,
                   const NcclChoice& c, const CollectiveCall& call) {
  const HardwareSpec& hw = p.hardware();
  if (plan.algorithm == CollectiveAlgorithm::tree) {
    plan.piece_bytes = nccl_tree_chunk_bytes(g, c.protocol, call.bytes(), nccl_channels_for_size(g, c.algo, c.protocol, call.bytes()));
  } else {
    const auto heads = nvls_heads(p, rank_gpus);
    size_t fewest = heads.empty() ? 1 : heads.front().size();
    for (const auto& h : heads) fewest = std::min(fewest, h.size());
    // Whether GPU 0's NIC shares a PCIe switch with it (NCCL's PATH_PXB or closer).
    bool behind_switch = false;
    const int nic0 = p.nic_of_gpu(0);
    for (const auto& sw : hw.pcie.switches)
      if (std::find(sw.gpus.begin(), sw.gpus.end(), 0) != sw.gpus.end() &&
          std::find(sw.nics.begin(), sw.nics.end(), nic0) != sw.nics.end())
        behind_switch = true;
    plan.piece_bytes = nccl_nvls_tree_chunk_bytes(g, call.bytes(), static_cast<int>(fewest),
                                                  hw.network ? hw.network->nic_bandwidth / 1e9 : 0.0, behind_switch);
  }
  plan.pieces_in_flight = fault_active(Fault::nccl_tree_one_piece_in_flight) ? 1 : kNcclSteps;
}

// NVLS on one node: NCCL's rounds (every NVLS channel's chunk for every head) as the
// schedule's pieces, and the gather stage after the last (CollectivePlan::trailing_stage_s).
// On 8 H100s a 16 MiB all-reduce runs 4 rounds of 4 MiB (32 KiB chunks, 128 ops): the
// scatter and multicast stages fill and the gather stage drains the pipeline, 2 of its 6
// round times, where 512 KiB pieces and no gather stage had cost a 32nd of it.
void pipeline_nvls(CollectivePlan& plan, const NcclGraph& g, const CollectiveCall& call) {
  const Bytes ops = static_cast<Bytes>(nccl_nvls_runtime_channels(g)) * std::max(1, g.nvls_channels);
  plan.piece_bytes = ops * nccl_nvls_chunk_bytes(g, call.bytes());
  const Bytes last_round = std::min(plan.piece_bytes, call.bytes());
  if (plan.flow_cap_bytes_per_s > 0)
    plan.trailing_stage_s = static_cast<double>(last_round) * plan.wire_factor / plan.flow_cap_bytes_per_s;
}

// A host whose collectives are gloo's: one timed activity of gloo's ring time (gloo_model.hpp).
CollectivePlan plan_gloo(const GlooSpec& gloo, int n, const CollectiveCall& call) {
  CollectivePlan plan;
  plan.formulation = Formulation::large_n;
  plan.model_s = gloo_collective_time(gloo, call, n);
  plan.nccl_time_s = *plan.model_s;
  const GlooRingShape shape = gloo_ring_shape(call.bytes(), std::max(n, 1), call.element_bytes);
  plan.reason = fmt::format("gloo ring over TCP: {} segments of {} bytes, {} steps per phase", shape.segments,
                            shape.segment_bytes, shape.steps_per_phase);
  return plan;
}
}  // namespace

CollectivePlan plan_collective(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                               const CollectiveSettings& settings, ScheduleLatencyMemo* memo) {
  const int n = static_cast<int>(rank_gpus.size());
  if (p.hardware().gloo) return plan_gloo(*p.hardware().gloo, n, call);
  CollectivePlan plan;
  NcclGraph g = nccl_graph_of(p, rank_gpus);
  // NCCL_PROTO=LL128 enables LL128 where NCCL's default leaves it off (tuning.cc: the
  // hardware gate applies only to the default, pEnable == 2), e.g. over PCIe.
  if (settings.protocol == NcclProtocol::ll128 && !fault_active(Fault::nccl_forced_protocol_swapped)) g.ll128 = true;
  plan.channels = settings.channels.value_or(g.ring_channels);
  if (plan.channels < 1) throw std::invalid_argument(fmt::format("channels must be positive, got {}", plan.channels));
  const auto eligible = eligible_with(p, rank_gpus, call.op, g);
  std::vector<NcclAlgo> algos;
  if (settings.algorithm) {
    check_forced(p, call, *settings.algorithm, eligible);
    algos.push_back(to_nccl(*settings.algorithm));
  } else {
    for (auto a : eligible) algos.push_back(to_nccl(a));
  }
  std::vector<NcclProtocol> protocols{NcclProtocol::ll, NcclProtocol::ll128, NcclProtocol::simple};
  if (settings.protocol) protocols = {*settings.protocol};
  if (n < 2 || call.count == 0) {
    plan.algorithm = settings.algorithm.value_or(CollectiveAlgorithm::ring);
    plan.reason = settings.algorithm ? "forced" : "nothing to move";
    choose_formulation(plan, n, call, settings);
    return plan;
  }
  // NCCL's tuner. A forced protocol that no usable algorithm runs (NVLS with LL or LL128)
  // is refused, as NCCL fails with no algorithm/protocol available.
  NcclChoice c;
  try {
    c = nccl_choose(g, call.op, algos, call.bytes(), protocols);
  } catch (const std::invalid_argument&) {
    if (!settings.protocol) throw;
    if (!fault_active(Fault::nccl_forced_protocol_swapped)) {
      std::string names;
      for (auto a : algos) names += fmt::format("{}{}", names.empty() ? "" : ", ", collective_algorithm_name(from_nccl(a)));
      throw std::invalid_argument(fmt::format("protocol {} cannot run {} with {} here (NCCL: no algorithm/protocol "
                                              "available); {}",
                                              nccl_protocol_name(*settings.protocol), collective_op_name(call.op), names,
                                              algos.size() == 1 && algos[0] == NcclAlgo::nvls
                                                  ? "NVLS runs Simple only"
                                                  : "let NCCL choose the protocol"));
    }
    c = nccl_choose(g, call.op, algos, call.bytes());
  }
  plan.algorithm = from_nccl(c.algo);
  // NCCL launches `launched` of its runtime channels (twice the ring graph's: each graph
  // ring runs as two thread blocks), each with 1/runtime_channels of the bus bandwidth.
  // The schedule keeps one channel per distinct ring (at most the graph's), each carrying
  // its share of the launched blocks' bandwidth; a forced count is taken as graph rings.
  double ring_share = 1.0 / g.ring_channels;
  if (!settings.channels && settings.nccl_model) {
    const int launched = nccl_channels_for_size(g, c.algo, c.protocol, call.bytes());
    // Tree: every launched channel (NCCL runs each tree graph channel twice, once per tree
    // of the double binary tree: tree_channels).
    const int rings = c.algo == NcclAlgo::nvls || c.algo == NcclAlgo::tree ? launched : std::min(launched, g.ring_channels);
    plan.channels = rings;
    ring_share = static_cast<double>(launched) / (static_cast<double>(g.runtime_channels) * rings);
  }
  // NVLS-tree: each head's share along both trees (collectives.hpp), unless forced.
  if (!settings.channels && c.algo == NcclAlgo::nvls_tree) plan.channels = 2 * g.nvls_channels;
  std::string times;
  for (auto a : algos)
    for (auto pr : protocols) {
      const double t = nccl_time_us(g, call.op, a, pr, call.bytes());
      if (t >= 0)
        times += fmt::format("{}{}/{} {:.3g} us", times.empty() ? "" : ", ", collective_algorithm_name(from_nccl(a)),
                             nccl_protocol_name(pr), t);
    }
  plan.reason = settings.algorithm || settings.protocol
                    ? fmt::format("forced {}/{}", collective_algorithm_name(plan.algorithm),
                                  nccl_protocol_name(c.protocol))
                    : fmt::format("{}/{}: least NCCL tuner time ({})", collective_algorithm_name(plan.algorithm),
                                  nccl_protocol_name(c.protocol), times);
  shape_flows(plan, g, c, call, ring_share);
  if (settings.nccl_model && (plan.algorithm == CollectiveAlgorithm::tree || plan.algorithm == CollectiveAlgorithm::nvls_tree))
    pipeline_tree(plan, p, rank_gpus, g, c, call);
  if (settings.nccl_model && plan.algorithm == CollectiveAlgorithm::nvls && !fault_active(Fault::nccl_nvls_rounds_ignored))
    pipeline_nvls(plan, g, call);
  choose_formulation(plan, n, call, settings);
  if (!settings.nccl_model) {
    plan.wire_factor = 1.0;
    plan.flow_cap_bytes_per_s = 0;
    return plan;
  }
  plan.extra_latency_s = std::max(0.0, plan.latency_s - schedule_latency(p, rank_gpus, call, plan, memo));
  if (fault_active(Fault::nccl_latency_omitted)) plan.extra_latency_s = 0;
  return plan;
}

namespace {

}  // namespace

Seconds ring_path_latency(const Platform& p, const std::vector<int>& rank_gpus,
                          const std::vector<std::vector<int>>& orders, Elements steps) {
  const size_t n = rank_gpus.size();
  if (n < 2 || steps <= 0) return 0;
  // The ring's critical path at zero bytes: ring_channel_path with every drain 0 (the
  // planted lock-step fault included).
  Seconds path = 0;
  std::vector<Seconds> hop(n), no_drain(n, 0.0);
  for (const auto& o : orders) {
    for (size_t i = 0; i < n; ++i) hop[i] = p.gpu_route(rank_gpus[o[i]], rank_gpus[o[(i + 1) % n]]).latency_s;
    path = std::max(path, ring_channel_path(hop, no_drain, steps));
  }
  return path;
}

namespace {

// The slowest hop of any ring channel: the route latency between ring neighbours.
Seconds ring_slowest_hop(const Platform& p, const std::vector<int>& rank_gpus, int channels) {
  const int n = static_cast<int>(rank_gpus.size());
  Seconds hop = 0;
  for (const auto& o : ring_orders(p, rank_gpus, channels))
    for (int i = 0; i < n; ++i)
      hop = std::max(hop, p.gpu_route(rank_gpus[o[i]], rank_gpus[o[(i + 1) % n]]).latency_s);
  return hop;
}

// The deepest path up any of the tree channels `tcs`: each rank's route latencies summed
// from the rank up to the root, in that order.
Seconds tree_deepest_path(const Platform& p, const std::vector<int>& rank_gpus, const std::vector<TreeChannel>& tcs) {
  const int n = static_cast<int>(rank_gpus.size());
  auto lat = [&](int a, int b) { return p.gpu_route(rank_gpus[a], rank_gpus[b]).latency_s; };
  Seconds deepest = 0;
  for (const auto& tc : tcs)
    for (int r = 0; r < n; ++r) {
      Seconds up = 0;
      for (int q = r; tc.parent[q] >= 0; q = tc.parent[q]) up += lat(q, tc.parent[q]);
      deepest = std::max(deepest, up);
    }
  return deepest;
}

// `compute(channels)` through the memo's map (the value depends on the rank set and the
// channel count only, not on the call).
template <typename F> Seconds memoised(std::map<int, Seconds>* memo, int channels, F compute) {
  if (!memo) return compute(channels);
  // Planted fault: the memo keyed without the channel count.
  const int key = fault_active(Fault::schedule_memo_ignores_channels) ? 0 : channels;
  auto it = memo->find(key);
  if (it == memo->end()) it = memo->emplace(key, compute(channels)).first;
  return it->second;
}

}  // namespace

Seconds schedule_latency(const Platform& p, const std::vector<int>& rank_gpus, const CollectiveCall& call,
                         const CollectivePlan& plan, ScheduleLatencyMemo* memo) {
  const int n = static_cast<int>(rank_gpus.size());
  if (n < 2) return 0;
  switch (plan.algorithm) {
    case CollectiveAlgorithm::ring: {
      const bool chain = call.op == CollectiveOp::broadcast || call.op == CollectiveOp::reduce;
      if (chain) {
        const Seconds hop = memoised(memo ? &memo->ring_hop_s : nullptr, plan.channels,
                                     [&](int c) { return ring_slowest_hop(p, rank_gpus, c); });
        return (n - 1) * hop;
      }
      // A chunk's path: 2(N - 1) hops for all_reduce, N - 1 for the others.
      const int steps = call.op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1;
      return memoised(memo ? &memo->ring_path_s : nullptr, 2 * plan.channels + (steps == n - 1 ? 0 : 1), [&](int key) {
        return ring_path_latency(p, rank_gpus, ring_orders(p, rank_gpus, key / 2), steps);
      });
    }
    case CollectiveAlgorithm::tree: {
      const Seconds deepest = memoised(memo ? &memo->tree_deepest_s : nullptr, std::min(plan.channels, 2),
                                       [&](int c) { return tree_deepest_path(p, rank_gpus, tree_channels(p, rank_gpus, c)); });
      return 2 * deepest;
    }
    case CollectiveAlgorithm::nvls_tree: {
      // Channels 0 and 1: the first head along both trees (the other heads' rails are alike).
      const Seconds deepest =
          memoised(memo ? &memo->nvls_tree_deepest_s : nullptr, std::min(plan.channels, 2),
                   [&](int c) { return tree_deepest_path(p, rank_gpus, nvls_tree_channels(p, rank_gpus, c)); });
      return 2 * deepest;
    }
    case CollectiveAlgorithm::nvls: {
      const auto* sw = p.nvswitch_host(p.node_of_gpu(rank_gpus[0]));
      Seconds port = 0;
      for (int g : rank_gpus) port = std::max(port, p.route(p.gpu_host(g), sw).latency_s);
      return 2 * port;
    }
  }
  return 0;
}

// ---- the group -------------------------------------------------------------------------

struct CollectiveGroup::State {
  explicit State(Platform& p) : exact(p) {}
  ExactTransport exact;
  std::vector<int> issued;  // per rank: calls issued so far
  struct Pending {
    CollectiveCall call;
    CollectivePlan plan;
    int arrived = 0, finished = 0;
    Seconds start_s = 0, end_s = 0;
    sg4::BarrierPtr barrier;  // large-N: ranks leave when the last one's sleep ended
  };
  std::map<int, Pending> pending;  // by call index
  // Plans and large-N durations depend only on the call (DDP repeats bucket sizes).
  using CallKey = std::tuple<int, Elements, Bytes, int>;
  struct ByCall {
    CollectivePlan plan;
    std::optional<Seconds> duration;           // large-N
    std::shared_ptr<const LinkBytes> traffic;  // large-N
  };
  std::map<CallKey, ByCall> by_call;
  ScheduleLatencyMemo latency_memo;  // schedule_latency's call-independent parts
  std::vector<CollectiveRecord> records;
  int next_record = 0;
};

CollectiveGroup::CollectiveGroup(Platform& platform, std::vector<int> rank_gpus, CollectiveSettings settings,
                                 int participants)
    : platform_(platform), rank_gpus_(std::move(rank_gpus)), settings_(settings),
      participants_(participants == 0 ? static_cast<int>(rank_gpus_.size()) : participants),
      state_(std::make_unique<State>(platform)) {
  if (rank_gpus_.empty()) throw std::invalid_argument("CollectiveGroup: no ranks");
  if (participants_ < 1 || participants_ > static_cast<int>(rank_gpus_.size()))
    throw std::invalid_argument(fmt::format("CollectiveGroup: {} participants for {} ranks (allowed 1..{}, or 0 for all)",
                                            participants, rank_gpus_.size(), rank_gpus_.size()));
  if (participants_ < static_cast<int>(rank_gpus_.size())) {
    // Symmetric ranks: only the large-N formulation can time ranks that have no actor.
    if (settings_.formulation == Formulation::exact)
      throw std::invalid_argument(fmt::format(
          "CollectiveGroup: the exact formulation needs all {} ranks to participate, {} given", rank_gpus_.size(),
          participants_));
    settings_.formulation = Formulation::large_n;
  }
  std::set<int> seen;
  for (int g : rank_gpus_) {
    if (g < 0 || g >= platform_.gpu_count())
      throw std::invalid_argument(
          fmt::format("CollectiveGroup: GPU {} is not on the platform (0..{})", g, platform_.gpu_count() - 1));
    if (!seen.insert(g).second) throw std::invalid_argument(fmt::format("CollectiveGroup: GPU {} listed twice", g));
  }
  state_->issued.assign(rank_gpus_.size(), 0);
}

CollectiveGroup::~CollectiveGroup() = default;

const std::vector<CollectiveRecord>& CollectiveGroup::records() const { return state_->records; }

void CollectiveGroup::run(int rank, const CollectiveCall& call) {
  const int n = size();
  const int arrivals = participants_;  // ranks that call run (all but in a symmetric group)
  if (rank < 0 || rank >= arrivals)
    throw std::invalid_argument(fmt::format("rank {} is not in 0..{}", rank, arrivals - 1));
  if (call.count < 0) throw std::invalid_argument(fmt::format("collective count {} is negative", call.count));
  if (call.element_bytes <= 0)
    throw std::invalid_argument(fmt::format("element size {} bytes is not positive", call.element_bytes));
  if ((call.op == CollectiveOp::broadcast || call.op == CollectiveOp::reduce) && (call.root < 0 || call.root >= n))
    throw std::invalid_argument(fmt::format("{} root {} is not in 0..{}", collective_op_name(call.op), call.root, n - 1));
  State& st = *state_;
  const int index = st.issued[rank]++;
  auto [it, created] = st.pending.try_emplace(index);
  State::Pending& pd = it->second;
  const State::CallKey key{static_cast<int>(call.op), call.count, call.element_bytes, call.root};
  if (created) {
    pd.call = call;
    auto cached = st.by_call.find(key);
    if (cached == st.by_call.end())
      cached = st.by_call.emplace(key, State::ByCall{plan_collective(platform_, rank_gpus_, call, settings_, &st.latency_memo), {}, {}})
                   .first;
    pd.plan = cached->second.plan;
    pd.barrier = sg4::Barrier::create(static_cast<unsigned>(arrivals));
  } else if (pd.call.op != call.op || pd.call.count != call.count || pd.call.root != call.root) {
    throw std::invalid_argument(fmt::format("rank {} issued {} of {} elements as call {}, but another rank issued {} of {}",
                                            rank, collective_op_name(call.op), call.count, index,
                                            collective_op_name(pd.call.op), pd.call.count));
  }
  const Seconds arrive = sg4::Engine::get_clock();
  pd.start_s = std::max(pd.start_s, arrive);
  ++pd.arrived;

  if (pd.plan.formulation == Formulation::large_n) {
    // The last rank to arrive starts the clock and sleeps the model's duration; the others
    // wait at the barrier, which opens when it arrives there too (one timed activity
    // per collective instead of one per rank).
    if (pd.arrived == arrivals && timed_) {
      auto& cached = st.by_call.at(key);
      if (!cached.duration) {
        cached.duration = (cached.plan.model_s ? *cached.plan.model_s
                                               : collective_time_large_n(platform_, rank_gpus_, pd.call, pd.plan, settings_)) +
                          cached.plan.extra_latency_s + cached.plan.trailing_stage_s;
        cached.traffic =
            std::make_shared<const LinkBytes>(large_n_traffic(platform_, rank_gpus_, pd.call, pd.plan, settings_));
      }
      platform_.account_pattern(cached.traffic);
      sg4::this_actor::sleep_until(pd.start_s + *cached.duration);
    }
    pd.barrier->wait();
  } else {
    run_exact(st.exact, platform_, rank_gpus_, rank, index, pd.call, pd.plan, settings_);
  }

  pd.end_s = std::max(pd.end_s, sg4::Engine::get_clock());
  if (++pd.finished == arrivals) {
    // Records go out in issue order even if a later call finished first.
    while (st.pending.count(st.next_record) && st.pending[st.next_record].finished == arrivals) {
      const auto& done = st.pending[st.next_record];
      st.records.push_back({done.call, done.plan, done.start_s, done.end_s});
      st.pending.erase(st.next_record);
      ++st.next_record;
    }
  }
}

// ---- DataParallel's copies -----------------------------------------------------------------

sg4::CommPtr copy_gpu_to_gpu_async(Platform& p, int src_gpu, int dst_gpu, Bytes n) {
  return p.transfer_async(p.gpu_host(src_gpu), p.gpu_host(dst_gpu), n);
}
void copy_gpu_to_gpu(Platform& p, int src_gpu, int dst_gpu, Bytes n) { copy_gpu_to_gpu_async(p, src_gpu, dst_gpu, n)->wait(); }
void copy_host_to_gpu(Platform& p, int gpu, Bytes n) { p.transfer(p.cpu_host_of_gpu(gpu), p.gpu_host(gpu), n); }
void copy_gpu_to_host(Platform& p, int gpu, Bytes n) { p.transfer(p.gpu_host(gpu), p.cpu_host_of_gpu(gpu), n); }

}  // namespace dpt::sim
