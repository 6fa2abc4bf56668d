// Loading and validating hardware files: see hardware.hpp for the schema.
#include "sim/net/hardware.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/closest_name.hpp"
#include "sim/net/library_files.hpp"
#include "sim/net/yaml_util.hpp"

namespace dpt::sim {

// The engine's label: a string literal, so its data() ends in a NUL.
const char* compute_type_name(ComputeType t) { return compute_type_label(t).data(); }

int NvlinkSpec::links_between(int a, int b) const {
  for (const auto& p : pairs)
    if ((p.a == a && p.b == b) || (p.a == b && p.b == a)) return p.links;
  return 0;
}

BytesPerSecond pcie_lane_bandwidth(int generation) {
  // PCI-SIG base specifications: transfer rate per lane and line coding.
  switch (generation) {
    case 1: return 2.5e9 * 8 / 10 / 8;     // 2.5 GT/s, 8b/10b   -> 0.25 GB/s
    case 2: return 5.0e9 * 8 / 10 / 8;     // 5 GT/s, 8b/10b     -> 0.5 GB/s
    case 3: return 8.0e9 * 128 / 130 / 8;  // 8 GT/s, 128b/130b  -> 0.985 GB/s
    case 4: return 16.0e9 * 128 / 130 / 8; // 16 GT/s            -> 1.969 GB/s
    case 5: return 32.0e9 * 128 / 130 / 8; // 32 GT/s            -> 3.938 GB/s
    case 6: return 64.0e9 * 242 / 256 / 8; // 64 GT/s PAM4, FLIT (242 of 256 bytes payload) -> 7.56 GB/s
    default: throw std::invalid_argument(fmt::format("PCIe generation {} is not one of 1..6", generation));
  }
}

int pcie_switch_of(const HardwareSpec& hw, int local_gpu) {
  for (size_t s = 0; s < hw.pcie.switches.size(); ++s) {
    const auto& gs = hw.pcie.switches[s].gpus;
    if (std::find(gs.begin(), gs.end(), local_gpu) != gs.end()) return static_cast<int>(s);
  }
  return -1;
}

bool gpu_peer_access(const HardwareSpec& hw, int a, int b) {
  if (hw.nvlink && hw.nvlink->links_between(a, b) > 0) return true;
  if (hw.nvswitch) return true;
  auto socket = [&](int g) {
    const int sw = pcie_switch_of(hw, g);
    return sw < 0 ? 0 : hw.pcie.switches[static_cast<size_t>(sw)].socket;
  };
  return hw.pcie.peer_to_peer && socket(a) == socket(b);
}

BytesPerSecond staged_bidirectional_rate(const HardwareSpec& hw) {
  if (hw.pcie.staged_bidirectional) return *hw.pcie.staged_bidirectional;
  return kStagedBidirectionalLinkShare * pcie_lane_bandwidth(hw.pcie.generation) * hw.pcie.lanes;
}

BytesPerSecond staged_unidirectional_rate(const HardwareSpec& hw) {
  if (hw.pcie.staged_unidirectional) return *hw.pcie.staged_unidirectional;
  return kStagedUnidirectionalLinkShare * pcie_lane_bandwidth(hw.pcie.generation) * hw.pcie.lanes;
}

FlopsPerSecond peak_flops(const GpuSpec& gpu, ComputeType t) {
  std::optional<FlopsPerSecond> v;
  switch (t) {
    case ComputeType::f32: v = gpu.peak_flops.f32; break;
    case ComputeType::tf32: v = gpu.peak_flops.tf32; break;
    case ComputeType::bf16: v = gpu.peak_flops.bf16; break;
    case ComputeType::f16: v = gpu.peak_flops.f16; break;
    case ComputeType::f64: v = gpu.peak_flops.f64; break;
  }
  if (!v) throw std::invalid_argument(fmt::format("GPU {} has no {} peak rate", gpu.name, compute_type_name(t)));
  return *v;
}

namespace {

// Plausibility bounds, each wide enough for any real part and narrow enough that the
// simulation stays meaningful (a latency of years or a bandwidth of 1e-300 B/s is a typo,
// and makes the simulator's clock useless). Integers are checked before narrowing to int.
constexpr double kNs = 1e-9, kMs = 1e-3;
constexpr double kMBps = 1e6, kTBps = 1e12, kPBps = 1e15;
constexpr double kGflops = 1e9, kPflops = 1e15;
// Link latencies: a PCIe, NVLink, NVSwitch or NIC hop takes 100s of ns to a few us.
constexpr double kLinkLatencyLo = 1 * kNs, kLinkLatencyHi = 1.0;
// Host-side costs per op (kernel launch, framework dispatch): 1 ns .. 100 ms.
constexpr double kOpCostLo = 1 * kNs, kOpCostHi = 100 * kMs;
// Any link or memory: 1 MB/s (a crippled link) .. 1 PB/s (far beyond any HBM).
constexpr double kBandwidthLo = 1 * kMBps, kBandwidthHi = 1 * kPBps;

int int_in(MapReader& r, const std::string& key, int lo, int hi) { return static_cast<int>(r.get_int_in(key, lo, hi)); }

// Fractions of a rate, each in (0, 1]: an efficiency above 1 would beat the datasheet.
// A class's value is one fraction, or a map with one per compute type.
OpEfficiencySpec read_op_efficiency(MapReader r) {
  OpEfficiencySpec e;
  size_t index = 0;
  auto field = [&](const char* key, std::optional<double>& out) {
    std::map<ComputeType, double>& by_type = e.by_type[index++];
    if (r.has(key) && r.node(key).IsMap()) {
      MapReader types = r.map(key);
      for (ComputeType t : {ComputeType::f32, ComputeType::tf32, ComputeType::bf16, ComputeType::f16, ComputeType::f64})
        if (auto v = types.opt_double_in(compute_type_name(t), 1e-3, 1.0)) by_type[t] = *v;
      types.finish();
      if (by_type.empty()) r.fail(key, "expected a fraction or a map of compute types (f32, tf32, bf16, f16, f64)");
    } else if (auto v = r.opt_double_in(key, 1e-3, 1.0)) {
      out = *v;
    }
  };
  field("gemm", e.gemm);
  field("conv", e.conv);
  field("attention", e.attention);
  field("norm", e.norm);
  field("elementwise", e.elementwise);
  field("embedding", e.embedding);
  field("loss", e.loss);
  field("optimizer", e.optimizer);
  field("sdpa", e.sdpa);
  r.finish();
  return e;
}

GpuSpec read_gpu(MapReader r) {
  GpuSpec g;
  g.name = r.get_string("name");
  MapReader pf = r.map("peak_flops");
  // Dense peaks of one GPU: 1 GFLOPS (an old or emulated device) .. 100 PFLOPS.
  g.peak_flops.f32 = pf.get_flops_in("f32", 1 * kGflops, 100 * kPflops);
  g.peak_flops.f64 = pf.get_flops_in("f64", 1 * kGflops, 100 * kPflops);
  g.peak_flops.tf32 = pf.opt_flops_in("tf32", 1 * kGflops, 100 * kPflops);
  g.peak_flops.bf16 = pf.opt_flops_in("bf16", 1 * kGflops, 100 * kPflops);
  g.peak_flops.f16 = pf.opt_flops_in("f16", 1 * kGflops, 100 * kPflops);
  // Tensor Core rates (TF32, BF16, F16) are at least the FP32 CUDA-core rate on every GPU
  // that has them (GeForce Ampere's TF32 equals it): one below it is a typo or a swapped
  // field (an outside-user review's f32 of 512 TFLOPS above tf32's 378 loaded).
  for (const auto& [key, v] : {std::pair{"tf32", g.peak_flops.tf32}, std::pair{"bf16", g.peak_flops.bf16},
                               std::pair{"f16", g.peak_flops.f16}})
    if (v && *v < g.peak_flops.f32)
      pf.fail(key, fmt::format("{} TFLOPS is below f32's {} TFLOPS: Tensor Core rates are at least the FP32 rate "
                               "on every GPU that has them (check both figures against the datasheet's dense column)",
                               *v / 1e12, g.peak_flops.f32 / 1e12));
  // TF32 runs at half the dense F16 rate, or less, on every GPU that has both.
  if (g.peak_flops.tf32 && g.peak_flops.f16 && *g.peak_flops.tf32 > *g.peak_flops.f16)
    pf.fail("tf32", fmt::format("{} TFLOPS is above f16's {} TFLOPS: TF32 Tensor Cores run at most at the F16 rate "
                                "(half of it on datacenter parts; check the datasheet's dense column)",
                                *g.peak_flops.tf32 / 1e12, *g.peak_flops.f16 / 1e12));
  pf.finish();
  // Device memory: 1 MiB .. 64 TiB (today's largest GPUs hold under 0.5 TiB).
  // In binary units: a GPU's memory is binary-sized (an "80GB" H100 has 80 GiB of HBM3 and CUDA
  // reports 81,559 MiB of it), so the decimal reading of a datasheet's "40GB" (37.25 GiB, 6 %
  // short of the 39.6 GiB CUDA reports on an A100 40GB) is refused as the slip it is (an
  // outside-user review wrote `memory: 40 GB` and planned with 37.25 GiB).
  if (r.has("memory") && r.node("memory").IsScalar()) {
    const std::string text = r.node("memory").Scalar();
    for (const char* unit : {"kB", "KB", "MB", "GB", "TB"})
      if (text.size() > 2 && text.ends_with(unit)) {
        const Bytes bytes = parse_bytes_quantity(text, r.where("memory"));
        r.fail("memory", fmt::format("'{}' is decimal ({:.4g} GiB): GPU memory is binary-sized, and a datasheet's "
                                     "\"{}\" card holds {} {}iB; write what CUDA reports (nvidia-smi's "
                                     "memory.total, e.g. 81559 MiB on an H100 80GB) or the GiB figure",
                                     text, static_cast<double>(bytes) / static_cast<double>(kGiB),
                                     text.substr(0, text.find_first_of(" kKMGT")) + unit,
                                     text.substr(0, text.find_first_of(" kKMGT")), std::string(1, unit[0] == 'k' ? 'K' : unit[0])));
      }
  }
  g.memory_bytes = r.get_bytes_in("memory", kMiB, 64 * 1024 * kGiB);
  g.memory_bandwidth = r.get_byte_bandwidth_in("memory_bandwidth", kBandwidthLo, kBandwidthHi);
  g.kernel_launch_latency_s = r.get_time_in("kernel_launch_latency", kOpCostLo, kOpCostHi);
  // Streaming multiprocessors: 1 .. 1024 (today's GPUs have 20 to 160).
  if (auto sms = r.opt_int("sm_count")) {
    if (*sms < 1 || *sms > 1024) r.fail("sm_count", fmt::format("{} is outside 1 .. 1024", *sms));
    g.sm_count = static_cast<int>(*sms);
  }
  if (r.has("op_efficiency")) g.op_efficiency = read_op_efficiency(r.map("op_efficiency"));
  // Compute capability, as CUDA states it (9.0): 3.0 .. 15.0.
  if (r.has("compute_capability")) {
    const double cc = r.get_double("compute_capability");
    if (!(cc >= 3.0 && cc <= 15.0)) r.fail("compute_capability", fmt::format("{} is outside 3.0 .. 15.0", cc));
    g.compute_capability = static_cast<int>(std::lround(cc * 10));
  }
  // TF32 and BF16 Tensor Cores came with compute capability 8.0 (Ampere): a GPU stated, or
  // known by name, to be older has neither (a V100 file with a bf16 peak had loaded).
  if (const auto cc = g.compute_capability ? g.compute_capability : known_compute_capability(g.name); cc && *cc < 80)
    for (const auto& [key, v] : {std::pair{"tf32", g.peak_flops.tf32}, std::pair{"bf16", g.peak_flops.bf16}})
      if (v)
        pf.fail(key, fmt::format("{} has compute capability {}.{}, which has no {} Tensor Cores (compute capability "
                                 "8.0, Ampere, introduced them): remove the figure, or correct compute_capability",
                                 g.name, *cc / 10, *cc % 10, key == std::string("tf32") ? "TF32" : "BF16"));
  r.finish();
  return g;
}

PcieSpec read_pcie(MapReader r) {
  PcieSpec p;
  p.generation = int_in(r, "generation", 1, 6);
  p.lanes = int_in(r, "lanes", 1, 32);
  // The link widths the PCIe specification defines (x3 or x5 is a typo, not a link).
  if (p.lanes != 1 && p.lanes != 2 && p.lanes != 4 && p.lanes != 8 && p.lanes != 12 && p.lanes != 16 && p.lanes != 32)
    r.fail("lanes", fmt::format("x{} is not a PCIe link width (1, 2, 4, 8, 12, 16 or 32)", p.lanes));
  p.latency_s = r.get_time_in("latency", kLinkLatencyLo, kLinkLatencyHi);
  p.peer_to_peer = r.get_bool("peer_to_peer");
  p.staged_bidirectional = r.opt_bandwidth("staged_bidirectional");
  if (p.staged_bidirectional) r.require_range("staged_bidirectional", *p.staged_bidirectional, kMBps, kPBps);
  p.staged_unidirectional = r.opt_bandwidth("staged_unidirectional");
  if (p.staged_unidirectional) r.require_range("staged_unidirectional", *p.staged_unidirectional, kMBps, kPBps);
  if (r.has("switches")) {
    for (MapReader s : r.map_list("switches")) {
      PcieSwitchSpec sw;
      sw.socket = int_in(s, "socket", 0, 15);
      for (auto g : s.get_int_list("gpus")) {
        if (g < 0 || g > 63) s.fail("gpus", fmt::format("GPU {} is outside 0 .. 63", g));
        sw.gpus.push_back(static_cast<int>(g));
      }
      if (s.has("nics"))
        for (auto n : s.get_int_list("nics")) {
          if (n < 0 || n > 63) s.fail("nics", fmt::format("NIC {} is outside 0 .. 63", n));
          sw.nics.push_back(static_cast<int>(n));
        }
      sw.uplink_lanes = static_cast<int>(s.opt_int_in("uplink_lanes", 1, 64).value_or(16));
      s.finish();
      p.switches.push_back(std::move(sw));
    }
  }
  r.finish();
  return p;
}

NvlinkSpec read_nvlink(MapReader r) {
  NvlinkSpec n;
  n.generation = int_in(r, "generation", 1, 5);
  n.link_bandwidth = r.get_byte_bandwidth_in("link_bandwidth", kBandwidthLo, 10 * kTBps);
  n.latency_s = r.get_time_in("latency", kLinkLatencyLo, kLinkLatencyHi);
  const YAML::Node pairs = r.node("pairs");
  if (!pairs.IsSequence()) r.fail("pairs", "expected a list of [gpu_a, gpu_b, links]");
  for (size_t i = 0; i < pairs.size(); ++i) {
    const std::string w = yaml_where(r.file(), pairs[i]) + fmt::format("{}[{}]: ", r.key_path("pairs"), i);
    if (!pairs[i].IsSequence() || pairs[i].size() != 3)
      throw std::invalid_argument(w + "expected [gpu_a, gpu_b, links]");
    std::int64_t v[3];
    for (int k = 0; k < 3; ++k) {
      const std::string s = pairs[i][k].IsScalar() ? pairs[i][k].Scalar() : "?";
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v[k]);
      if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
        throw std::invalid_argument(w + fmt::format("expected an integer, got '{}'", s));
    }
    if (v[0] < 0 || v[1] < 0 || v[0] > 63 || v[1] > 63 || v[0] == v[1])
      throw std::invalid_argument(w + "GPUs must be two distinct indices in 0 .. 63");
    // NVLink 4 has 18 links per GPU, the most so far.
    if (v[2] < 1 || v[2] > 64) throw std::invalid_argument(w + fmt::format("links {} is outside 1 .. 64", v[2]));
    const int a = static_cast<int>(v[0]), b = static_cast<int>(v[1]);
    if (n.links_between(a, b) > 0) throw std::invalid_argument(w + fmt::format("pair {}-{} listed twice", a, b));
    n.pairs.push_back({a, b, static_cast<int>(v[2])});
  }
  r.finish();
  return n;
}

NvswitchSpec read_nvswitch(MapReader r) {
  NvswitchSpec s;
  s.generation = int_in(r, "generation", 1, 4);
  s.links_per_gpu = int_in(r, "links_per_gpu", 1, 64);
  s.link_bandwidth = r.get_byte_bandwidth_in("link_bandwidth", kBandwidthLo, 10 * kTBps);
  s.latency_s = r.get_time_in("latency", kLinkLatencyLo, kLinkLatencyHi);
  s.in_switch_reduction = r.get_bool("in_switch_reduction");
  r.finish();
  return s;
}

HostSpec read_host(MapReader r) {
  HostSpec h;
  h.cpu = r.get_string("cpu");
  h.sockets = int_in(r, "sockets", 1, 16);
  h.cores = int_in(r, "cores", 1, 65536);
  h.memory_bandwidth = r.get_byte_bandwidth_in("memory_bandwidth", kBandwidthLo, kBandwidthHi);
  if (h.sockets > 1 || r.has("inter_socket_bandwidth"))
    h.inter_socket_bandwidth = r.get_byte_bandwidth_in("inter_socket_bandwidth", kBandwidthLo, kBandwidthHi);
  h.dispatch_cost_s = r.get_time_in("dispatch_cost", kOpCostLo, kOpCostHi);
  h.gil = r.get_bool("gil");
  r.finish();
  return h;
}

NetworkSpec read_network(MapReader r) {
  NetworkSpec n;
  n.nics_per_node = int_in(r, "nics_per_node", 1, 64);
  // A NIC: 1 Mb/s .. 100 Tb/s line rate.
  n.nic_bandwidth = r.get_bandwidth_in("nic_bandwidth", 1e6 / 8, 100e12 / 8);
  n.latency_s = r.get_time_in("latency", kLinkLatencyLo, kLinkLatencyHi);
  n.gpu_direct_rdma = r.opt_bool("gpu_direct_rdma").value_or(true);
  const std::string topo = r.get_string("topology");
  if (topo == "single_switch") {
    n.topology = FabricTopology::single_switch;
  } else if (topo == "fat_tree") {
    n.topology = FabricTopology::fat_tree;
    n.nodes_per_leaf = int_in(r, "nodes_per_leaf", 1, 4096);
    n.oversubscription = r.opt_double_in("oversubscription", 1.0, 64.0).value_or(1.0);
    if (const auto radix = r.opt_int_in("switch_radix", 4, 1024)) {
      if (*radix % 2 != 0) r.fail("switch_radix", fmt::format("must be an even port count in 4..1024, got {}", *radix));
      n.switch_radix = static_cast<int>(*radix);
      if (n.nodes_per_leaf > n.switch_radix)
        r.fail("nodes_per_leaf", fmt::format("{} nodes on one leaf need more than its switch_radix of {} ports",
                                             n.nodes_per_leaf, n.switch_radix));
    }
    n.switch_link_rate = r.opt_bandwidth("switch_link_rate");
    if (n.switch_link_rate) r.require_range("switch_link_rate", *n.switch_link_rate, 1e6 / 8, 100e12 / 8);
    n.core_oversubscription = r.opt_double_in("core_oversubscription", 1.0, 64.0).value_or(1.0);
  } else {
    r.fail("topology", fmt::format("must be single_switch or fat_tree, got '{}'", topo));
  }
  r.finish();
  return n;
}

EfficiencySpec read_efficiency(MapReader r) {
  EfficiencySpec e;  // defaults (sources in hardware.hpp's EfficiencySpec and below)
  auto field = [&](const char* key, double& out) {
    if (auto v = r.opt_double_in(key, 1e-3, 1.0)) out = *v;
  };
  field("gemm", e.gemm);
  field("memory_bandwidth", e.memory_bandwidth);
  field("p2p", e.p2p);
  field("pcie", e.pcie);
  field("nic", e.nic);
  if (auto v = r.opt_double_in("nccl_latency", 0.1, 10.0)) e.nccl_latency = *v;
  if (auto v = r.opt_double_in("ridge_exponent", 1.0, 16.0)) e.ridge_exponent = *v;
  r.finish();
  return e;
}

GlooSpec read_gloo(MapReader r) {
  GlooSpec g;
  g.tcp_bandwidth = r.get_bandwidth_in("tcp_bandwidth", kBandwidthLo, kBandwidthHi);
  g.message_latency_s = r.get_time_in("message_latency", kLinkLatencyLo, kLinkLatencyHi);
  g.reduce_bandwidth = r.get_bandwidth_in("reduce_bandwidth", kBandwidthLo, kBandwidthHi);
  if (r.has("tcp_bandwidth_by_buffer")) {
    for (MapReader point : r.map_list("tcp_bandwidth_by_buffer")) {
      GlooSpec::BufferRate p;
      p.buffer_bytes = point.get_bytes_in("buffer", 1, Bytes{1} << 40);
      p.bandwidth = point.get_bandwidth_in("bandwidth", kBandwidthLo, kBandwidthHi);
      if (!g.tcp_bandwidth_by_buffer.empty() && p.buffer_bytes <= g.tcp_bandwidth_by_buffer.back().buffer_bytes)
        point.fail("buffer", fmt::format("{} bytes: buffers must ascend", p.buffer_bytes));
      point.finish();
      g.tcp_bandwidth_by_buffer.push_back(p);
    }
  }
  if (auto v = r.opt_double_in("core_share", 0.0, 1.0)) g.core_share = *v;
  r.finish();
  return g;
}

std::string stem_of(const std::string& file_label) { return std::filesystem::path(file_label).stem().string(); }

}  // namespace

