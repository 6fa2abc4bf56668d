#include "sim/net/hardware_yaml.hpp"

#include <cmath>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace dpt::sim {
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

void emit_header(Emitter& e, const std::string& header) {
  if (header.empty()) return;
  size_t pos = 0;
  while (pos <= header.size()) {
    const size_t nl = header.find('\n', pos);
    e.raw("# " + header.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos) + "\n");
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
}

// The op-class block, only where it differs from the reader's defaults (an unset class
// is not written: the reader then applies its default, as for a file that omits it).
void emit_op_efficiency(Emitter& e, const OpEfficiencySpec& o) {
  const OpEfficiencySpec defaults;
  const std::pair<const char*, const std::optional<double>*> fields[] = {
      {"gemm", &o.gemm}, {"conv", &o.conv}, {"attention", &o.attention}, {"norm", &o.norm},
      {"elementwise", &o.elementwise}, {"embedding", &o.embedding}, {"loss", &o.loss}, {"optimizer", &o.optimizer},
      {"sdpa", &o.sdpa}};
  const std::optional<double>* default_fields[] = {&defaults.gemm, &defaults.conv, &defaults.attention,
                                                   &defaults.norm, &defaults.elementwise, &defaults.embedding,
                                                   &defaults.loss, &defaults.optimizer, &defaults.sdpa};
  bool differs = false;
  for (size_t i = 0; i < std::size(fields); ++i)
    differs = differs || *fields[i].second != *default_fields[i] || !o.by_type[i].empty();
  if (!differs) return;
  e.line(2, "gpu.op_efficiency", "op_efficiency", "");
  for (size_t i = 0; i < std::size(fields); ++i) {
    const auto& [key, value] = fields[i];
    const std::string path = std::string("gpu.op_efficiency.") + key;
    if (!o.by_type[i].empty()) {  // per compute type (a class has a map or a fraction, not both)
      e.line(4, path, key, "");
      for (const auto& [type, fraction] : o.by_type[i])
        e.line(6, path + "." + compute_type_name(type), compute_type_name(type), fmt::format("{:.9g}", fraction));
    } else if (*value) {
      e.line(4, path, key, fmt::format("{:.9g}", **value));
    }
  }
}

void emit_gpu(Emitter& e, const GpuSpec& g) {
  e.line(0, "gpu", "gpu", "");
  e.line(2, "gpu.name", "name", quoted(g.name));
  e.line(2, "gpu.peak_flops", "peak_flops", "");
  e.line(4, "gpu.peak_flops.f64", "f64", flops(g.peak_flops.f64));
  e.line(4, "gpu.peak_flops.f32", "f32", flops(g.peak_flops.f32));
  if (g.peak_flops.tf32) e.line(4, "gpu.peak_flops.tf32", "tf32", flops(*g.peak_flops.tf32));
  if (g.peak_flops.bf16) e.line(4, "gpu.peak_flops.bf16", "bf16", flops(*g.peak_flops.bf16));
  if (g.peak_flops.f16) e.line(4, "gpu.peak_flops.f16", "f16", flops(*g.peak_flops.f16));
  e.line(2, "gpu.memory", "memory", fmt::format("{} B", g.memory_bytes));
  e.line(2, "gpu.memory_bandwidth", "memory_bandwidth", bandwidth(g.memory_bandwidth));
  e.line(2, "gpu.kernel_launch_latency", "kernel_launch_latency", time_us(g.kernel_launch_latency_s));
  if (g.sm_count) e.line(2, "gpu.sm_count", "sm_count", std::to_string(*g.sm_count));
  if (g.compute_capability)
    e.line(2, "gpu.compute_capability", "compute_capability",
           fmt::format("{}.{}", *g.compute_capability / 10, *g.compute_capability % 10));
  emit_op_efficiency(e, g.op_efficiency);
}

std::string int_list(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

void emit_pcie(Emitter& e, const PcieSpec& p) {
  e.line(0, "pcie", "pcie", "");
  e.line(2, "pcie.generation", "generation", std::to_string(p.generation));
  e.line(2, "pcie.lanes", "lanes", std::to_string(p.lanes));
  e.line(2, "pcie.latency", "latency", time_us(p.latency_s));
  e.line(2, "pcie.peer_to_peer", "peer_to_peer", p.peer_to_peer ? "true" : "false");
  if (p.staged_bidirectional)
    e.line(2, "pcie.staged_bidirectional", "staged_bidirectional", bandwidth(*p.staged_bidirectional));
  if (p.staged_unidirectional)
    e.line(2, "pcie.staged_unidirectional", "staged_unidirectional", bandwidth(*p.staged_unidirectional));
  if (p.switches.empty()) return;
  e.line(2, "pcie.switches", "switches", "");
  for (const auto& s : p.switches)
    e.raw(fmt::format("    - {{socket: {}, gpus: {}, nics: {}, uplink_lanes: {}}}\n", s.socket, int_list(s.gpus),
                      int_list(s.nics), s.uplink_lanes));
}

void emit_nvlink(Emitter& e, const HardwareSpec& hw) {
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
    e.line(2, "nvswitch.in_switch_reduction", "in_switch_reduction",
           hw.nvswitch->in_switch_reduction ? "true" : "false");
  }
}

