// HardwareSpec: one machine (or cluster of identical nodes) as the twin models it,
// loaded from scenarios/hardware/*.yaml and validated on load.
//
// Every rate here is a datasheet or microbenchmark figure; the YAML files say
// which, next to each number. Efficiency factors are explicit fields (never
// fitted to end-to-end collective or training-step results, which are what the
// twin predicts); calibration from a real node may override them.
//
// Every quantity needs its unit, and every number has a plausibility range with physical
// meaning, checked on load (hardware.cpp lists them): e.g. link latencies 1 ns .. 1 s,
// per-op host costs 1 ns .. 100 ms, link and memory bandwidths 1 MB/s .. 1 PB/s, GPU
// memory 1 MiB .. 64 TiB, peak rates 1 GFLOPS .. 100 PFLOPS, nodes 1 .. 4096.
//
// Schema (units as in yaml_util.hpp; every key below is required unless marked optional):
//   name: dgx-h100                     # optional; defaults to the file's stem
//   description: "..."                 # optional, free text
//   nodes: 1                           # identical nodes (>= 1); > 1 needs `network`
//   gpus_per_node: 8
//   nccl_version: "2.18.5"             # optional: NCCL release of the tuner constants (master, 2.18.5)
//   nccl_p2p_disable: true             # optional (false): the run set NCCL_P2P_DISABLE=1 (NCCL's GPU pairs
//                                      #   all go through host memory, its SHM transport, NVLink included)
//   gpu:
//     name: H100-SXM5-80GB
//     peak_flops: {f32: 66.9 TFLOPS, tf32: 494.7 TFLOPS, bf16: ..., f16: ..., f64: ...}  # dense; tf32/bf16/f16 optional
//     memory: 81559 MiB                # binary units (MiB, GiB): what CUDA reports; "80 GB" is refused
//     memory_bandwidth: 3.35 TB/s
//     kernel_launch_latency: 4 us
//     sm_count: 132                    # optional: streaming multiprocessors (interference with NCCL)
//     compute_capability: 9.0          # optional: CUDA's (NCCL's algorithms and tuning); else read off the name
//     op_efficiency:                   # optional, per op class (OpEfficiencySpec), each in (0, 1]: one fraction,
//                                      #   or one per compute type ({f32: .., tf32: .., bf16: .., f16: .., f64: ..})
//       gemm: {tf32: 0.744, f16: 0.737}  # fraction of the type's peak (a microbenchmark's; default efficiency.gemm)
//       conv: {f32: 0.733}             # cuDNN convolutions (default efficiency.gemm)
//       attention: 0.74                # eager attention's batched matmuls (default efficiency.gemm)
//       sdpa: {f16: 0.55}              # fused attention, FlashAttention's FLOP count (default efficiency.gemm)
//       norm: 0.8                      # memory-bound classes: fraction of memory bandwidth
//       elementwise: 0.8               #   (default efficiency.memory_bandwidth)
//       embedding: 0.8
//       loss: 0.8
//       optimizer: 0.8
//   pcie:
//     generation: 5                    # 1..6; per-lane rate from the PCI-SIG spec
//     lanes: 16                        # lanes of each GPU's (and NIC's) link
//     latency: 1 us                    # per traversal of a GPU/NIC link
//     peer_to_peer: true               # false: GPU<->GPU copies are staged through host memory
//     staged_bidirectional: 3.05 GB/s  # optional: per-direction rate of host-staged GPU<->GPU copies
//                                      #   running both ways at once (p2pBandwidthLatencyTest);
//                                      #   unset: 0.41 of the GPU link's raw rate (kStagedBidirectionalLinkShare)
//     staged_unidirectional: 9.6 GB/s  # optional: rate of a host-staged GPU->GPU copy one way
//                                      #   ("Unidirectional P2P=Disabled"); unset: 0.64 of the raw
//                                      #   rate (kStagedUnidirectionalLinkShare)
//     switches:                        # optional; placing GPUs, they place every GPU (none placed:
//                                      #   all hang off socket 0's root complex)
//       - {socket: 0, gpus: [0, 1], nics: [0, 1], uplink_lanes: 16}
//   nvlink:                            # optional: direct GPU-GPU links
//     generation: 2
//     link_bandwidth: 25 GB/s          # per link, per direction
//     latency: 0.7 us
//     pairs: [[0, 1, 1], [0, 3, 2], ...]   # [gpu a, gpu b, links]
//   nvswitch:                          # optional: every GPU to one logical switch
//     generation: 3
//     links_per_gpu: 18
//     link_bandwidth: 25 GB/s          # per link, per direction
//     latency: 0.7 us
//     in_switch_reduction: true        # NVLS (NVSwitch gen3 with SHARP)
//   host:
//     cpu: "2x Intel Xeon Platinum 8480C"
//     sockets: 2
//     cores: 112                       # all sockets together
//     memory_bandwidth: 307.2 GB/s     # per socket
//     inter_socket_bandwidth: 64 GB/s  # per direction (QPI/UPI/xGMI)
//     dispatch_cost: 10 us             # host (Python framework) cost per dispatched op
//     gil: true                        # dispatch of all threads serialised (Python's GIL)
//   network:                           # required when nodes > 1 (optional otherwise)
//     nics_per_node: 8
//     nic_bandwidth: 400 Gb/s          # per NIC, per direction
//     gpu_direct_rdma: true            # optional (default true): false stages NET traffic through host memory
//     latency: 2 us                    # NIC-to-NIC through one switch
//     topology: single_switch | fat_tree
//     nodes_per_leaf: 16               # fat_tree only
//     oversubscription: 1.0            # fat_tree only, optional (leaf uplinks = downlinks / this)
//     switch_radix: 64                 # fat_tree only, optional: ports per switch; past this many
//                                      #   leaves a core level joins pods of radix / 2 leaves
//     switch_link_rate: 400 Gb/s       # fat_tree only, optional: switch-to-switch link rate (default nic_bandwidth)
//     core_oversubscription: 1.0       # fat_tree only, optional (pod uplinks = leaf uplinks / this)
//   efficiency:                        # optional block; each field optional with a documented default
//     gemm: 0.74                       # fraction of peak flops a large GEMM reaches (the default)
//     memory_bandwidth: 0.85           # fraction of memory bandwidth a streaming kernel reaches
//     p2p: 0.9                         # fraction of NVLink/NVSwitch bandwidth a peer copy reaches
//     pcie: 0.8                        # fraction of raw PCIe bandwidth a DMA copy reaches
//     nic: 0.95                        # fraction of the NIC line rate RDMA reaches
//     nccl_latency: 1.0                # scale on NCCL's latency term (0.1 .. 10; calibrate --from)
//     ridge_exponent: 1.5              # compute-bound kernels: (compute^p + memory^p)^(1/p), p in 1 .. 16
//   gloo:                              # optional: collectives run as gloo's ring over loopback TCP
//     tcp_bandwidth: 2 GB/s            #   (sim/collectives/gloo_model.hpp), not as NCCL: a host
//     message_latency: 20 us           #   platform of CPU workers; rates from microbenchmarks
//     reduce_bandwidth: 5 GB/s
//     tcp_bandwidth_by_buffer:         #   optional: the exchange rate by buffer size, ascending
//       - {buffer: 4 MiB, bandwidth: 1.8 GB/s}
//     core_share: 0.9                  #   optional: the core a transfer takes from compute (0..1)
#pragma once
#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/precision.hpp"
#include "engine/core/units.hpp"