const std::vector<std::string>& known_nccl_versions() {
  static const std::vector<std::string> versions{"master", "2.18.5"};
  return versions;
}

namespace {
// The 1-based line of a key path ("pcie.switches[3].gpus", "network") in a parsed file, or
// the line of the deepest part of it the file has (a missing network section: none).
std::optional<int> key_path_line(const YAML::Node& doc, const std::string& path) {
  YAML::Node node = doc;
  std::optional<int> line;
  size_t i = 0;
  while (i < path.size()) {
    size_t end = path.find_first_of(".[", i);
    const std::string key = path.substr(i, end == std::string::npos ? std::string::npos : end - i);
    if (key.empty() || !node.IsMap() || !node[key]) return line;
    node = node[key];
    line = static_cast<int>(node.Mark().line) + 1;
    i = end == std::string::npos ? path.size() : end;
    while (i < path.size() && path[i] == '[') {
      const size_t close = path.find(']', i);
      if (close == std::string::npos) return line;
      size_t index = 0;
      try {
        index = std::stoul(path.substr(i + 1, close - i - 1));
      } catch (const std::exception&) {
        return line;
      }
      if (!node.IsSequence() || index >= node.size()) return line;
      node = node[index];
      line = static_cast<int>(node.Mark().line) + 1;
      i = close + 1;
    }
    if (i < path.size() && path[i] == '.') ++i;
  }
  return line;
}
}  // namespace