void emit_host(Emitter& e, const HostSpec& h) {
  e.line(0, "host", "host", "");
  e.line(2, "host.cpu", "cpu", quoted(h.cpu));
  e.line(2, "host.sockets", "sockets", std::to_string(h.sockets));
  e.line(2, "host.cores", "cores", std::to_string(h.cores));
  e.line(2, "host.memory_bandwidth", "memory_bandwidth", bandwidth(h.memory_bandwidth));
  // One socket has no inter-socket link: the reader takes the key as optional there and
  // refuses 0, so it is written only where it is set.
  if (h.sockets > 1 || h.inter_socket_bandwidth > 0)
    e.line(2, "host.inter_socket_bandwidth", "inter_socket_bandwidth", bandwidth(h.inter_socket_bandwidth));
  e.line(2, "host.dispatch_cost", "dispatch_cost", time_us(h.dispatch_cost_s));
  e.line(2, "host.gil", "gil", h.gil ? "true" : "false");
}

void emit_network(Emitter& e, const NetworkSpec& n) {
  e.line(0, "network", "network", "");
  e.line(2, "network.nics_per_node", "nics_per_node", std::to_string(n.nics_per_node));
  e.line(2, "network.nic_bandwidth", "nic_bandwidth", bandwidth(n.nic_bandwidth));
  e.line(2, "network.latency", "latency", time_us(n.latency_s));
  if (!n.gpu_direct_rdma) e.line(2, "network.gpu_direct_rdma", "gpu_direct_rdma", "false");
  const bool fat = n.topology == FabricTopology::fat_tree;
  e.line(2, "network.topology", "topology", fat ? "fat_tree" : "single_switch");
  if (!fat) return;
  e.line(2, "network.nodes_per_leaf", "nodes_per_leaf", std::to_string(n.nodes_per_leaf));
  e.line(2, "network.oversubscription", "oversubscription", fmt::format("{:.9g}", n.oversubscription));
  if (n.switch_radix > 0) e.line(2, "network.switch_radix", "switch_radix", std::to_string(n.switch_radix));
  if (n.switch_link_rate) e.line(2, "network.switch_link_rate", "switch_link_rate", bandwidth(*n.switch_link_rate));
  e.line(2, "network.core_oversubscription", "core_oversubscription", fmt::format("{:.9g}", n.core_oversubscription));
}

void emit_efficiency(Emitter& e, const EfficiencySpec& f) {
  e.line(0, "efficiency", "efficiency", "");
  e.line(2, "efficiency.gemm", "gemm", fmt::format("{:.9g}", f.gemm));
  e.line(2, "efficiency.memory_bandwidth", "memory_bandwidth", fmt::format("{:.9g}", f.memory_bandwidth));
  e.line(2, "efficiency.p2p", "p2p", fmt::format("{:.9g}", f.p2p));
  e.line(2, "efficiency.pcie", "pcie", fmt::format("{:.9g}", f.pcie));
  e.line(2, "efficiency.nic", "nic", fmt::format("{:.9g}", f.nic));
  e.line(2, "efficiency.nccl_latency", "nccl_latency", fmt::format("{:.9g}", f.nccl_latency));
  if (std::isfinite(f.ridge_exponent))
    e.line(2, "efficiency.ridge_exponent", "ridge_exponent", fmt::format("{:.9g}", f.ridge_exponent));
}

}  // namespace

std::string hardware_yaml(const HardwareSpec& hw, const YamlComments& comments, const std::string& header) {
  Emitter e(comments);
  emit_header(e, header);
  e.line(0, "name", "name", hw.name);
  if (!hw.description.empty()) e.line(0, "description", "description", quoted(hw.description));
  e.line(0, "nodes", "nodes", std::to_string(hw.nodes));
  e.line(0, "gpus_per_node", "gpus_per_node", std::to_string(hw.gpus_per_node));
  if (hw.nccl_version != "master") e.line(0, "nccl_version", "nccl_version", quoted(hw.nccl_version));
  if (hw.nccl_p2p_disable) e.line(0, "nccl_p2p_disable", "nccl_p2p_disable", "true");
  emit_gpu(e, hw.gpu);
  emit_pcie(e, hw.pcie);
  emit_nvlink(e, hw);
  emit_host(e, hw.host);
  if (hw.network) emit_network(e, *hw.network);
  emit_efficiency(e, hw.efficiency);
  if (hw.gloo) {
    e.line(0, "gloo", "gloo", "");
    e.line(2, "gloo.tcp_bandwidth", "tcp_bandwidth", bandwidth(hw.gloo->tcp_bandwidth));
    e.line(2, "gloo.message_latency", "message_latency", time_us(hw.gloo->message_latency_s));
    e.line(2, "gloo.reduce_bandwidth", "reduce_bandwidth", bandwidth(hw.gloo->reduce_bandwidth));
    if (!hw.gloo->tcp_bandwidth_by_buffer.empty()) {
      e.line(2, "gloo.tcp_bandwidth_by_buffer", "tcp_bandwidth_by_buffer", "");
      for (const auto& p : hw.gloo->tcp_bandwidth_by_buffer)
        e.raw(fmt::format("    - {{buffer: {} B, bandwidth: {}}}\n", p.buffer_bytes, bandwidth(p.bandwidth)));
    }
    if (hw.gloo->core_share > 0) e.line(2, "gloo.core_share", "core_share", fmt::format("{:.9g}", hw.gloo->core_share));
  }
  return e.text();
}

}  // namespace dpt::sim
