#include "scenarios/measure/calibrate.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

namespace dpt::verify {
namespace {

std::string flops(FlopsPerSecond v) { return fmt::format("{:.9g} TFLOPS", v / 1e12); }
std::string bandwidth(BytesPerSecond v) { return fmt::format("{:.9g} GB/s", v / 1e9); }
std::string time_us(Seconds s) { return fmt::format("{:.9g} us", s * 1e6); }
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}

// Emits "key: value  # comment" lines at an indentation, with comments by dotted path.
class Emitter {
 public:
  explicit Emitter(const YamlComments& comments) : comments_(comments) {}
  void line(int indent, const std::string& path, const std::string& key, const std::string& value) {
    text_ += std::string(static_cast<size_t>(indent), ' ') + key + ":" + (value.empty() ? "" : " " + value);
    const auto it = comments_.find(path);
    if (it != comments_.end()) text_ += "   # " + it->second;
    text_ += "\n";
  }
  void raw(const std::string& s) { text_ += s; }
  const std::string& text() const { return text_; }

 private:
  const YamlComments& comments_;
  std::string text_;
};

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

sim::HardwareSpec host_spec_from_figures(const Figures& m, int devices, const std::string& cpu_name) {
  if (m.gemm_flops_per_s.empty() || m.memory_Bps.empty())
    throw std::invalid_argument("host calibration needs the GEMM and memory figures");
  sim::HardwareSpec hw;
  hw.name = "host-calibrated";
  hw.description = "the host backend's workers as measured by dptwin verify";
  hw.nodes = 1;
  hw.gpus_per_node = devices;
  hw.gpu.name = "host-worker";
  const double gemm = mean(m.gemm_flops_per_s);
  hw.gpu.peak_flops.f32 = gemm;
  hw.gpu.peak_flops.f64 = gemm;
  hw.gpu.memory_bytes = 64 * kGiB;
  hw.gpu.memory_bandwidth = mean(m.memory_Bps);
  hw.gpu.kernel_launch_latency_s = 1e-6;
  hw.pcie.generation = 4;
  hw.pcie.lanes = 16;
  hw.pcie.latency_s = 1e-6;
  hw.pcie.peer_to_peer = true;
  hw.host.cpu = cpu_name;
  hw.host.sockets = 1;
  hw.host.cores = devices;
  hw.host.memory_bandwidth = hw.gpu.memory_bandwidth;
  hw.host.inter_socket_bandwidth = hw.gpu.memory_bandwidth;
  // The engine's own per-op overhead on the host, order of 1 us (no Python). The host
  // backend's DataParallel workers are threads of one process: modelled like a GIL.
  hw.host.dispatch_cost_s = 1e-6;
  hw.host.gil = true;
  hw.efficiency.gemm = 1.0;
  hw.efficiency.memory_bandwidth = 1.0;
  hw.efficiency.p2p = 1.0;
  hw.efficiency.nic = 1.0;
  std::vector<double> peers;
  for (const auto& p : m.peers) peers.push_back(p.bandwidth_Bps);
  const BytesPerSecond raw_pcie = sim::pcie_lane_bandwidth(hw.pcie.generation) * hw.pcie.lanes;
  // A peer copy crosses the source's and the destination's link: its rate is one link's.
  hw.efficiency.pcie = peers.empty() ? 1.0 : std::min(1.0, mean(peers) / raw_pcie);
  if (!peers.empty() && mean(peers) > raw_pcie) {
    // Memory copies between workers outrun a Gen4 x16 link: use a faster generation.
    hw.pcie.generation = 6;
    hw.efficiency.pcie = std::min(1.0, mean(peers) / (sim::pcie_lane_bandwidth(6) * hw.pcie.lanes));
  }
  sim::validate_hardware(hw);
  return hw;
}

std::string hardware_yaml(const sim::HardwareSpec& hw, const YamlComments& comments, const std::string& header) {
  Emitter e(comments);
  if (!header.empty()) {
    std::string h = header;
    size_t pos = 0;
    while (pos <= h.size()) {
      const size_t nl = h.find('\n', pos);
      e.raw("# " + h.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos) + "\n");
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
  }
  e.line(0, "name", "name", hw.name);
  if (!hw.description.empty()) e.line(0, "description", "description", quoted(hw.description));
  e.line(0, "nodes", "nodes", std::to_string(hw.nodes));
  e.line(0, "gpus_per_node", "gpus_per_node", std::to_string(hw.gpus_per_node));
  e.line(0, "gpu", "gpu", "");
  e.line(2, "gpu.name", "name", quoted(hw.gpu.name));
  e.line(2, "gpu.peak_flops", "peak_flops", "");
  e.line(4, "gpu.peak_flops.f64", "f64", flops(hw.gpu.peak_flops.f64));
  e.line(4, "gpu.peak_flops.f32", "f32", flops(hw.gpu.peak_flops.f32));
  if (hw.gpu.peak_flops.tf32) e.line(4, "gpu.peak_flops.tf32", "tf32", flops(*hw.gpu.peak_flops.tf32));
  if (hw.gpu.peak_flops.bf16) e.line(4, "gpu.peak_flops.bf16", "bf16", flops(*hw.gpu.peak_flops.bf16));
  if (hw.gpu.peak_flops.f16) e.line(4, "gpu.peak_flops.f16", "f16", flops(*hw.gpu.peak_flops.f16));
  e.line(2, "gpu.memory", "memory", fmt::format("{} B", hw.gpu.memory_bytes));
  e.line(2, "gpu.memory_bandwidth", "memory_bandwidth", bandwidth(hw.gpu.memory_bandwidth));
  e.line(2, "gpu.kernel_launch_latency", "kernel_launch_latency", time_us(hw.gpu.kernel_launch_latency_s));
  e.line(0, "pcie", "pcie", "");
  e.line(2, "pcie.generation", "generation", std::to_string(hw.pcie.generation));
  e.line(2, "pcie.lanes", "lanes", std::to_string(hw.pcie.lanes));
  e.line(2, "pcie.latency", "latency", time_us(hw.pcie.latency_s));
  e.line(2, "pcie.peer_to_peer", "peer_to_peer", hw.pcie.peer_to_peer ? "true" : "false");
  if (hw.pcie.staged_bidirectional)
    e.line(2, "pcie.staged_bidirectional", "staged_bidirectional", bandwidth(*hw.pcie.staged_bidirectional));
  if (!hw.pcie.switches.empty()) {
    e.line(2, "pcie.switches", "switches", "");
    for (const auto& s : hw.pcie.switches) {
      auto list = [](const std::vector<int>& v) {
        std::string out = "[";
        for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
        return out + "]";
      };
      e.raw(fmt::format("    - {{socket: {}, gpus: {}, nics: {}, uplink_lanes: {}}}\n", s.socket, list(s.gpus),
                        list(s.nics), s.uplink_lanes));
    }
  }
  if (hw.nvlink) {
    e.line(0, "nvlink", "nvlink", "");
    e.line(2, "nvlink.generation", "generation", std::to_string(hw.nvlink->generation));
    e.line(2, "nvlink.link_bandwidth", "link_bandwidth", bandwidth(hw.nvlink->link_bandwidth));
    e.line(2, "nvlink.latency", "latency", time_us(hw.nvlink->latency_s));
    std::string pairs = "[";
    for (size_t i = 0; i < hw.nvlink->pairs.size(); ++i) {
      const auto& p = hw.nvlink->pairs[i];
      pairs += fmt::format("{}[{}, {}, {}]", i ? ", " : "", p.a, p.b, p.links);
    }
    e.line(2, "nvlink.pairs", "pairs", pairs + "]");
  }
  if (hw.nvswitch) {
    e.line(0, "nvswitch", "nvswitch", "");
    e.line(2, "nvswitch.generation", "generation", std::to_string(hw.nvswitch->generation));
    e.line(2, "nvswitch.links_per_gpu", "links_per_gpu", std::to_string(hw.nvswitch->links_per_gpu));
    e.line(2, "nvswitch.link_bandwidth", "link_bandwidth", bandwidth(hw.nvswitch->link_bandwidth));
    e.line(2, "nvswitch.latency", "latency", time_us(hw.nvswitch->latency_s));
    e.line(2, "nvswitch.in_switch_reduction", "in_switch_reduction", hw.nvswitch->in_switch_reduction ? "true" : "false");
  }
  e.line(0, "host", "host", "");
  e.line(2, "host.cpu", "cpu", quoted(hw.host.cpu));
  e.line(2, "host.sockets", "sockets", std::to_string(hw.host.sockets));
  e.line(2, "host.cores", "cores", std::to_string(hw.host.cores));
  e.line(2, "host.memory_bandwidth", "memory_bandwidth", bandwidth(hw.host.memory_bandwidth));
  e.line(2, "host.inter_socket_bandwidth", "inter_socket_bandwidth", bandwidth(hw.host.inter_socket_bandwidth));
  e.line(2, "host.dispatch_cost", "dispatch_cost", time_us(hw.host.dispatch_cost_s));
  e.line(2, "host.gil", "gil", hw.host.gil ? "true" : "false");
  if (hw.network) {
    e.line(0, "network", "network", "");
    e.line(2, "network.nics_per_node", "nics_per_node", std::to_string(hw.network->nics_per_node));
    e.line(2, "network.nic_bandwidth", "nic_bandwidth", bandwidth(hw.network->nic_bandwidth));
    e.line(2, "network.latency", "latency", time_us(hw.network->latency_s));
    const bool fat = hw.network->topology == sim::FabricTopology::fat_tree;
    e.line(2, "network.topology", "topology", fat ? "fat_tree" : "single_switch");
    if (fat) {
      e.line(2, "network.nodes_per_leaf", "nodes_per_leaf", std::to_string(hw.network->nodes_per_leaf));
      e.line(2, "network.oversubscription", "oversubscription", fmt::format("{:.9g}", hw.network->oversubscription));
      if (hw.network->switch_radix > 0)
        e.line(2, "network.switch_radix", "switch_radix", std::to_string(hw.network->switch_radix));
      if (hw.network->switch_link_rate)
        e.line(2, "network.switch_link_rate", "switch_link_rate", bandwidth(*hw.network->switch_link_rate));
      e.line(2, "network.core_oversubscription", "core_oversubscription",
             fmt::format("{:.9g}", hw.network->core_oversubscription));
    }
  }
  e.line(0, "efficiency", "efficiency", "");
  e.line(2, "efficiency.gemm", "gemm", fmt::format("{:.9g}", hw.efficiency.gemm));
  e.line(2, "efficiency.memory_bandwidth", "memory_bandwidth", fmt::format("{:.9g}", hw.efficiency.memory_bandwidth));
  e.line(2, "efficiency.p2p", "p2p", fmt::format("{:.9g}", hw.efficiency.p2p));
  e.line(2, "efficiency.pcie", "pcie", fmt::format("{:.9g}", hw.efficiency.pcie));
  e.line(2, "efficiency.nic", "nic", fmt::format("{:.9g}", hw.efficiency.nic));
  e.line(2, "efficiency.nccl_latency", "nccl_latency", fmt::format("{:.9g}", hw.efficiency.nccl_latency));
  return e.text();
}

CalibrationResult calibrate_from_figures(const sim::HardwareSpec& base, const Figures& m, const Figures& p,
                                         const std::string& device, const std::string& date) {
  CalibrationResult r;
  r.spec = base;
  auto ratios = [](const std::vector<double>& measured, const std::vector<double>& predicted) {
    std::vector<double> out;
    for (size_t i = 0; i < measured.size() && i < predicted.size(); ++i)
      if (predicted[i] > 0) out.push_back(measured[i] / predicted[i]);
    return out;
  };
  auto mark = [&](const std::string& key, const std::string& figure) {
    r.comments[key] = fmt::format("measured {} on {} by dptwin verify: {}", date, device, figure);
  };
  const auto gemm = ratios(m.gemm_flops_per_s, p.gemm_flops_per_s);
  if (!gemm.empty()) {
    r.spec.efficiency.gemm = std::min(1.0, base.efficiency.gemm * mean(gemm));
    mark("efficiency.gemm", fmt::format("GEMM {:.4g} TFLOP/s (mean of {} devices)", mean(m.gemm_flops_per_s) / 1e12,
                                        m.gemm_flops_per_s.size()));
  }
  const auto mem = ratios(m.memory_Bps, p.memory_Bps);
  if (!mem.empty()) {
    r.spec.efficiency.memory_bandwidth = std::min(1.0, base.efficiency.memory_bandwidth * mean(mem));
    mark("efficiency.memory_bandwidth",
         fmt::format("copy kernel {:.4g} GB/s read+write (mean of {} devices)", mean(m.memory_Bps) / 1e9,
                     m.memory_Bps.size()));
  }
  std::vector<double> peer_ratio, peer_measured;
  for (const auto& mp : m.peers)
    for (const auto& pp : p.peers)
      if (mp.src == pp.src && mp.dst == pp.dst && pp.bandwidth_Bps > 0) {
        peer_ratio.push_back(mp.bandwidth_Bps / pp.bandwidth_Bps);
        peer_measured.push_back(mp.bandwidth_Bps);
      }
  if (!peer_ratio.empty()) {
    const bool nvlink = base.nvlink.has_value() || base.nvswitch.has_value();
    const std::string key = nvlink ? "efficiency.p2p" : "efficiency.pcie";
    double& field = nvlink ? r.spec.efficiency.p2p : r.spec.efficiency.pcie;
    field = std::min(1.0, field * mean(peer_ratio));
    mark(key, fmt::format("peer copies {:.4g} GB/s (mean of {} pairs)", mean(peer_measured) / 1e9,
                          peer_measured.size()));
  }
  sim::validate_hardware(r.spec);
  r.yaml = hardware_yaml(r.spec, r.comments,
                         fmt::format("{} calibrated by `dptwin verify --calibrate-out` on {} ({}).\n"
                                     "Fields marked `measured` come from that run; the others are {}'s.",
                                     base.name, device, date,
                                     base.source_file.empty() ? base.name : base.source_file));
  return r;
}

}  // namespace dpt::verify