HardwareSpec parse_hardware_yaml(const std::string& text, const std::string& file_label) {
  const YAML::Node doc = yaml_load_string(text, file_label);
  MapReader r(doc, file_label, "");
  HardwareSpec hw;
  hw.source_file = file_label;
  hw.name = r.opt_string("name").value_or(stem_of(file_label));
  hw.description = r.opt_string("description").value_or("");
  hw.nodes = int_in(r, "nodes", 1, 4096);
  hw.gpus_per_node = int_in(r, "gpus_per_node", 1, 64);
  hw.gpu = read_gpu(r.map("gpu"));
  hw.pcie = read_pcie(r.map("pcie"));
  if (r.has("nvlink")) hw.nvlink = read_nvlink(r.map("nvlink"));
  if (r.has("nvswitch")) hw.nvswitch = read_nvswitch(r.map("nvswitch"));
  hw.host = read_host(r.map("host"));
  if (r.has("network")) hw.network = read_network(r.map("network"));
  if (r.has("efficiency")) hw.efficiency = read_efficiency(r.map("efficiency"));
  if (r.has("gloo")) hw.gloo = read_gloo(r.map("gloo"));
  if (auto v = r.opt_string("nccl_version")) {
    const auto& known = known_nccl_versions();
    if (std::find(known.begin(), known.end(), *v) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      r.fail("nccl_version", fmt::format("unknown NCCL version '{}' (known: {})", *v, list));
    }
    hw.nccl_version = *v;
  }
  hw.nccl_p2p_disable = r.opt_bool("nccl_p2p_disable").value_or(false);
  r.finish();
  try {
    validate_hardware(hw);
  } catch (const std::invalid_argument& e) {
    // validate_hardware names the key ("pcie.switches[3].gpus: GPU 4 is not in 0..3"): give
    // its line too, as the readers do, where the file has that key.
    const std::string what = e.what();
    const auto line = key_path_line(doc, what.substr(0, what.find(": ")));
    throw std::invalid_argument(line ? fmt::format("{}:{}: {}", file_label, *line, what)
                                     : fmt::format("{}: {}", file_label, what));
  }
  return hw;
}

