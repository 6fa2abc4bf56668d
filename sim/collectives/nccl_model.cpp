// NCCL's tuner model (see nccl_model.hpp). Every constant below is NCCL's, from the file
// named next to it (NVIDIA/nccl, master of 2026-06, 5067397; the 2.18.5 tables from the
// v2.18.5-1 tag); the code is written anew.
#include "sim/collectives/nccl_model.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"

namespace dpt::sim {

namespace {

constexpr int kLL = 0, kLL128 = 1, kSimple = 2;
constexpr int kTree = 0, kRing = 1, kNvls = 2;
constexpr int kHwNvlink = 0, kHwPci = 1, kHwNet = 2;

// src/graph/tuning.cc, ncclTunerConstantsDefaults.baseLatencies [algo][proto] (us):
// Tree, Ring; NVLS has none (its latency is all hardware latency).
constexpr double kBaseLat[3][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}};
// hwLatencies [hw][algo][proto] (us): NVLINK, PCI, NET x Tree, Ring, NVLS.
constexpr double kHwLat[3][3][3] = {
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 25}},   // NVLINK
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 0}},     // PCI
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 18}},    // NET
};
// llMaxBws [index1][nodes index] (GB/s): index1 is the GPU generation on one node, the
// CPU vendor (0 Intel, 1 AMD) across nodes.
constexpr double kLlMaxBw[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
// perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws [compcap][nodes index] (GB/s).
constexpr double kPerChRingLL128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}};
constexpr double kPerChTreeLL128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
// nvlsEfficiency by compcap index (Volta, Ampere: no NVLS).
constexpr double kNvlsEfficiency[4] = {0, 0, 0.85, 0.74};
// treeCorrectionFactor [proto][log2(bytes / 64)], 64 B .. 512 MiB (tree reads the first 23
// entries, NVLS-tree on Blackwell with an x86 host all 24).
constexpr double kTreeCorrection[3][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};
// NVLS-tree (Simple only). master: baseLatencies 0; hwLatencies NVLINK 25 us (intraLat), NET
// 20.9 us (interLat); perChMaxNVLSTreeBws [compcap][nodes index] (GB/s).
constexpr double kNvlsTreeIntraLat = 25.0, kNvlsTreeInterLat = 20.9;
constexpr double kPerChNvlsTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}};
// v2.18.5-1 tuning.cc: baseLat 23 us, hwLat NVLINK 0, NET 19 us paid 2 (nNodes - 1) times;
// no nvlsEfficiency or per-channel bound; algorithm bandwidth 0.70 nNodes / (2 (nNodes - 1)) of bus.
constexpr double kNvlsTreeBaseLat218 = 23.0, kNvlsTreeInterLat218 = 19.0;

// The same tables in NCCL 2.18.5 (git show v2.18.5-1:src/graph/tuning.cc), where they
// differ from master's: baseLat gives Tree Simple no base latency and NVLS 23 us.
constexpr double kBaseLat218[3][3] = {{6.8, 14.0, 0}, {6.6, 14.0, 8.4}, {0, 0, 23.0}};
// hwLat (v2.18.5-1 tuning.cc): PCI Tree Simple 6 us; NVLS on NVLink 0 (its 23 us is base).
constexpr double kHwLat218[3][3][3] = {
    {{0.6, 1.25, 4}, {0.6, 1.9, 3.4}, {0, 0, 0}},    // NVLINK
    {{1.0, 1.9, 6}, {1.0, 2.5, 5.7}, {0, 0, 0}},     // PCI
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 18}},  // NET
};
// llMaxBws (v2.18.5-1 tuning.cc): Hopper's row is Ampere's {87.7, 22.5, 19.0}; no Blackwell
// row (compCapIndex stops at Hopper, so the model maps Blackwell to it under 2.18.5).
constexpr double kLlMaxBw218[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {87.7, 22.5, 19.0}, {87.7, 22.5, 19.0}};

// src/graph/topo.h: NVLink bandwidth per link as NCCL's topology counts it (GB/s), by SM.
double nvlink_bw_gbs(int compcap) {
  if (compcap >= 100) return 40.1;  // SM100_NVLINK_BW
  if (compcap >= 90) return 20.6;   // SM90_NVLINK_BW
  if (compcap == 86) return 12.0;   // SM86_NVLINK_BW
  if (compcap >= 80) return 20.0;   // SM80_NVLINK_BW
  if (compcap >= 70) return 20.0;   // SM70_NVLINK_BW
  return 18.0;                      // SM60_NVLINK_BW
}
// src/graph/xml.h / topo.cc: a PCIe link counts width x lane rate / 80 GB/s with lane
// rates 15, 30, 60, 120, 240, 480 for gen 1..6 (gen3 x16 = 12 = PCI_BW).
double pci_bw_gbs(int generation, int lanes) {
  static constexpr double kRate[6] = {15, 30, 60, 120, 240, 480};
  return lanes * kRate[std::clamp(generation, 1, 6) - 1] / 80.0;
}

// The bandwidth of a GPU's path to its NIC as NCCL's search sees it, in GB/s: a path's
// bandwidth is the least of its links' (paths.cc), the NIC's line rate (400 Gb/s -> 50)
// and the PCIe link between them (width x lane rate / 80, xml.h), so system->maxBw
// (search.cc getMaxBw) and each channel's reservation stop at the PCIe link: a 400 Gb/s
// NIC behind PCIe Gen4 x16 carries 24 GB/s, one behind Gen5 x16 48.
double net_path_gbs(const HardwareSpec& hw) {
  const double line = hw.network->nic_bandwidth / 1e9;
  if (fault_active(Fault::nccl_net_path_line_rate)) return line;
  return std::min(line, pci_bw_gbs(hw.pcie.generation, hw.pcie.lanes));
}

