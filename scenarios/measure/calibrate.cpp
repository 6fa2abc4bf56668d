#include "scenarios/measure/calibrate.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/net/hardware_yaml.hpp"

namespace dpt::verify {
namespace {

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
    // A file's own GEMM-class figures (op_efficiency gemm, attention and sdpa, per compute
    // type too) take precedence over efficiency.gemm: they scale by the same measured ratio
    // (a GPU's clocks and power limit slow its fused attention kernels as its GEMMs).
    auto& o = r.spec.gpu.op_efficiency;
    for (auto* field : {&o.gemm, &o.attention, &o.sdpa})
      if (*field) **field = std::min(1.0, **field * mean(gemm));
    for (const size_t i : {size_t{0}, size_t{2}, size_t{8}})  // by_type's gemm, attention and sdpa (OpEfficiencySpec order)
      for (auto& [type, fraction] : o.by_type[i]) fraction = std::min(1.0, fraction * mean(gemm));
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
  const std::string what =
      fmt::format("{} calibrated by `dptwin verify --calibrate-out` on {} ({})", base.name, device, date);
  r.yaml = sim::hardware_yaml(r.spec, r.comments, calibration_header(base, what, "measured", "that run"));
  return r;
}

std::string calibration_header(const sim::HardwareSpec& base, const std::string& what, const std::string& marker,
                               const std::string& source) {
  return fmt::format("{}.\nFields marked `{}` come from {}; the others are {}'s.", what, marker, source,
                     base.source_file.empty() ? base.name : base.source_file);
}

}  // namespace dpt::verify