std::optional<int> known_compute_capability(const std::string& gpu_name) {
  std::string n;
  for (char c : gpu_name) n += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("B200") || has("B100") || has("GB200") || has("B300")) return 100;
  if (has("H100") || has("H200") || has("H800") || has("H20") || has("GH200")) return 90;
  if (has("L40") || has("4090") || has("4080") || has("ADA") || has("L4-") || n == "L4") return 89;
  if (has("A100") || has("A800") || has("A30")) return 80;
  if (has("A6000") || has("A40") || has("A10") || has("3090") || has("3080") || has("A5000")) return 86;
  // Turing: the RTX 20 series, TITAN RTX and the T4 (the same check as before read them as Ampere).
  if (has("2080") || has("2070") || has("TITAN-RTX") || has("TITAN RTX") || has("TESLA T4") || n == "T4" || has("T4-"))
    return 75;
  if (has("V100") || has("TITAN V") || has("TITAN-V")) return 70;
  if (has("P100")) return 60;
  return std::nullopt;
}

int gpu_compute_capability_of(const GpuSpec& gpu) {
  if (gpu.compute_capability) return *gpu.compute_capability;
  return known_compute_capability(gpu.name).value_or(80);
}

void validate_hardware(const HardwareSpec& hw) {
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  const int n = hw.gpus_per_node;
  if (hw.nodes < 1) bad(fmt::format("nodes: must be positive, got {}", hw.nodes));
  if (n < 1) bad(fmt::format("gpus_per_node: must be positive, got {}", n));
  // NCCL_P2P_DISABLE is NCCL's: a gloo host would ignore it without a word.
  if (hw.nccl_p2p_disable && hw.gloo)
    bad("nccl_p2p_disable: this machine's collectives are gloo's (its gloo section), not NCCL's; NCCL_P2P_DISABLE "
        "does not apply");
  // NVLink SHARP (NVLS) is Hopper's and later: a file that claims it on an earlier GPU (or
  // on a GPU whose name dptwin reads as earlier) would silently run rings.
  if (const int cc = gpu_compute_capability_of(hw.gpu); hw.nvswitch && hw.nvswitch->in_switch_reduction && cc < 90)
    bad(fmt::format("nvswitch.in_switch_reduction: NVLink SHARP needs compute capability 9.0 or later (Hopper), but "
                    "gpu {} is {}.{}{}",
                    hw.gpu.name, cc / 10, cc % 10,
                    hw.gpu.compute_capability || known_compute_capability(hw.gpu.name)
                        ? ""
                        : " (a name dptwin does not know: give gpu.compute_capability, e.g. 9.0)"));
  if (hw.nodes > 1 && !hw.network)
    bad(fmt::format("nodes: {} needs a network section (how the nodes connect)", hw.nodes));
  std::set<int> on_switch;
  for (size_t i = 0; i < hw.pcie.switches.size(); ++i) {
    const auto& sw = hw.pcie.switches[i];
    if (sw.socket >= hw.host.sockets)
      bad(fmt::format("pcie.switches[{}].socket: {} but host.sockets is {}", i, sw.socket, hw.host.sockets));
    for (int g : sw.gpus) {
      if (g < 0 || g >= n) bad(fmt::format("pcie.switches[{}].gpus: GPU {} is not in 0..{}", i, g, n - 1));
      if (!on_switch.insert(g).second) bad(fmt::format("pcie.switches[{}].gpus: GPU {} is on two switches", i, g));
    }
    for (int nic : sw.nics) {
      const int nics = hw.network ? hw.network->nics_per_node : 0;
      if (nic < 0 || nic >= nics)
        bad(fmt::format("pcie.switches[{}].nics: NIC {} is not in 0..{} (network.nics_per_node)", i, nic, nics - 1));
    }
  }
  // Switches that place some GPUs place them all (with none placed, every GPU hangs off
  // socket 0's root complex; switches of NICs alone are fine): gpus_per_node raised from 8
  // to 16 with the switches left alone ran 8 GPUs on root ports the file never describes,
  // without a word (an outside-user review).
  if (!on_switch.empty() && static_cast<int>(on_switch.size()) < n)
    for (int g = 0; g < n; ++g)
      if (!on_switch.count(g)) {
        bad(fmt::format("pcie.switches: GPU {} of gpus_per_node {} is on no switch (the switches place {} GPUs): "
                        "list every GPU under a switch, or set gpus_per_node to the GPUs they place",
                        g, n, on_switch.size()));
        break;
      }
  if (hw.nvlink)
    for (const auto& p : hw.nvlink->pairs)
      if (p.a >= n || p.b >= n)
        bad(fmt::format("nvlink.pairs: pair [{}, {}] names a GPU outside 0..{}", p.a, p.b, n - 1));
  if (hw.network && hw.network->topology == FabricTopology::fat_tree && hw.network->nodes_per_leaf < 1)
    bad("network.nodes_per_leaf: must be positive for a fat_tree");
}