// src/graph/search.cc: the speeds the search tries, per channel (GB/s).
const std::vector<double>& speeds(int compcap, bool inter) {
  static const std::vector<double> intra{40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0};
  static const std::vector<double> inter_{48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                          7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  static const std::vector<double> intra90{60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
  static const std::vector<double> inter90{48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                           15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  static const std::vector<double> intra100{90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};
  static const std::vector<double> inter100{96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0,
                                            20.0, 17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  if (compcap >= 100) return inter ? inter100 : intra100;
  if (compcap >= 90) return inter ? inter90 : intra90;
  return inter ? inter_ : intra;
}

// The search for channels x per-channel speed (ncclTopoCompute, pass 1): from the fastest
// speed that fits the bottleneck, down while a speed is above 0.49 of the best found, keep
// the most total bandwidth (first found on ties); `fit(s)` is how many channels of speed s
// the links carry. Then ncclTopoDupChannels doubles the channels at half the speed when
// the speed is 25 GB/s or more (Hopper and later: not below 50 GB/s with over 4 channels).
std::pair<int, double> search_channels(int compcap, bool inter, double max_bw, int max_channels,
                                       const std::function<int(double)>& fit) {
  const auto& arr = speeds(compcap, inter);
  size_t i = 0;
  while (i + 1 < arr.size() && arr[i] > max_bw) ++i;
  int best_n = 0;
  double best_s = 0;
  for (; i < arr.size(); ++i) {
    const double s = arr[i];
    if (best_n > 0 && s / best_s <= 0.49) break;
    const int n = std::min(max_channels, fit(s));
    if (n >= 1 && n * s > best_n * best_s + 1e-9) {
      best_n = n;
      best_s = s;
    }
  }
  if (best_n == 0) return {1, arr.back()};
  if (best_s >= 25.0 && !(compcap > 80 && best_s < 50.0 && best_n > 4)) {
    const int dup = std::min(2 * best_n, max_channels);
    best_s /= (dup + best_n - 1) / best_n;
    best_n = dup;
  }
  return {best_n, best_s};
}

// ncclTopoCompute for the NVLS pattern across nodes (search.cc): one channel per NVLS
// head, a GPU with a NIC of its own (no GPU twice, so at most min(GPUs, NICs) heads).
// A channel loads every GPU's NVSwitch port with bwIntra each way and its head's twice
// (ncclTopoSearchTryNvls), and its head's NIC with bwInter. Pass 1 tries bwIntra =
// bwInter = each speed from the fastest the NIC carries down, while above 0.49 of the best
// found; a graph replaces the best when it has more channels or (master only) more
// channels x bwInter (ncclTopoCompareGraphs). NVLS graphs are not duplicated
// (ncclTopoDupChannels). Pass 2, with the channel count fixed: master raises bwInter one
// speed at a time while it is below twice bwIntra and the NIC carries the next speed
// (then bwIntra, which needs a NIC faster than twice bwIntra: not modelled, no Hopper node
// with NVLink SHARP has one); 2.18.5 raises bwIntra while below twice bwInter and the heads'
// ports carry it, never bwInter. (2.18.5's SM90 inter speeds lack 22 GB/s; both releases'
// searches stop above it on every library file.)
struct NvlsGraph {
  int channels = 0;
  double intra_gbs = 0, inter_gbs = 0;
};
NvlsGraph nvls_graph_across_nodes(int compcap, int heads, double port_gbs, double nic_gbs, bool v218) {
  const auto& arr = speeds(compcap, true);
  // Channels of bwIntra s that the heads' ports carry: (n + 1) x s each.
  auto fit = [&](double s) { return static_cast<int>(std::min<double>(heads, std::floor(port_gbs / s + 1e-9) - 1)); };
  size_t i = 0;
  while (i + 1 < arr.size() && arr[i] > nic_gbs) ++i;
  NvlsGraph best;
  size_t best_i = i;
  for (; i < arr.size(); ++i) {
    const double s = arr[i];
    if (best.channels > 0 && s / best.intra_gbs <= 0.49) break;
    const int n = fit(s);
    if (n < 1) continue;
    if (n > best.channels || (!v218 && n * s > best.channels * best.inter_gbs + 1e-9)) {
      best = {n, s, s};
      best_i = i;
    }
  }
  if (best.channels == 0) return best;
  if (v218) {
    size_t j = best_i;
    while (j > 0 && best.intra_gbs < 2 * best.inter_gbs && fit(arr[j - 1]) >= best.channels) best.intra_gbs = arr[--j];
    return best;
  }
  while (best_i > 0 && best.inter_gbs < 2 * best.intra_gbs && arr[best_i - 1] <= nic_gbs + 1e-9)
    best.inter_gbs = arr[--best_i];
  return best;
}

int node_index(int nodes) { return nodes <= 2 ? nodes - 1 : 2; }

int log2i(long long n) {
  int l = 0;
  while (n >>= 1) ++l;
  return l;
}

int algo_index(NcclAlgo a) { return static_cast<int>(a); }
int proto_index(NcclProtocol p) { return static_cast<int>(p); }

}  // namespace

double nccl_nvlink_link_bw_gbs(int compcap) { return nvlink_bw_gbs(compcap); }

const char* nccl_protocol_name(NcclProtocol p) {
  switch (p) {
    case NcclProtocol::ll: return "LL";
    case NcclProtocol::ll128: return "LL128";
    case NcclProtocol::simple: return "Simple";
  }
  return "?";
}

NcclTuner parse_nccl_tuner(const std::string& version) {
  if (version == "master") return NcclTuner::master;
  if (version == "2.18.5") return NcclTuner::v2_18_5;
  std::string list;
  for (const auto& k : known_nccl_versions()) list += (list.empty() ? "" : ", ") + k;
  throw std::invalid_argument(fmt::format("nccl_version: unknown NCCL version '{}' (known: {})", version, list));
}

NcclProtocol parse_nccl_protocol(const std::string& name) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (auto p : {NcclProtocol::ll, NcclProtocol::ll128, NcclProtocol::simple}) {
    std::string q = nccl_protocol_name(p);
    for (auto& c : q) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (n == q) return p;
  }
  throw std::invalid_argument(fmt::format("unknown NCCL protocol '{}' (allowed: LL, LL128, Simple)", name));
}

double nccl_wire_bytes_per_data_byte(NcclProtocol p) {
  if (fault_active(Fault::nccl_protocol_overhead_omitted)) return 1.0;
  switch (p) {
    case NcclProtocol::ll: return 2.0;              // 8-byte line: 4 data + 4 flag bytes
    case NcclProtocol::ll128: return 128.0 / 120.0; // 128-byte line: 120 data + 8 flag bytes
    case NcclProtocol::simple: return 1.0;
  }
  return 1.0;
}

int nccl_channels_for_size(const NcclGraph& g, NcclAlgo a, NcclProtocol p, Bytes bytes) {
  const int full = a == NcclAlgo::nvls || a == NcclAlgo::nvls_tree ? g.nvls_channels : g.runtime_channels;
  // NCCL_LL_MAX_NTHREADS 512, NCCL_LL128_MAX_NTHREADS 640, NCCL_SIMPLE_MAX_NTHREADS 512;
  // NCCL_LL_THREAD_THRESHOLD 8 (x nRanks for ring), NCCL_LL128_THREAD_THRESHOLD 8,
  // NCCL_SIMPLE_THREAD_THRESHOLD 64 (src/include/device.h, tuning.cc).
  const double threads = p == NcclProtocol::ll128 ? 640 : 512;
  double threshold = p == NcclProtocol::simple ? 64 : 8;
  if (a == NcclAlgo::ring && p == NcclProtocol::ll) threshold *= g.ranks;
  int nc = std::max(1, full);
  while (nc > 1 && static_cast<double>(bytes) < nc * threads * threshold) --nc;
  return nc;
}

Bytes nccl_tree_chunk_bytes(const NcclGraph& g, NcclProtocol p, Bytes bytes, int channels) {
  // DEFAULT_BUFFSIZE 4 MiB, DEFAULT_LL_BUFFSIZE 8 lines x 512 threads x 8 steps x 16 B,
  // DEFAULT_LL128_BUFFSIZE 120 elements x 640 threads x 8 steps x 8 B (src/init.cc, device.h).
  constexpr Bytes kSteps = 8;
  const Bytes per = static_cast<Bytes>(std::max(1, channels));
  const bool v218 = g.tuner == NcclTuner::v2_18_5;
  if (p == NcclProtocol::simple) {
    Bytes chunk = (Bytes{4} << 20) / kSteps;
    // 2.18.5 (enqueue.cc computeColl; gone from master): shrunk by the tree's depth,
    // ranks per node - 1 + log2(nodes) (connect.cc), while a channel has fewer than
    // depth x 8, x 4, x 1 chunks: down to 128, 64, 32 KiB.
    if (v218 && !fault_active(Fault::nccl_tree_chunk_fixed)) {
      const Bytes depth = static_cast<Bytes>(std::max(0, g.ranks / g.nodes - 1 + log2i(g.nodes)));
      while (bytes / (per * chunk) < depth * 8 && chunk > 131072) chunk /= 2;
      while (bytes / (per * chunk) < depth * 4 && chunk > 65536) chunk /= 2;
      while (bytes / (per * chunk) < depth && chunk > 32768) chunk /= 2;
    }
    return chunk;
  }
  if (p == NcclProtocol::ll) return Bytes{8} * 512 * kSteps * 16 / kSteps / 2;
  // master shrinks LL128's data chunk (576,000 B); 2.18.5 its wire chunk (614,400 B), whose
  // data is 15/16 (NCCL_LL128_LINEELEMS 16, DATAELEMS 15).
  Bytes chunk = Bytes{120} * 640 * kSteps * 8 / kSteps;
  if (!v218) chunk = chunk / 16 * 15;
  if (fault_active(Fault::nccl_tree_chunk_fixed)) return v218 ? chunk / 16 * 15 : chunk;
  const double ppn = static_cast<double>(g.ranks) / g.nodes;
  const double nsteps = 1 + log2i(g.nodes) + 0.1 * ppn;
  while (static_cast<double>(bytes / (per * chunk)) < nsteps * 64 / ppn && chunk > 131072) chunk /= 2;
  while (static_cast<double>(bytes / (per * chunk)) < nsteps * 16 / ppn && chunk > 32768) chunk /= 2;
  return v218 ? chunk / 16 * 15 : chunk;
}

int nccl_nvls_runtime_channels(const NcclGraph& g) {
  if (g.compcap >= 100 && g.tuner == NcclTuner::master) return g.nodes > 1 ? 32 : 24;
  return 16;
}

Bytes nccl_nvls_chunk_bytes(const NcclGraph& g, Bytes bytes) {
  constexpr Bytes kKiB = 1024;
  Bytes chunk = 128 * kKiB;  // min(DEFAULT_BUFFSIZE 4 MiB / NCCL_STEPS, NCCL_NVLS_CHUNKSIZE)
  const Bytes ops = static_cast<Bytes>(nccl_nvls_runtime_channels(g)) * std::max(1, g.nvls_channels);
  if (bytes < 64 * ops * chunk && chunk > 64 * kKiB) chunk = 64 * kKiB;
  if (bytes < 8 * ops * chunk && chunk > 32 * kKiB) chunk = 32 * kKiB;
  if (bytes < 2 * ops * chunk && chunk > 16 * kKiB) chunk = 16 * kKiB;
  return chunk;
}

Bytes nccl_nvls_tree_chunk_bytes(const NcclGraph& g, Bytes bytes, int heads, double nic_gbs,
                                 bool nic_behind_pcie_switch) {
  constexpr Bytes kKiB = 1024;
  int channels = nccl_nvls_runtime_channels(g);  // SM90 16; SM100 across nodes 32, then tuned below
  Bytes chunk = 512 * kKiB;  // 2.18.5: one Simple step (DEFAULT_BUFFSIZE 4 MiB / NCCL_STEPS)
  if (g.tuner == NcclTuner::master) {
    Bytes tree_max = g.nodes >= 4 ? 64 * kKiB : 128 * kKiB;
    chunk = 128 * kKiB;  // NCCL_NVLS_CHUNKSIZE
    if (g.compcap >= 100 && g.nodes > 1) {  // ncclNvlsTreeSm100Tuning
      const double ppn = static_cast<double>(g.ranks) / g.nodes;
      if (g.nodes == 2 && nic_gbs >= 48) {
        channels = 32;
        tree_max = 128 * kKiB;
        if (ppn <= 4) chunk = tree_max = 256 * kKiB;
        else if (ppn >= 16 || (ppn <= 8 && nic_behind_pcie_switch && nic_gbs < 96)) tree_max = 64 * kKiB;
      } else if (nic_gbs >= 96) {
        if (ppn <= 8) {
          channels = 24;
          chunk = tree_max = 256 * kKiB;
        } else {
          channels = 32;
          tree_max = ppn < 32 ? 128 * kKiB : 64 * kKiB;
        }
      } else if (nic_gbs >= 48) {
        channels = 24;
        tree_max = nic_behind_pcie_switch ? 64 * kKiB : 128 * kKiB;
      }
    }
    chunk = std::min(chunk, tree_max);
  }
  const Bytes ops = static_cast<Bytes>(channels) * std::max(1, heads);
  if (bytes < 32 * ops * chunk && chunk > 256 * kKiB) chunk = 256 * kKiB;
  if (bytes < 16 * ops * chunk && chunk > 128 * kKiB) chunk = 128 * kKiB;
  if (bytes < 4 * ops * chunk && chunk > 64 * kKiB) chunk = 64 * kKiB;
  if (bytes < 1 * ops * chunk && chunk > 32 * kKiB) chunk = 32 * kKiB;
  return chunk;
}

int gpu_compute_capability(const std::string& gpu_name) { return known_compute_capability(gpu_name).value_or(80); }

// NCCL's intra-node path bandwidths out of one GPU (NCCL units, GB/s): over the whole
// fabric (per_gpu) and along the fastest single path between two GPUs (max_path).
struct IntraNodePaths {
  double per_gpu = 0;
  double max_path = 0;
};

// NVLink links out of each of `local` (node-local GPU indices) to the others of `local`,
// and the links between the first two.
struct NvlinkCounts {
  std::vector<int> per_gpu;
  int first_pair = 0;
};
// The position of `gpu` among `local` (node-local GPU indices), or -1.
static int local_slot(const std::vector<int>& local, int gpu) {
  const auto it = std::find(local.begin(), local.end(), gpu);
  return it == local.end() ? -1 : static_cast<int>(it - local.begin());
}

static NvlinkCounts nvlink_counts(const HardwareSpec& hw, const std::vector<int>& local) {
  NvlinkCounts c;
  c.per_gpu.assign(local.size(), 0);
  auto slot = [&](int gpu) { return local_slot(local, gpu); };
  for (const auto& pr : hw.nvlink->pairs) {
    const int a = slot(pr.a), b = slot(pr.b);
    if (a < 0 || b < 0) continue;  // a link to a GPU outside the communicator carries none of its rings
    c.per_gpu[static_cast<size_t>(a)] += pr.links;
    c.per_gpu[static_cast<size_t>(b)] += pr.links;
    if (std::min(a, b) == 0 && std::max(a, b) == 1) c.first_pair += pr.links;
  }
  return c;
}

// Whether the NVLink pairs among `local` close a ring through all of them (a Hamiltonian
// cycle; for two GPUs, a link between them). NCCL's ring search (search.cc) takes a ring
// whose hops are all NVLink only then; otherwise some hop crosses PCIe or host memory,
// and the ring's type and bandwidth are that hop's (graph->typeIntra, bwIntra): the PCI
// rates and latencies, and no LL128 (tuning.cc enables it only for typeIntra <= PATH_NVB).
// Bridged pairs of PCIe cards (RTX A6000, A100/H100 PCIe) close no ring past two GPUs.
static bool nvlink_closes_a_ring(const HardwareSpec& hw, const std::vector<int>& local) {
  const int n = static_cast<int>(local.size());
  if (n < 2 || !hw.nvlink) return false;
  std::vector<std::vector<bool>> adj(static_cast<size_t>(n), std::vector<bool>(static_cast<size_t>(n), false));
  auto slot = [&](int gpu) { return local_slot(local, gpu); };
  for (const auto& pr : hw.nvlink->pairs) {
    const int a = slot(pr.a), b = slot(pr.b);
    if (a < 0 || b < 0 || a == b || pr.links < 1) continue;
    adj[static_cast<size_t>(a)][static_cast<size_t>(b)] = adj[static_cast<size_t>(b)][static_cast<size_t>(a)] = true;
  }
  if (n == 2) return adj[0][1];
  for (int i = 0; i < n; ++i) {
    int degree = 0;
    for (int j = 0; j < n; ++j) degree += adj[static_cast<size_t>(i)][static_cast<size_t>(j)] ? 1 : 0;
    if (degree < 2) return false;  // a ring enters and leaves every GPU over NVLink
  }
  // Held-Karp over subsets holding GPU 0: reach[mask][v] = a path from 0 through mask ending
  // at v. Past 20 GPUs (2^20 subsets) the degree test above stands for it.
  if (n > 20) return true;
  const size_t full = (size_t{1} << n) - 1;
  std::vector<std::vector<bool>> reach(full + 1, std::vector<bool>(static_cast<size_t>(n), false));
  reach[1][0] = true;
  for (size_t mask = 1; mask <= full; mask += 2)  // masks holding GPU 0 are odd
    for (int v = 0; v < n; ++v) {
      if (!reach[mask][static_cast<size_t>(v)]) continue;
      for (int w = 1; w < n; ++w)
        if (!(mask & (size_t{1} << w)) && adj[static_cast<size_t>(v)][static_cast<size_t>(w)])
          reach[mask | (size_t{1} << w)][static_cast<size_t>(w)] = true;
    }
  for (int v = 1; v < n; ++v)
    if (reach[full][static_cast<size_t>(v)] && adj[static_cast<size_t>(v)][0]) return true;
  return false;
}

static IntraNodePaths intra_node_paths(const HardwareSpec& hw, NcclGraph& g, bool p2p, const std::vector<int>& local) {
  const double nvl = nvlink_bw_gbs(g.compcap);
  IntraNodePaths out;
  // NCCL searches the graph of the communicator's GPUs: NVLink pairs decide its rings only
  // when every one of them has a link to another (search.cc; a GPU without one is reached
  // over PCIe, and the ring's slowest hop sets its type and bandwidth). Planted: every GPU
  // of the node counted, the communicator's or not, and NVLink taken whatever the count.
  const bool planted = fault_active(Fault::nccl_nvlink_ring_outside_communicator);
  std::vector<int> counted = local;
  if (planted) {
    counted.clear();
    for (int i = 0; i < hw.gpus_per_node; ++i) counted.push_back(i);
  }
  // NCCL_P2P_DISABLE=1 diverts the NVLink paths through the CPU: no NVLink ring.
  const bool nvlink_usable = !hw.nccl_p2p_disable || fault_active(Fault::nccl_p2p_disable_ignored);
  const NvlinkCounts links = nvlink_usable && hw.nvlink && !hw.nvlink->pairs.empty() && counted.size() > 1
                                 ? nvlink_counts(hw, counted)
                                 : NvlinkCounts{};
  const int fewest_links = links.per_gpu.empty() ? 0 : *std::min_element(links.per_gpu.begin(), links.per_gpu.end());
  // Planted fault: every GPU's having a link taken for an NVLink ring, closed or not.
  const bool ring_closes = fewest_links > 0 && (nvlink_closes_a_ring(hw, counted) ||
                                                fault_active(Fault::nvlink_pairs_ring_closed));
  if (p2p && hw.nvswitch) {
    out.per_gpu = out.max_path = hw.nvswitch->links_per_gpu * nvl;
    g.intra_nvlink = true;
  } else if (!links.per_gpu.empty() && (ring_closes || planted)) {
    // Rings over NVLink pairs (DGX-1): pairs without NVLink may lack P2P, the ring does not use them.
    out.per_gpu = fewest_links * nvl;
    // Two GPUs: the ring runs over their own links (a bridge's 4); more: a ring through
    // every GPU runs over single links somewhere (cube mesh).
    out.max_path = counted.size() == 2 ? links.first_pair * nvl : nvl;
    g.intra_nvlink = true;
  } else {
    // PCI: P2P through the switches or the root complex; SHM through host memory.
    out.per_gpu = out.max_path = pci_bw_gbs(hw.pcie.generation, hw.pcie.lanes);
    // A path through the CPU (SHM when P2P is off, or P2P through the root complex when
    // no PCIe switch holds every GPU) costs an Intel root complex 6/5 of its bandwidth
    // (topo.h INTEL_P2P_OVERHEAD, applied in search.cc followPath to PATH_PHB).
    bool one_switch = false;
    for (const auto& sw : hw.pcie.switches)
      one_switch = one_switch || static_cast<int>(sw.gpus.size()) >= std::min(hw.gpus_per_node, g.ranks);
    const bool intel = hw.host.cpu.find("Intel") != std::string::npos;
    if ((!p2p || !one_switch) && intel && !fault_active(Fault::nccl_shm_overhead_omitted))
      out.per_gpu = out.max_path = out.per_gpu * 5.0 / 6.0;
  }
  return out;
}

namespace {
// How many of these node-local GPUs sit behind the switch.
int gpus_behind(const PcieSwitchSpec& sw, const std::vector<int>& local_gpus) {
  return static_cast<int>(std::count_if(local_gpus.begin(), local_gpus.end(), [&](int l) {
    return std::find(sw.gpus.begin(), sw.gpus.end(), l) != sw.gpus.end();
  }));
}
}  // namespace

int gpus_per_root_port(const HardwareSpec& hw, const std::vector<int>& local_gpus) {
  int most = 1;
  for (const auto& sw : hw.pcie.switches) most = std::max(most, gpus_behind(sw, local_gpus));
  return most;
}

BytesPerSecond shm_rate_per_gpu(const HardwareSpec& hw, const std::vector<int>& local_gpus) {
  const BytesPerSecond own = staged_bidirectional_rate(hw);  // the GPU link's share, or the file's figure
  if (hw.pcie.staged_bidirectional || fault_active(Fault::shm_root_port_unshared)) return own;
  BytesPerSecond slowest = own;
  for (const auto& sw : hw.pcie.switches) {
    const int behind = gpus_behind(sw, local_gpus);
    if (behind == 0) continue;
    const BytesPerSecond uplink =
        kStagedBidirectionalLinkShare * pcie_lane_bandwidth(hw.pcie.generation) * sw.uplink_lanes;
    slowest = std::min(slowest, uplink / static_cast<double>(behind));
  }
  return slowest;
}

NcclGraph nccl_graph(const HardwareSpec& hw, int ranks, int nodes, bool p2p, int nvls_heads,
                     std::vector<int> local_gpus) {
  NcclGraph g;
  g.compcap = gpu_compute_capability_of(hw.gpu);
  g.compcap_index = g.compcap >= 100 ? 3 : g.compcap >= 90 ? 2 : g.compcap >= 80 ? 1 : 0;
  g.cpu_amd = hw.host.cpu.find("AMD") != std::string::npos;
  g.cpu_x86 = hw.host.cpu.find("Grace") == std::string::npos && hw.host.cpu.find("Neoverse") == std::string::npos &&
              hw.host.cpu.find("ARM") == std::string::npos && hw.host.cpu.find("POWER") == std::string::npos;
  g.ranks = std::max(1, ranks);
  g.nodes = std::max(1, nodes);
  g.p2p = p2p;
  g.latency_scale = hw.efficiency.nccl_latency;
  g.tuner = fault_active(Fault::nccl_version_ignored) ? NcclTuner::master : parse_nccl_tuner(hw.nccl_version);
  const int ppn = std::max(1, g.ranks / g.nodes);
  // ncclTopoCompute's ring graph: maxChannels = MAXCHANNELS / 2 (src/init.cc).
  constexpr int kMaxRingChannels = 16;
  if (local_gpus.empty())
    for (int i = 0; i < std::min(ppn, hw.gpus_per_node); ++i) local_gpus.push_back(i);
  g.shm_rate_per_gpu = shm_rate_per_gpu(hw, local_gpus);
  const IntraNodePaths paths = intra_node_paths(hw, g, p2p, local_gpus);
  double per_gpu = paths.per_gpu;    // intra-node bandwidth out of one GPU, NCCL units
  double max_path = paths.max_path;  // fastest single path between two GPUs
  if (ppn == 1) per_gpu = max_path = std::max(per_gpu, 1e9);  // no intra-node hop
  if (g.nodes == 1) {
    auto [n, s] = search_channels(g.compcap, false, max_path, kMaxRingChannels,
                                  [&](double speed) { return static_cast<int>(std::floor(per_gpu / speed + 1e-9)); });
    g.ring_channels = n;
    g.ring_bw_gbs = s;
  } else {
    // Each channel leaves every node through one NIC (NCCL's rail-aligned rings): a NIC
    // carries floor(nic / s) channels; every channel also crosses each GPU once.
    const double nic = net_path_gbs(hw);
    const int nics = hw.network->nics_per_node;
    auto [n, s] = search_channels(g.compcap, true, std::min(nic, per_gpu), kMaxRingChannels, [&](double speed) {
      return std::min(nics * static_cast<int>(std::floor(nic / speed + 1e-9)),
                      static_cast<int>(std::floor(per_gpu / speed + 1e-9)));
    });
    g.ring_channels = n;
    g.ring_bw_gbs = s;
  }
  // ncclTopoPostset (src/graph/connect.cc) duplicates the ring graph's channels once more,
  // up to MAXCHANNELS (32 in NCCL 2.18's devcomm.h, 64 since); the graph's own 16 keep
  // the result within either.
  constexpr int kMaxChannels = 32;
  g.runtime_channels = fault_active(Fault::nccl_channels_not_duplicated)
                           ? g.ring_channels
                           : std::min(kMaxChannels, 2 * g.ring_channels);
  // NVLS graph (Hopper and later on an NVSwitch that reduces): one channel per GPU
  // (maxChannels = min(NCCL_MAX_NVLS_ARITY, GPUs), all required on one node).
  // ncclNvlsInit: NVLS needs more than 1 GPU (master), more than 2 (2.18.5).
  const int nvls_min_gpus = g.tuner == NcclTuner::v2_18_5 ? 2 : 1;
  if (g.nodes == 1 && hw.nvswitch && hw.nvswitch->in_switch_reduction && g.compcap >= 90 && p2p && ppn > nvls_min_gpus) {
    const int n = ppn;
    auto [c, s] = search_channels(g.compcap, false, per_gpu, n, [&](double speed) {
      return static_cast<int>(std::floor(per_gpu / speed + 1e-9)) >= n ? n : 0;
    });
    g.nvls_channels = c;
    g.nvls_bw_gbs = s;
  }
  // NVLS graph across nodes (NVLS-tree): heads are GPUs with a NIC of their own.
  if (g.nodes > 1 && hw.nvswitch && hw.nvswitch->in_switch_reduction && g.compcap >= 90 && p2p && ppn > nvls_min_gpus &&
      hw.network && !fault_active(Fault::nccl_nvls_tree_off)) {
    const int heads = nvls_heads >= 0 ? nvls_heads : std::min(ppn, hw.network->nics_per_node);
    const NvlsGraph nv = nvls_graph_across_nodes(g.compcap, heads, paths.per_gpu, net_path_gbs(hw),
                                                 g.tuner == NcclTuner::v2_18_5);
    g.nvls_channels = nv.channels;
    g.nvls_bw_gbs = nv.intra_gbs;
    g.nvls_inter_bw_gbs = nv.inter_gbs;
  }
  // LL128 by default (tuning.cc): Hopper and later up to PXN across nodes, earlier GPUs up
  // to PXB; within the node only over NVLink (typeIntra <= PATH_NVB).
  g.ll128 = g.compcap >= 70 && (g.intra_nvlink || ppn == 1);
  return g;
}

// NVLS-tree all-reduce, Simple (tuning.cc): per channel the least of the NVLS bandwidth
// (bwIntra x nvlsEfficiency x (C - 1) / C, doubled: all-reduce pipelines two operations),
// bwInter (doubled on 2 nodes) and perChMaxNVLSTreeBw; algorithm bandwidth nRanks / nsteps
// of bus; latency intraLat + 2 log2(nNodes) interLat. 2.18.5: see kNvlsTreeBaseLat218.
NcclCost nvls_tree_cost(const NcclGraph& g) {
  NcclCost out;
  const int n = g.ranks, nodes = g.nodes, c = g.nvls_channels;
  const int nsteps = 2 * (n - 1);
  if (g.tuner == NcclTuner::v2_18_5) {
    out.bus_bw_gbs = c * (nodes <= 2 ? g.nvls_bw_gbs : g.nvls_inter_bw_gbs);
    out.alg_bw_gbs = out.bus_bw_gbs * 0.70 * nodes / (2.0 * (nodes - 1));
    out.uncapped_bus_bw_gbs = out.bus_bw_gbs;
    out.latency_us = (kNvlsTreeBaseLat218 + 2.0 * (nodes - 1) * kNvlsTreeInterLat218) * g.latency_scale;
    return out;
  }
  const int ci = g.compcap_index;
  const double intra = g.nvls_bw_gbs * kNvlsEfficiency[ci] * (c - 1) / c * 2.0;
  const double inter = g.nvls_inter_bw_gbs * (nodes <= 2 ? 2.0 : 1.0);
  out.bus_bw_gbs = c * std::min({intra, inter, kPerChNvlsTree[ci][node_index(nodes)]});
  out.alg_bw_gbs = out.bus_bw_gbs * n / nsteps;
  out.uncapped_bus_bw_gbs = out.bus_bw_gbs;
  // interLat is NVLS-tree's own: NCCL takes the tree's only with one GPU per node, where
  // there is no NVLS.
  out.latency_us = (kNvlsTreeIntraLat + 2.0 * log2i(nodes) * kNvlsTreeInterLat) * g.latency_scale;
  return out;
}

NcclCost nccl_cost(const NcclGraph& g, CollectiveOp op, NcclAlgo algo, NcclProtocol proto) {
  NcclCost out;
  const int a = algo_index(algo), p = proto_index(proto);
  const int n = g.ranks, nodes = g.nodes, idx2 = node_index(nodes);
  const bool all_reduce = op == CollectiveOp::all_reduce;
  const bool rs_ag = op == CollectiveOp::reduce_scatter || op == CollectiveOp::all_gather;
  if (n <= 1) return out;
  if (algo != NcclAlgo::ring && !all_reduce) return out;  // tree and NVLS: all-reduce only here
  const bool nvls_any = algo == NcclAlgo::nvls || algo == NcclAlgo::nvls_tree;
  if (nvls_any && (proto != NcclProtocol::simple || g.nvls_channels < 2)) return out;
  // NVLS runs on one node (across nodes only with CollNet), NVLS-tree across nodes only (tuning.cc).
  if ((algo == NcclAlgo::nvls && nodes > 1) || (algo == NcclAlgo::nvls_tree && nodes == 1)) return out;
  if (proto == NcclProtocol::ll128 && !g.ll128) return out;
  const int nsteps = all_reduce ? 2 * (n - 1) : rs_ag ? n - 1 : n;
  const bool v218 = g.tuner == NcclTuner::v2_18_5;
  const int ci = v218 ? std::min(g.compcap_index, 2) : g.compcap_index;
  const int index1 = nodes == 1 ? ci : (g.cpu_amd ? 1 : 0);
  const double ll_max = (v218 ? kLlMaxBw218 : kLlMaxBw)[index1][idx2];
  const double ppn = static_cast<double>(n) / nodes;
  if (algo == NcclAlgo::nvls_tree) return nvls_tree_cost(g);
  int channels = algo == NcclAlgo::nvls ? g.nvls_channels : g.ring_channels;
  double bw = g.ring_bw_gbs;
  if (algo == NcclAlgo::nvls) {
    // 2.18.5 takes the NVLS graph's bwIntra as is (no nvlsEfficiency) and converts with ratio 5/6.
    bw = v218 ? g.nvls_bw_gbs
              : g.nvls_bw_gbs * kNvlsEfficiency[ci] * (channels - 1) / channels * (all_reduce ? 2.0 : (ppn - 1) / ppn);
  }
  double bus = channels * bw;
  // Ring LL: master halves the bus bandwidth; 2.18.5 (v2.18.5-1 tuning.cc) takes a quarter
  // for all-reduce, reduce or several nodes, a third otherwise.
  const double ring_ll = !v218 ? 0.5 : (nodes > 1 || all_reduce || op == CollectiveOp::reduce) ? 1.0 / 4.0 : 1.0 / 3.0;
  // Ring LL128: 0.92, but 0.7 with one GPU per node in 2.18.5 (v2.18.5-1 tuning.cc).
  const double ring_ll128 = v218 && ppn < 2 ? 0.7 : 0.92;
  double uncapped = 0;
  if (algo == NcclAlgo::ring && proto == NcclProtocol::ll) {
    uncapped = bus * ring_ll;
    bus = std::min(ll_max, uncapped);
  }
  if (algo == NcclAlgo::ring && proto == NcclProtocol::ll128) bus = std::min(bus * ring_ll128, channels * kPerChRingLL128[ci][idx2]);
  if (algo == NcclAlgo::tree) {
    bus = std::min(bus * 0.92, channels * kPerChTree[ci][idx2]);
    if (proto == NcclProtocol::ll) bus = std::min(bus / 3.8, ll_max);
    if (proto == NcclProtocol::ll128) bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), channels * kPerChTreeLL128[ci][idx2]);
  }
  out.bus_bw_gbs = bus;
  out.uncapped_bus_bw_gbs = std::max(bus, uncapped);
  const double ratio = algo == NcclAlgo::tree              ? 0.5
                      : algo == NcclAlgo::nvls && v218 ? 5.0 / 6.0  // v2.18.5-1 tuning.cc
                                                       : static_cast<double>(n) / nsteps;
  out.alg_bw_gbs = bus * ratio;
  // Latency.
  const auto& base_lat = v218 ? kBaseLat218 : kBaseLat;
  const auto& hw_lat = v218 ? kHwLat218 : kHwLat;
  const int intra_hw = g.intra_nvlink ? kHwNvlink : kHwPci;
  double lat = base_lat[a][p];
  double intra_lat = hw_lat[intra_hw][a][p];
  const double inter_lat = (ppn == 1 ? hw_lat[kHwNet][kTree][p] : hw_lat[kHwNet][a][p]);  // + graph latencyInter (0 on IB)
  if (algo == NcclAlgo::ring) {
    if (op == CollectiveOp::broadcast || op == CollectiveOp::reduce) {
      lat += hw_lat[nodes == 1 ? intra_hw : kHwNet][kRing][p];  // same channels: one hop's latency
    } else {
      // Inter-node rings launch nsteps x the network post overhead (1 us Intel, 2 us AMD; x3 Simple).
      double net_overhead = 0;
      if (nodes > 1) net_overhead = (g.cpu_amd ? 2.0 : 1.0) * (proto == NcclProtocol::simple ? 3.0 : 1.0);
      intra_lat = std::max(intra_lat, net_overhead);
      // 2.18.5 counts 2 x nodes inter-node steps for all-reduce (v2.18.5-1 tuning.cc), master 2 x (nodes - 1).
      const int inter_steps = nodes == 1 ? 0 : all_reduce ? 2 * (nodes - (v218 ? 0 : 1)) : nodes - 1;
      lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
    }
  } else if (algo == NcclAlgo::tree) {
    lat += 2 * ((ppn - 1) * intra_lat + log2i(nodes) * inter_lat);
  } else {
    lat += intra_lat;  // NVLS: master 0 + 25 us on NVLink, 2.18.5 23 + 0 us
  }
  out.latency_us = lat * g.latency_scale;
  return out;
}

