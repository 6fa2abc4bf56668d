#include "scenarios/measure/calibrate_bench.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "scenarios/measure/calibrate_nccl.hpp"

namespace dpt {
namespace {

std::string device_label(const DeviceBenchResult& b, int index) {
  return index >= 0 && index < static_cast<int>(b.device_names.size()) ? b.device_names[static_cast<size_t>(index)]
                                                                      : fmt::format("device {}", index);
}

CalibratedField make_field(const std::string& field, double before, double ratio, const std::string& source) {
  // The loader accepts efficiencies in [0.001, 1]; far below means the file is not this machine.
  if (ratio < 0.001)
    throw std::invalid_argument(fmt::format("efficiency.{}: measured {:.3g} of the datasheet rate ({}); is the hardware "
                                            "file the machine that was measured?",
                                            field, ratio, source));
  CalibratedField f;
  f.field = field;
  f.before = before;
  f.capped = ratio > 1.0;
  f.after = std::min(1.0, ratio);
  f.source = source;
  return f;
}

// The base text without its top-level `efficiency:` block (the key and its indented lines).
std::string without_efficiency_block(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  bool skipping = false;
  while (std::getline(in, line)) {
    const bool top_level = !line.empty() && line[0] != ' ' && line[0] != '\t' && line[0] != '#';
    if (top_level) skipping = line.rfind("efficiency:", 0) == 0;
    if (!skipping) out += line + "\n";
  }
  return out;
}

// The measured `efficiency:` block: each field with the figure it came from, or marked
// as the base file's where the bench measured nothing for it.
std::string efficiency_block(const sim::EfficiencySpec& e, const std::vector<CalibratedField>& fields,
                             const DeviceBenchResult& bench) {
  std::string block = fmt::format("efficiency:  # measured by `dptwin bench --backend {}` on {} ({}); devices: {}\n",
                                  bench.backend, bench.hostname, bench.date, fmt::join(bench.device_names, ", "));
  auto line = [&](const char* key, double v) {
    const auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.field == key; });
    if (it == fields.end()) {
      block += fmt::format("  {}: {}  # from the base file (not measured)\n", key, v);
    } else {
      block += fmt::format("  {}: {:.6g}  # measured: {}{}\n", key, v, it->source,
                           it->capped ? " (capped at 1: faster than the datasheet)" : "");
    }
  };
  line("gemm", e.gemm);
  line("memory_bandwidth", e.memory_bandwidth);
  line("p2p", e.p2p);
  line("pcie", e.pcie);
  line("nic", e.nic);
  if (e.nccl_latency != 1.0) block += fmt::format("  nccl_latency: {:.6g}  # from the base file\n", e.nccl_latency);
  return block;
}

}  // namespace