HardwareSpec load_hardware_file(const std::filesystem::path& path) {
  const std::string label = path.string();
  const YAML::Node probe = yaml_load_file(label);  // checks the file opens and parses
  (void)probe;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_hardware_yaml(ss.str(), label);
}

std::vector<std::string> list_hardware(const std::filesystem::path& library_dir) {
  return yaml_file_stems(library_dir);
}

std::filesystem::path measured_hardware_dir(const std::filesystem::path& library_dir) {
  // "scenarios/hardware/" (a trailing separator) is the folder "scenarios/hardware" too.
  std::filesystem::path library = library_dir.lexically_normal();
  if (!library.has_filename()) library = library.parent_path();
  return library.parent_path() / "measured" / "public" / "hardware";
}

std::vector<std::string> list_measured_hardware(const std::filesystem::path& library_dir) {
  std::error_code ec;
  const auto dir = measured_hardware_dir(library_dir);
  if (!std::filesystem::is_directory(dir, ec)) return {};
  // A machine named as a library file is reached as the library's: not listed.
  const auto library = list_hardware(library_dir);
  std::vector<std::string> out;
  for (auto& name : yaml_file_stems(dir))
    if (std::find(library.begin(), library.end(), name) == library.end()) out.push_back(std::move(name));
  return out;
}