namespace dpt::sim {

// Compute types with their own peak rate (tensor cores for tf32/bf16/f16): the
// engine's, which the twin's devices choose per op from the training precision.
using ComputeType = dpt::ComputeType;
const char* compute_type_name(ComputeType t);

// Dense peak rates per compute type, from the GPU's datasheet.
struct PeakFlops {
  FlopsPerSecond f32 = 0;
  std::optional<FlopsPerSecond> tf32;
  std::optional<FlopsPerSecond> bf16;
  std::optional<FlopsPerSecond> f16;
  FlopsPerSecond f64 = 0;
};

// Per op class, the fraction of a rate its kernels reach, each in (0, 1]: of the compute
// type's peak for the compute-bound classes (gemm, conv, attention), of memory_bandwidth
// for the memory-bound ones (norm, elementwise, embedding, loss, optimizer), whose time is
// bytes moved / achieved bandwidth. Unset: gemm and attention take efficiency.gemm, the
// memory-bound classes efficiency.memory_bandwidth (the STREAM figure).
struct OpEfficiencySpec {
  std::optional<double> gemm;
  // No default: convolutions reach very different fractions per GPU and compute type (cuDNN
  // picks Winograd or FFT for 3x3 shapes in FP32, implicit GEMM on Tensor Cores); a hardware
  // file states its microbenchmark figure per compute type, else efficiency.gemm applies.
  std::optional<double> conv;
  std::optional<double> attention;
  std::optional<double> norm;
  std::optional<double> elementwise;
  std::optional<double> embedding;
  std::optional<double> loss;
  std::optional<double> optimizer;
  // Fused attention kernels (scaled_dot_product_attention's FlashAttention-2 or
  // memory-efficient kernels; FLOPs as FlashAttention's benchmark counts them), forward and
  // backward alike. Unset: efficiency.gemm.
  std::optional<double> sdpa;
  // Per compute type, in the order of the fields above (gemm, conv, ..., optimizer, sdpa): where
  // the file gives a class a map ({f32: 0.83, tf32: 0.5}); a type it does not list takes
  // the class's default.
  std::array<std::map<ComputeType, double>, 9> by_type{};
};

struct GpuSpec {
  std::string name;                       // e.g. "H100-SXM5-80GB"
  PeakFlops peak_flops;                   // dense datasheet peaks
  Bytes memory_bytes = 0;                 // device memory capacity
  BytesPerSecond memory_bandwidth = 0;    // datasheet memory bandwidth
  Seconds kernel_launch_latency_s = 0;    // host-to-kernel-start latency of one launch
  std::optional<int> sm_count;            // streaming multiprocessors (datasheet); NCCL's blocks take some
  // CUDA compute capability x 10 (9.0 -> 90): NCCL's algorithms (NVLS from 9.0), protocols
  // and tuning tables depend on it. Unset: read off the name (gpu_compute_capability_of).
  std::optional<int> compute_capability;
  OpEfficiencySpec op_efficiency;         // per op class (see OpEfficiencySpec)
};

// The compute capability x 10 of a GPU name dptwin knows (H100 90, A100 80, V100 70,
// L40S/RTX 4090 89, RTX A6000/3090 86, RTX 2080 Ti/TITAN RTX/T4 75, B200 100), or nullopt.
std::optional<int> known_compute_capability(const std::string& gpu_name);
// The GPU's compute capability x 10: its compute_capability field, else its name's, else
// 80 (Ampere: a name dptwin does not know).
int gpu_compute_capability_of(const GpuSpec& gpu);

struct PcieSwitchSpec {
  int socket = 0;                // CPU socket (root complex) the switch's uplink goes to
  std::vector<int> gpus;         // local GPU indices below this switch
  std::vector<int> nics;         // NIC indices below this switch (GPU i on the switch uses nics[i % size])
  int uplink_lanes = 16;         // lanes of the switch's uplink to the root complex
};

struct PcieSpec {
  int generation = 4;            // PCIe generation 1..6
  int lanes = 16;                // lanes of each GPU's and NIC's link
  Seconds latency_s = 0;         // per traversal of one PCIe link
  bool peer_to_peer = true;      // false: GPU<->GPU copies go through host memory
  // Per direction, the rate of GPU-to-GPU copies staged through host memory while copies
  // run both ways at once, as NCCL's SHM rings run them (every GPU writes to and reads from
  // host memory). CUDA's p2pBandwidthLatencyTest prints it: "Bidirectional P2P=Disabled"
  // counts both directions, so this is half its figure. Unset: kStagedBidirectionalLinkShare
  // of the GPU link's raw per-direction rate (see staged_bidirectional_rate).
  std::optional<BytesPerSecond> staged_bidirectional;
  // The rate of a GPU-to-GPU copy staged through host memory one way (cudaMemcpyPeer
  // without peer access: the driver pipelines device-to-host and host-to-device through
  // pinned buffers), as DataParallel's copies and broadcasts run without P2P.
  // p2pBandwidthLatencyTest's "Unidirectional P2P=Disabled". Unset:
  // kStagedUnidirectionalLinkShare of the GPU link's raw per-direction rate.
  std::optional<BytesPerSecond> staged_unidirectional;
  std::vector<PcieSwitchSpec> switches;
};

struct NvlinkPair {
  int a = 0, b = 0;              // local GPU indices, a != b
  int links = 1;                 // NVLink links between them
};

struct NvlinkSpec {
  int generation = 2;
  BytesPerSecond link_bandwidth = 0;  // per link, per direction (datasheet)
  Seconds latency_s = 0;
  std::vector<NvlinkPair> pairs;
  // Links between local GPUs a and b (0 when not directly connected).
  int links_between(int a, int b) const;
};

struct NvswitchSpec {
  int generation = 2;
  int links_per_gpu = 12;
  BytesPerSecond link_bandwidth = 0;  // per link, per direction (datasheet)
  Seconds latency_s = 0;
  bool in_switch_reduction = false;   // NVLS: the switch reduces (NVSwitch gen3, H100)
};

struct HostSpec {
  std::string cpu;                            // e.g. "2x AMD EPYC 7742"
  int sockets = 1;
  int cores = 1;                              // all sockets together
  BytesPerSecond memory_bandwidth = 0;        // per socket
  BytesPerSecond inter_socket_bandwidth = 0;  // per direction, between two sockets
  Seconds dispatch_cost_s = 0;                // host cost of dispatching one op
  bool gil = true;                            // dispatch serialised across threads (Python's GIL)
};

enum class FabricTopology { single_switch, fat_tree };

struct NetworkSpec {
  int nics_per_node = 1;
  BytesPerSecond nic_bandwidth = 0;  // line rate per NIC, per direction
  Seconds latency_s = 0;             // NIC to NIC through one switch
  FabricTopology topology = FabricTopology::single_switch;
  int nodes_per_leaf = 0;            // fat_tree: nodes under one leaf switch
  double oversubscription = 1.0;     // fat_tree: leaf downlink / uplink bandwidth ratio
  int switch_radix = 0;              // fat_tree: ports per switch (0: two levels at any size)
  std::optional<BytesPerSecond> switch_link_rate;  // fat_tree: switch-to-switch link rate; default nic_bandwidth
  double core_oversubscription = 1.0;  // three-level fat_tree: spine downlink / core uplink bandwidth ratio
  // GPUDirect RDMA: the NIC reads and writes GPU memory over PCIe (nvidia-peermem loaded).
  // Without it NCCL's NET transport stages through a host-memory buffer: GPU to host memory,
  // host memory to NIC, through the CPU's root port and memory (optional key, default true).
  bool gpu_direct_rdma = true;
};

// Fractions of datasheet rates that real transfers and kernels reach, each from
// microbenchmarks. The defaults' sources are next to them below; a YAML
// file that overrides one says where its figure comes from.
struct EfficiencySpec {
  // What a large matmul through PyTorch reaches of the type's dense peak, for a file without
  // its GPU's own figure (op_efficiency), and convolutions in any file without a convolution
  // figure: 0.74, the median of the nine GPUs' public torch matmul runs in the library's files
  // (the Tensor Core type AMP uses, FP16, at 8192^2 or the source's square): H100 PCIe 0.578,
  // RTX A6000 0.614, A100 40GB PCIe 0.633, L40S 0.729, A100 SXM4 0.737, H100 SXM5 0.744, V100
  // 0.76, H200 0.768, RTX 4090 1.0 (above its rated clock). Their TF32 figures' median is
  // 0.752. Until 2026-12-07 the default was 0.8 (NVIDIA Deep Learning Performance Guide,
  // "Matrix Multiplication Background": cuBLAS GEMM sweeps on A100), above every figure but
  // one measured through PyTorch.
  double gemm = 0.74;
  // STREAM-like kernels reach 85-90 % of HBM datasheet bandwidth (BabelStream,
  // Deakin et al., on V100/A100).
  double memory_bandwidth = 0.85;
  // NVLink/NVSwitch peer copies reach about 90 % of the per-direction link rate
  // (CUDA sample p2pBandwidthLatencyTest on DGX-1 V100 and DGX A100).
  double p2p = 0.9;
  // Pinned cudaMemcpy over PCIe reaches about 80 % of the raw lane rate (Gen3 x16:
  // about 12.5 of 15.75 GB/s; Gen4 x16: about 25 of 31.5 GB/s; CUDA bandwidthTest).
  double pcie = 0.8;
  // RDMA write reaches about 95 % of the InfiniBand line rate (perftest ib_write_bw on
  // ConnectX-6 HDR and ConnectX-7 NDR).
  double nic = 0.95;
  // Scale on NCCL's collective latency term (1: NCCL's own constants, tuning.cc); only
  // `calibrate --from` sets another value, fitted to a log's latency-bound sizes.
  double nccl_latency = 1.0;
  // How a compute-bound kernel's compute time c and memory time m combine: (c^p + m^p)^(1/p)
  // (p = 1 adds them, a large p tends to the roofline's max). Near its ridge a kernel
  // overlaps the two only in part. Default 1.5 from Azure/AI-benchmarking-guide's cuBLASLt
  // runs (Azure_Results/, superbench cublaslt_gemm, 10,000 warm-up iterations) of an
  // 802,816 x 192 x 768 GEMM, a 1x1 convolution's shape at the ridge: ND A100 v4 in FP16
  // 157.8 TFLOPS (1.50 ms), where the same page's 8192^3 GEMM (253.7 TFLOPS: 0.933 ms) and
  // STREAM copy (1.61 TB/s: 0.958 ms for its 1.54 GB) give p = 1.50; ND H200 v5 in FP8
  // (FP16 out) p = 1.5 too, ND H100 v5 2.25 (1.5 with FP8 out). Synthetic specs may set
  // infinity: max(c, m).
  double ridge_exponent = 1.5;
};

// A host whose collectives are gloo's (PyTorch's CPU backend): ring all-reduce over
// loopback TCP. Rates from microbenchmarks on the machine (each file names its command).
struct GlooSpec {
  BytesPerSecond tcp_bandwidth = 0;     // per direction, both directions streaming (as a ring step runs)
  Seconds message_latency_s = 0;        // one small message, sent and received (half a ping-pong)
  BytesPerSecond reduce_bandwidth = 0;  // summing a received segment into the output: output bytes per s
  // The exchange rate (as tcp_bandwidth) when the segments walk through a buffer of
  // buffer_bytes instead of reusing one cache-warm segment, by ascending buffer size; an
  // all-reduce of S bytes moves at the rate for S (gloo_model.hpp). Empty: tcp_bandwidth.
  struct BufferRate {
    Bytes buffer_bytes = 0;
    BytesPerSecond bandwidth = 0;
  };
  std::vector<BufferRate> tcp_bandwidth_by_buffer;
  // The share of a rank's core that gloo's transfer takes from compute running there at the
  // same time (0..1; 0: none): the compute slows by it while the transfer keeps its pace.
  double core_share = 0;
};

struct HardwareSpec {
  std::string name;         // library name ("dgx-h100") or the file's stem
  std::string description;
  std::string source_file;  // path it was loaded from ("" when built in code)
  int nodes = 1;
  int gpus_per_node = 1;
  GpuSpec gpu;
  PcieSpec pcie;
  std::optional<NvlinkSpec> nvlink;
  std::optional<NvswitchSpec> nvswitch;
  HostSpec host;
  std::optional<NetworkSpec> network;
  EfficiencySpec efficiency;
  std::optional<GlooSpec> gloo;  // present: collectives are gloo's, not NCCL's
  // The NCCL release whose tuner constants the collective model uses: "master" (NCCL's
  // master branch, the default) or "2.18.5" (the v2.18.5-1 tag); the release nccl-tests or
  // PyTorch ran with (NCCL prints it: "NCCL version 2.18.5+cuda12.2").
  std::string nccl_version = "master";
  // The run set NCCL_P2P_DISABLE=1: NCCL's p2pLevel becomes PATH_LOC (src/graph/paths.cc,
  // ncclGetLevel), so no pair of a node's GPUs passes ncclTopoCheckP2p, NVLink and NVSwitch
  // paths included, and ncclTopoComputePaths diverts every GPU-to-GPU path through the CPU
  // (addInterStep): NCCL's rings run over its SHM transport through host memory. The twin
  // then stages every GPU-to-GPU flow of the node through host memory; the driver's own peer
  // copies (cudaMemcpyPeer, DataParallel's scatter and gather) are staged copies too, at
  // pcie.staged_unidirectional, though the real driver would still use the links (a
  // simplification: NCCL_P2P_DISABLE is a DDP run's setting in every source the table has).
  bool nccl_p2p_disable = false;