BenchCalibration calibrate_from_bench(const sim::HardwareSpec& base, const std::string& base_yaml,
                                      const DeviceBenchResult& bench, const std::string& where) {
  if (static_cast<int>(bench.device_names.size()) > base.gpu_count())
    throw std::invalid_argument(fmt::format("{}: {} devices measured, but {} has {} GPUs", where,
                                            bench.device_names.size(), base.name, base.gpu_count()));
  require_same_gpus(base, bench.device_names, where);
  const std::string when = bench.date.substr(0, 10);
  BenchCalibration out;
  out.spec = base;
  sim::EfficiencySpec& e = out.spec.efficiency;

  // GEMM: the best f32 figure (tf32 is another peak and another field of the datasheet).
  const GemmFigure* best_gemm = nullptr;
  for (const auto& g : bench.gemm)
    if (g.dtype == "f32" && (!best_gemm || g.flops_per_s > best_gemm->flops_per_s)) best_gemm = &g;
  if (best_gemm && base.gpu.peak_flops.f32 > 0) {
    out.fields.push_back(make_field(
        "gemm", e.gemm, best_gemm->flops_per_s / base.gpu.peak_flops.f32,
        fmt::format("f32 GEMM {}^3 {:.4g} TFLOP/s of {:.4g} peak on {}, {}", best_gemm->m, best_gemm->flops_per_s / 1e12,
                    base.gpu.peak_flops.f32 / 1e12, device_label(bench, best_gemm->device), when)));
    e.gemm = out.fields.back().after;
  }
  // Memory: the best on-device copy.
  const BandwidthFigure* best_mem = nullptr;
  double h2d_sum = 0, peer_sum = 0, peer_link_sum = 0;
  int h2d_n = 0, peer_n = 0;
  for (const auto& b : bench.bandwidth) {
    if (b.kind == "memory" && (!best_mem || b.bytes_per_s > best_mem->bytes_per_s)) best_mem = &b;
    if (b.kind == "h2d" || b.kind == "d2h") {
      h2d_sum += b.bytes_per_s;
      ++h2d_n;
    }
    if (b.kind == "peer") {
      // Only pairs with a direct NVLink or an NVSwitch port calibrate p2p.
      double link = 0;
      if (base.nvswitch) link = base.nvswitch->links_per_gpu * base.nvswitch->link_bandwidth;
      else if (base.nvlink) link = base.nvlink->links_between(b.src, b.dst) * base.nvlink->link_bandwidth;
      if (link > 0) {
        peer_sum += b.bytes_per_s / link;
        peer_link_sum += b.bytes_per_s;
        ++peer_n;
      }
    }
  }
  if (best_mem && base.gpu.memory_bandwidth > 0) {
    out.fields.push_back(make_field(
        "memory_bandwidth", e.memory_bandwidth, best_mem->bytes_per_s / base.gpu.memory_bandwidth,
        fmt::format("on-device copy of {} B: {:.4g} GB/s read + written of {:.4g} GB/s on {}, {}", best_mem->bytes,
                    best_mem->bytes_per_s / 1e9, base.gpu.memory_bandwidth / 1e9, device_label(bench, best_mem->src),
                    when)));
    e.memory_bandwidth = out.fields.back().after;
  }
  const double pcie_raw = sim::pcie_lane_bandwidth(base.pcie.generation) * base.pcie.lanes;
  if (h2d_n > 0 && pcie_raw > 0 && bench.backend != "host") {
    const double mean = h2d_sum / h2d_n;
    out.fields.push_back(make_field("pcie", e.pcie, mean / pcie_raw,
                                    fmt::format("pinned host<->device copies: mean {:.4g} GB/s of PCIe Gen{} x{} "
                                                "{:.4g} GB/s over {} copies, {}",
                                                mean / 1e9, base.pcie.generation, base.pcie.lanes, pcie_raw / 1e9,
                                                h2d_n, when)));
    e.pcie = out.fields.back().after;
  }
  if (peer_n > 0) {
    out.fields.push_back(make_field("p2p", e.p2p, peer_sum / peer_n,
                                    fmt::format("peer copies over NVLink: mean {:.4g} GB/s over {} pairs, {}",
                                                peer_link_sum / peer_n / 1e9, peer_n, when)));
    e.p2p = out.fields.back().after;
  }
  if (out.fields.empty())
    throw std::invalid_argument(fmt::format("{}: no GEMM, memory, host-device or NVLink peer figure to calibrate from "
                                            "(was it run with --no-micro?)",
                                            where));
  sim::validate_hardware(out.spec);

  const std::string block = efficiency_block(out.spec.efficiency, out.fields, bench);
  out.yaml = without_efficiency_block(base_yaml) + block;
  // The emitted file must load as the calibrated spec.
  const sim::HardwareSpec check = sim::parse_hardware_yaml(out.yaml, "calibrated " + base.name);
  if (std::abs(check.efficiency.gemm - e.gemm) > 1e-4 || std::abs(check.efficiency.p2p - e.p2p) > 1e-4)
    throw std::logic_error("calibrate_from_bench: the emitted YAML does not read back as the calibrated spec");
  return out;
}

}  // namespace dpt