std::optional<std::filesystem::path> find_hardware_file(const std::string& name,
                                                        const std::filesystem::path& library_dir) {
  std::error_code ec;
  for (const auto& dir : {library_dir, measured_hardware_dir(library_dir)}) {
    const auto file = dir / (name + ".yaml");
    if (std::filesystem::is_regular_file(file, ec)) return file;
  }
  return std::nullopt;
}

std::string unknown_hardware_hint(const std::string& name, const std::filesystem::path& library_dir, bool with_dirs,
                                  const std::string& tail) {
  const auto library = list_hardware(library_dir);
  const auto measured = list_measured_hardware(library_dir);
  std::vector<std::string> all = library;
  all.insert(all.end(), measured.begin(), measured.end());
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += out.empty() ? s : ", " + s;
    return out.empty() ? std::string("empty") : out;
  };
  auto near = closest_name(name, all);
  // A name that is the start of exactly one ("a10" of "a10-1x"), where no name is close.
  if (!near) {
    std::vector<std::string> starting;
    for (const auto& n : all)
      if (n.rfind(name + "-", 0) == 0) starting.push_back(n);
    if (starting.size() == 1) near = starting.front();
  }
  auto in = [&](const std::filesystem::path& dir) { return with_dirs ? " " + dir.string() : std::string(); };
  return fmt::format("{} (library{}: {}{}{})", near ? fmt::format("; did you mean '{}'?", *near) : "",
                     in(library_dir), join(library),
                     measured.empty() ? "" : fmt::format("; the fidelity table's machines{}: {}",
                                                         in(measured_hardware_dir(library_dir)), join(measured)),
                     tail);
}