double nccl_time_us(const NcclGraph& g, CollectiveOp op, NcclAlgo a, NcclProtocol p, Bytes bytes) {
  const NcclCost c = nccl_cost(g, op, a, p);
  double bw = c.alg_bw_gbs, lat = c.latency_us;
  if (bw <= 0) return -1;
  const int log_size = log2i(std::max<Bytes>(bytes, 1) >> 6);
  if (a == NcclAlgo::tree && op == CollectiveOp::all_reduce && bytes >= 64 && log_size < 23)
    bw *= kTreeCorrection[proto_index(p)][log_size];
  // NVLS-tree's correction: Blackwell and later with an x86 host only (master).
  if (a == NcclAlgo::nvls_tree && g.tuner == NcclTuner::master && g.compcap >= 100 && g.cpu_x86 && bytes >= 64 &&
      log_size < 24)
    bw *= kTreeCorrection[proto_index(p)][log_size];
  // Plateau effect of ring (tuning.cc): inter-node Simple all-reduce pays 1.4x latency
  // (1.9x before Ampere) once a channel's share per rank reaches 64 bytes.
  if (a == NcclAlgo::ring && p == NcclProtocol::simple && g.nodes > 1 && op == CollectiveOp::all_reduce &&
      bytes / (static_cast<Bytes>(g.runtime_channels) * g.ranks) >= 64)
    lat *= g.compcap < 80 ? 1.9 : 1.4;
  if (fault_active(Fault::nccl_latency_omitted)) lat = 0;
  return lat + static_cast<double>(bytes) / (1000.0 * bw);
}

NcclChoice nccl_choose(const NcclGraph& g, CollectiveOp op, const std::vector<NcclAlgo>& algos, Bytes bytes,
                       const std::vector<NcclProtocol>& protocols) {
  NcclChoice best;
  best.time_us = std::numeric_limits<double>::infinity();
  // Planted bug: below 64 KiB the tuner takes the slowest pair instead of the fastest.
  const bool slowest = fault_active(Fault::nccl_tuner_slowest_small) && bytes < 64 * kKiB;
  double worst = -1;
  for (auto a : algos)
    for (auto p : protocols) {
      const double t = nccl_time_us(g, op, a, p, bytes);
      if (t < 0) continue;
      if (slowest ? t > worst : t < best.time_us) {
        worst = t;
        best = {a, p, t, nccl_cost(g, op, a, p)};
      }
    }
  if (!std::isfinite(best.time_us) && !slowest)
    throw std::invalid_argument(fmt::format("no NCCL algorithm and protocol can run {} here", collective_op_name(op)));
  if (slowest && worst < 0)
    throw std::invalid_argument(fmt::format("no NCCL algorithm and protocol can run {} here", collective_op_name(op)));
  return best;
}

}  // namespace dpt::sim