  int gpu_count() const { return nodes * gpus_per_node; }
};

// NCCL releases whose tuner constants the collective model knows (nccl_version above).
const std::vector<std::string>& known_nccl_versions();

// Raw per-direction bandwidth of one PCIe lane of a generation (PCI-SIG: 2.5, 5, 8, 16,
// 32, 64 GT/s; 8b/10b coding for gen 1-2, 128b/130b for 3-5, FLIT for 6).
BytesPerSecond pcie_lane_bandwidth(int generation);

// The PCIe switch (index in pcie.switches) local GPU g sits below, or -1 (socket 0's root
// complex).
int pcie_switch_of(const HardwareSpec& hw, int local_gpu);
// Whether the driver allows peer access between local GPUs a and b of one node: NVLink
// between them, an NVSwitch, or PCIe P2P (pcie.peer_to_peer) within one socket.
bool gpu_peer_access(const HardwareSpec& hw, int local_a, int local_b);

// Host-staged GPU<->GPU copies running both ways at once, per direction, as a share of the
// GPU link's raw per-direction rate, for machines whose file gives no figure of its own.
// p2pBandwidthLatencyTest, "Bidirectional P2P=Disabled", on 3x RTX 4090 at PCIe Gen4 x16
// (tinygrad/open-gpu-kernel-modules issue 6, 2024-04-23): 25.60-26.15 GB/s for both
// directions, 12.9 GB/s each way of the link's 31.5 GB/s: 0.41. Other published figures
// span 0.19 (2x RTX 2080 Ti behind a Gen3 switch, the autodl file) to 0.48 (2x RTX 5090 at
// Gen5 x8: about 30 GB/s both ways); a machine's own measurement belongs in the field.
inline constexpr double kStagedBidirectionalLinkShare = 0.41;
// Per direction, the rate of host-staged copies running both ways at once: the file's
// pcie.staged_bidirectional, else kStagedBidirectionalLinkShare of the GPU link's raw rate
// (pcie_lane_bandwidth(generation) x lanes). NCCL's SHM rings run at most at this rate.
BytesPerSecond staged_bidirectional_rate(const HardwareSpec& hw);
// One-way host-staged GPU-to-GPU copies, as a share of the GPU link's raw per-direction rate,
// for machines whose file gives no figure of its own: p2pBandwidthLatencyTest's
// "Unidirectional P2P=Disabled" on machines with x16 links of known generation:
//   8x H100 SXM, Gen5 (NVIDIA/nccl issue 1264): 36.3-38.1 GB/s of 63.0, 0.59;
//   2x RTX 5090, Gen5 (NVIDIA/nccl-tests issue 287, 2025-02-20): 38.2-38.9 GB/s, 0.61;
//   6x RTX 4090, Gen4, 16 GT/s x16 in NCCL's topology dump (NVIDIA/nccl issue 814): 20.0-22.4
//   of 31.5 GB/s, 0.67;
//   4x A100 80GB PCIe, Gen4 (sushruta.github.io, 2024-03-30): 21.4-21.8 GB/s, 0.69.
// Their median, 0.64. Three more reports whose origin could not be traced (8x H100 Gen5, 8x
// A100 SXM Gen4, 8x TITAN RTX Gen3) fall in 0.60-0.68. Two GPUs sharing one switch's uplink
// reach less (2x RTX 2080 Ti behind a Gen3 switch, the autodl machine: 5.7 GB/s, 0.36): a
// machine's own figure belongs in the field.
inline constexpr double kStagedUnidirectionalLinkShare = 0.64;
// The rate of one-way host-staged copies: the file's pcie.staged_unidirectional, else
// kStagedUnidirectionalLinkShare of the GPU link's raw rate.
BytesPerSecond staged_unidirectional_rate(const HardwareSpec& hw);
// Dense peak of a compute type; throws std::invalid_argument naming the GPU when the
// datasheet gives none (e.g. tf32 on V100).
FlopsPerSecond peak_flops(const GpuSpec& gpu, ComputeType t);

// Loads and validates a hardware file. Errors: std::invalid_argument "FILE:LINE: key: what".
HardwareSpec load_hardware_file(const std::filesystem::path& path);
// Same from YAML text; `file_label` names the source in errors.
HardwareSpec parse_hardware_yaml(const std::string& text, const std::string& file_label);
// NAME (a file NAME.yaml in `library_dir`, else one of the fidelity table's machines, see
// measured_hardware_dir) or a path to a .yaml file. An unknown name throws
// std::invalid_argument listing both sets of names.
HardwareSpec load_hardware(std::string_view name_or_path, const std::filesystem::path& library_dir);
// Names of the library's hardware files (stems of library_dir/*.yaml), sorted.
std::vector<std::string> list_hardware(const std::filesystem::path& library_dir);
// The fidelity table's machine files beside a library (LIBRARY/../measured/public/hardware:
// the single GPUs and servers of published measurements, each written from its datasheets and
// microbenchmarks), which a name also reaches where the library has no file of that name.
std::filesystem::path measured_hardware_dir(const std::filesystem::path& library_dir);
// Their names (stems), sorted, less any a library file also has (the library's is the one a
// name reaches); empty where the folder is absent.
std::vector<std::string> list_measured_hardware(const std::filesystem::path& library_dir);
// The file NAME resolves to: library_dir/NAME.yaml, else the fidelity table's machine of that
// name; nullopt when neither exists.
std::optional<std::filesystem::path> find_hardware_file(const std::string& name,
                                                        const std::filesystem::path& library_dir);
// find_hardware_file's file, or std::invalid_argument "unknown hardware 'NAME'; did you mean
// ... (library DIR: ...)" (load_hardware's message).
std::filesystem::path hardware_file_of(const std::string& name, const std::filesystem::path& library_dir);
// "; did you mean 'X'? (library: a, b; the fidelity table's machines: c, dTAIL)" for an
// unknown NAME: the closest name of both sets, then each set; `with_dirs` names each folder
// after its label ("library /x/scenarios/hardware: ...").
std::string unknown_hardware_hint(const std::string& name, const std::filesystem::path& library_dir, bool with_dirs,
                                  const std::string& tail);

// Cross-field checks (GPU indices in range, each GPU on at most one switch, NVLink
// pairs distinct, network present for nodes > 1, ...). Throws std::invalid_argument
// naming the field. load_* call it; code that edits a spec calls it again.
void validate_hardware(const HardwareSpec& hw);

// A copy with `nodes` nodes (1..4096); throws std::invalid_argument when nodes > 1 and
// the spec has no network.
HardwareSpec with_nodes(const HardwareSpec& hw, int nodes);

// A synthetic machine for tests and what-ifs: `gpus` GPUs of `base` on one NVSwitch whose
// per-GPU port has `port_bandwidth` per direction and `port_latency` per traversal (so a
// GPU-to-GPU hop costs 2 * port_latency and runs at port_bandwidth), efficiency 1.
HardwareSpec homogeneous_switch(const HardwareSpec& base, int gpus, BytesPerSecond port_bandwidth,
                                Seconds port_latency);

}  // namespace dpt::sim