HardwareSpec load_hardware(std::string_view name_or_path, const std::filesystem::path& library_dir) {
  const std::filesystem::path as_path(name_or_path);
  std::error_code ec;  // a name too long or a symbolic-link loop is bad input, not an internal error
  if (as_path.extension() == ".yaml" || name_or_path.find('/') != std::string_view::npos) {
    if (!std::filesystem::exists(as_path, ec))
      throw std::invalid_argument(fmt::format("hardware file '{}' {}", name_or_path,
                                              ec ? "cannot be read: " + ec.message() : "does not exist"));
    // A folder read as YAML said "document: expected a mapping" (an outside-user review).
    if (std::filesystem::is_directory(as_path, ec))
      throw std::invalid_argument(fmt::format("hardware file '{}' is a directory, not a YAML file", name_or_path));
    return load_hardware_file(as_path);
  }
  return load_hardware_file(hardware_file_of(std::string(name_or_path), library_dir));
}

std::filesystem::path hardware_file_of(const std::string& name, const std::filesystem::path& library_dir) {
  const auto file = find_hardware_file(name, library_dir);
  if (!file)
    throw std::invalid_argument(
        fmt::format("unknown hardware '{}'{}", name, unknown_hardware_hint(name, library_dir, true, "")));
  return *file;
}

