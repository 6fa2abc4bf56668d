// NCCL's own performance model, as its tuner computes it (NCCL 2.2x, src/graph/tuning.cc,
// search.cc, topo.h), as pure functions of the hardware spec: the channel count and
// per-channel bandwidth its topology search finds, the latency and bus bandwidth of every
// (algorithm, protocol) pair, and the pair its tuner picks for a message size.
//
// The twin uses it in two places (collectives.cpp): the choice of algorithm and protocol,
// exactly as NCCL chooses; and the shape of the simulated flows: each channel's flow is
// bounded by NCCL's per-channel bandwidth for the chosen protocol, carries the protocol's
// wire bytes (LL: 8-byte lines with 4 data bytes, LL128: 128-byte lines with 120 data
// bytes), and the collective pays NCCL's latency term (base latency plus a hardware
// latency per step by link type). SimGrid still carries the bytes, so contention between
// flows, and with other traffic, is simulated, not assumed.
//
// Units follow NCCL's: bandwidths in GB/s (1e9 bytes per second), latencies in
// microseconds, inside this model; the plan converts to bytes per second and seconds.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "engine/core/collective.hpp"
#include "engine/core/units.hpp"
#include "sim/net/hardware.hpp"

namespace dpt::sim {

enum class NcclProtocol { ll, ll128, simple };
const char* nccl_protocol_name(NcclProtocol p);  // "LL", "LL128", "Simple" (NCCL_PROTO names)
// Parses a protocol name (case-insensitive); throws std::invalid_argument naming it.
NcclProtocol parse_nccl_protocol(const std::string& name);

// NCCL's tuner algorithms that the twin runs (NCCL_ALGO names; nvls_tree is "NVLSTree":
// NVLink SHARP within each node, a tree of the nodes' NVLS heads across them).
enum class NcclAlgo { tree = 0, ring = 1, nvls = 2, nvls_tree = 3 };

// Bytes on the wire per data byte: LL sends 8-byte lines of 4 data bytes and 4 flag bytes;
// LL128 128-byte lines of 120 data bytes and 8 flag bytes (src/include/device.h,
// NCCL_LL_LINES / NCCL_LL128_DATAELEMS); Simple sends the data as is.
double nccl_wire_bytes_per_data_byte(NcclProtocol p);

// Whose tuner constants the model uses: NCCL master's, or those of the 2.18.5-1 tag where
// they differ (ring LL bandwidth, llMaxBw, NVLS and tree latencies; nccl_model.cpp).
enum class NcclTuner { master, v2_18_5 };
// "master" or "2.18.5" (known_nccl_versions()); throws std::invalid_argument naming the
// version and the known ones.
NcclTuner parse_nccl_tuner(const std::string& version);

// What NCCL's topology search finds for one communicator (see nccl_model.cpp).
struct NcclGraph {
  int compcap = 80;           // CUDA compute capability x 10 (inferred from the GPU name)
  int compcap_index = 1;      // NCCL's tuner index: 0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell
  bool cpu_amd = false;       // host CPU vendor (NCCL's llMaxBws row for several nodes)
  bool cpu_x86 = true;        // host CPU architecture (not Grace, Neoverse, POWER)
  int ranks = 1;
  int nodes = 1;
  bool intra_nvlink = false;  // intra-node links: NVLink (NCCL_HW_NVLINK) or PCI (NCCL_HW_PCI)
  bool p2p = true;            // intra-node transport P2P (false: SHM through host memory)
  // Per GPU and direction, the rate an SHM ring moves at on the communicator's GPUs of a
  // node (shm_rate_per_gpu); 0 until nccl_graph sets it.
  double shm_rate_per_gpu = 0;
  int ring_channels = 1;      // nChannels of the ring graph (trees use the same, as NCCL tries)
  // comm->nChannels: the channels (thread blocks) NCCL launches at most, the ring graph's
  // duplicated once more when the communicator connects (connect.cc, ncclTopoPostset:
  // "Duplication should be complete now", min(MAXCHANNELS, 2 x nChannels)); an 8x A100
  // NVSwitch node logs "Channel 23/24". The tuner still models ring_channels x ring_bw_gbs,
  // so each launched channel carries a 1/runtime_channels share of that bus bandwidth.
  int runtime_channels = 1;
  double ring_bw_gbs = 0;     // per-channel bandwidth of the ring graph (bwIntra, or bwInter across >2 nodes)
  // NVLS graph (NVSwitch with in-switch reduction, Hopper and later): on one node one
  // channel per GPU (NVLS); across nodes one channel per NVLS head, a GPU with its own
  // NIC (NVLS-tree). 0: no NVLS graph.
  int nvls_channels = 0;
  double nvls_bw_gbs = 0;        // per-channel bwIntra of the NVLS graph
  double nvls_inter_bw_gbs = 0;  // per-channel bwInter of the NVLS graph (across nodes)
  bool ll128 = true;          // LL128 enabled by NCCL's default rules
  double latency_scale = 1.0; // hardware efficiency.nccl_latency (1: NCCL's constants)
  NcclTuner tuner = NcclTuner::master;  // the hardware spec's nccl_version
};

// NCCL's graph for `ranks` ranks on `nodes` nodes of `hw` (ranks evenly spread), with
// intra-node peer access `p2p`. `nvls_heads`: the NVLS heads (GPUs with a NIC of their own)
// of the node with the fewest, when the caller knows them (nvls_heads in collectives.hpp);
// -1: min(ranks per node, NICs per node). `local_gpus`: the node-local indices of one
// node's GPUs in the communicator (NCCL searches the graph of those GPUs alone); empty:
// the first ranks/nodes GPUs.
// NVLink bandwidth per link as NCCL's topology counts it, by compute capability (GB/s,
// src/graph/topo.h SM*_NVLINK_BW): NCCL plans with this figure, not the link's line rate.
double nccl_nvlink_link_bw_gbs(int compcap);

NcclGraph nccl_graph(const HardwareSpec& hw, int ranks, int nodes, bool p2p, int nvls_heads = -1,
                     std::vector<int> local_gpus = {});
// The most of these node-local GPUs behind one PCIe switch of hw.
int gpus_per_root_port(const HardwareSpec& hw, const std::vector<int>& local_gpus);
// Per GPU and direction, the rate an SHM ring moves at on these node-local GPUs (the slowest
// of them bounds the ring): the file's pcie.staged_bidirectional (its GPU pair's, as measured
// there, sharing included), else the published share (kStagedBidirectionalLinkShare) of the
// port the GPU's traffic enters the host through: its own link, or its switch's uplink split
// among the GPUs behind that switch, whichever is less.
BytesPerSecond shm_rate_per_gpu(const HardwareSpec& hw, const std::vector<int>& local_gpus);

// Latency (us) and algorithm bandwidth (GB/s) of one (op, algorithm, protocol), as
// ncclTopoTuneModel fills comm->latencies / comm->bandwidths; bandwidth 0 = not usable.
struct NcclCost {
  double latency_us = 0;
  double bus_bw_gbs = 0;   // bus bandwidth (before conversion to algorithm bandwidth)
  // Ring LL's bus bandwidth before llMaxBw, NCCL's ceiling on the whole communicator's LL
  // rate: every channel at its own rate (the graph's per-channel bandwidth x the LL factor).
  // Equal to bus_bw_gbs where no ceiling applies.
  double uncapped_bus_bw_gbs = 0;
  double alg_bw_gbs = 0;   // algorithm bandwidth: bytes / time
};
NcclCost nccl_cost(const NcclGraph& g, CollectiveOp op, NcclAlgo a, NcclProtocol p);

// ncclTopoGetAlgoTime for one operation of `bytes`: latency + bytes / bandwidth, with the
// tree correction factors and the ring plateau effect; negative when not usable.
double nccl_time_us(const NcclGraph& g, CollectiveOp op, NcclAlgo a, NcclProtocol p, Bytes bytes);

// The tuner's choice among `algos` (those the twin can run here) and every protocol.
struct NcclChoice {
  NcclAlgo algo = NcclAlgo::ring;
  NcclProtocol protocol = NcclProtocol::simple;
  double time_us = 0;
  NcclCost cost;
};
// Throws std::invalid_argument when no (algorithm, protocol) in `algos` is usable.
NcclChoice nccl_choose(const NcclGraph& g, CollectiveOp op, const std::vector<NcclAlgo>& algos, Bytes bytes,
                       const std::vector<NcclProtocol>& protocols = {NcclProtocol::ll, NcclProtocol::ll128,
                                                                      NcclProtocol::simple});

// Channels NCCL launches for one operation of `bytes` (enqueue.cc), from runtime_channels
// (nvls: nvls_channels) down: it drops channels while
// nBytes < channels x threads x thread threshold (threads: LL 512, LL128 640, Simple 512;
// thresholds per thread: LL 8 bytes x ranks for ring, LL128 8, Simple 64; device.h).
int nccl_channels_for_size(const NcclGraph& g, NcclAlgo a, NcclProtocol p, Bytes bytes);

// Data bytes NCCL's tree moves per pipeline step of one operation on `channels` channels
// (enqueue.cc): one step of the protocol's buffer (NCCL_STEPS = 8; Simple 4 MiB -> 512 KiB;
// LL 512 KiB of 16-byte lines -> 64 KiB, half of it data: 32 KiB; LL128 4,915,200 B ->
// 614,400 B, 120 of every 128 bytes data: 576,000 B), LL128's halved while each channel
// has too few chunks to fill the tree's pipeline (nsteps = 1 + log2(nodes) + 0.1 ppn:
// fewer than nsteps x 64 / ppn chunks down to 128 KiB, nsteps x 16 / ppn down to 32 KiB;
// 2.18.5 halves the wire chunk). 2.18.5 also halves Simple's while a channel has fewer
// than depth x 8 / x 4 / x 1 chunks, down to 128 / 64 / 32 KiB (depth = ppn - 1 +
// log2(nodes), connect.cc).
Bytes nccl_tree_chunk_bytes(const NcclGraph& g, NcclProtocol p, Bytes bytes, int channels);

// Data bytes NCCL's NVLS-tree moves per pipeline step across nodes (enqueue.cc
// calcCollChunking; transport/nvls.cc ncclNvlsTuning), for `heads` NVLS heads per node:
// - master: min(NCCL_NVLS_CHUNKSIZE 128 KiB, treeMaxChunkSize: 64 KiB on 4 nodes or more,
//   else 128 KiB; Blackwell's own table by node count, ranks per node, NIC rate and
//   whether the NIC sits behind the GPU's PCIe switch (PATH_PXB));
// - 2.18.5: one Simple step, 512 KiB;
// then shrunk while the operation has few chunks per concurrent op (NVLS channels x
// heads; NVLS channels 16 on Hopper, 24-32 on Blackwell): below 32 ops x chunk to 256 KiB,
// 16 x to 128 KiB, 4 x to 64 KiB, 1 x to 32 KiB.
Bytes nccl_nvls_tree_chunk_bytes(const NcclGraph& g, Bytes bytes, int heads, double nic_gbs, bool nic_behind_pcie_switch);

// NVLS on one node (enqueue.cc calcCollChunking, NCCL_ALGO_NVLS; the same in 2.18.5): the
// data bytes each (channel, head) pair moves per pipeline round: min(one Simple step, 512
// KiB; NCCL_NVLS_CHUNKSIZE, 128 KiB), shrunk while the operation has few chunks per
// concurrent op (concurrentOps = NVLS channels x heads): below 64 x ops x chunk to 64 KiB,
// 8 x to 32 KiB, 2 x to 16 KiB. 8 H100s (16 channels x 8 heads = 128 ops): 1 MiB 16 KiB,
// 16 MiB 32 KiB, 64 MiB and 256 MiB 64 KiB, 1 GiB and more 128 KiB.
Bytes nccl_nvls_chunk_bytes(const NcclGraph& g, Bytes bytes);
// The NVLS channels (thread blocks) NCCL launches (transport/nvls.cc ncclNvlsTuning; 2.18.5
// NCCL_NVLS_NCHANNELS): 16 on Hopper (NVLS_NCHANNELS_SM90); Blackwell 24 on one node
// (NVLS_NCHANNELS_SM100_NVL), 32 across nodes (NVLS_NCHANNELS_SM100). Not the NVLS graph's
// channel count (NcclGraph::nvls_channels: its heads on one node).
int nccl_nvls_runtime_channels(const NcclGraph& g);
// The stages NCCL's one-node NVLS all-reduce kernel pipelines each round through
// (device/all_reduce.h, RunWorkColl<..., NCCL_ALGO_NVLS, ...>, oneNode): scatter warps put
// each head's chunk in its buffer, reduce warps of the head ld_reduce it through the switch
// and multicast the sum back (multimem), gather warps copy the result out: 3, each a
// round behind the one before (the connection FIFOs).
inline constexpr int kNvlsOneNodeStages = 3;

// NCCL_STEPS (device.h): the pipeline steps a connection buffers, so the pieces a tree
// hop keeps in flight: a piece's bytes follow the previous one's on the wire while its
// latency overlaps them.
inline constexpr int kNcclSteps = 8;

// Compute capability x 10 of a GPU by name (known_compute_capability in hardware.hpp:
// H100 90, A100 80, V100 70, L40S/RTX 4090 89, RTX A6000/3090 86, RTX 2080 Ti/TITAN RTX 75,
// B200 100); 80 for a name not in the table. A spec's own field wins: gpu_compute_capability_of.
int gpu_compute_capability(const std::string& gpu_name);

}  // namespace dpt::sim