HardwareSpec with_nodes(const HardwareSpec& hw, int nodes) {
  if (nodes < 1 || nodes > 4096) throw std::invalid_argument(fmt::format("nodes must be in 1..4096, got {}", nodes));
  if (nodes > 1 && !hw.network)
    throw std::invalid_argument(fmt::format("hardware {} has no network section, so it cannot have {} nodes", hw.name, nodes));
  HardwareSpec out = hw;
  out.nodes = nodes;
  validate_hardware(out);
  return out;
}

HardwareSpec homogeneous_switch(const HardwareSpec& base, int gpus, BytesPerSecond port_bandwidth,
                                Seconds port_latency) {
  if (gpus < 1) throw std::invalid_argument(fmt::format("homogeneous_switch: gpus must be positive, got {}", gpus));
  if (!(port_bandwidth > 0)) throw std::invalid_argument("homogeneous_switch: port bandwidth must be positive");
  HardwareSpec hw = base;
  hw.name = fmt::format("homogeneous-switch-{}", gpus);
  hw.description = "synthetic: one switch, identical ports, efficiency 1";
  hw.source_file.clear();
  hw.nodes = 1;
  hw.gpus_per_node = gpus;
  hw.pcie.switches.clear();
  hw.nvlink.reset();
  hw.network.reset();
  NvswitchSpec sw;
  sw.generation = 3;
  sw.links_per_gpu = 1;
  sw.link_bandwidth = port_bandwidth;
  sw.latency_s = port_latency;
  sw.in_switch_reduction = false;
  hw.nvswitch = sw;
  hw.efficiency = EfficiencySpec{1.0, 1.0, 1.0, 1.0, 1.0, 1.0, std::numeric_limits<double>::infinity()};
  hw.gpu.op_efficiency = OpEfficiencySpec{};
  hw.gpu.op_efficiency.conv.reset();  // every class at the (unit) GEMM and streaming fractions
  validate_hardware(hw);
  return hw;
}

}  // namespace dpt::sim
