#include "scenarios/verify/verify_performance.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

namespace dpt::verify {
namespace {

// A figure as measured and predicted, with what it is and how to read it.
struct Figure {
  std::string name;       // the check name
  std::string what;       // "GEMM rate of gpu1"
  std::string unit;       // printed unit
  double unit_scale = 1;  // value / unit_scale is printed
  double measured = 0, predicted = 0;
  bool is_time = false;   // times: speed ratio = predicted / measured
  Tolerance tolerance;

  double ratio() const {
    if (is_time) return measured > 0 ? predicted / measured : 0;
    return predicted > 0 ? measured / predicted : 0;
  }
  std::string values() const {
    return fmt::format("measured {:.4g} {}, predicted {:.4g} {}", measured / unit_scale, unit, predicted / unit_scale,
                       unit);
  }
  std::string summary() const {
    return fmt::format("{:.2f} of predicted ({}; tolerance {:.2f}-{:.2f})", ratio(), values(), tolerance.low,
                       tolerance.high);
  }
};

std::string percent(double ratio) { return fmt::format("{:.0f} %", 100.0 * ratio); }

// What the figures say about devices and links, computed once for every message.
struct Findings {
  std::map<int, double> slow_gemm;     // device -> ratio
  std::map<int, double> slow_memory;   // device -> ratio
  std::map<std::pair<int, int>, double> slow_pairs;  // unordered pair (a < b) -> worst ratio
  std::map<int, double> slow_device_links;           // devices whose every peer copy is slow -> mean ratio
  std::map<int, double> stragglers;    // slow single step, kernels at the predicted rate -> ratio
  std::map<int, double> slow_single;   // slow single step whatever the reason
};

Findings analyse(const Figures& m, const Figures& p, const PerformanceTolerances& t, int devices) {
  Findings f;
  for (int i = 0; i < devices; ++i) {
    const auto k = static_cast<size_t>(i);
    if (k < m.gemm_flops_per_s.size() && k < p.gemm_flops_per_s.size() && p.gemm_flops_per_s[k] > 0) {
      const double r = m.gemm_flops_per_s[k] / p.gemm_flops_per_s[k];
      if (r < t.micro.low) f.slow_gemm[i] = r;
    }
    if (k < m.memory_Bps.size() && k < p.memory_Bps.size() && p.memory_Bps[k] > 0) {
      const double r = m.memory_Bps[k] / p.memory_Bps[k];
      if (r < t.micro.low) f.slow_memory[i] = r;
    }
  }
  std::map<std::pair<int, int>, double> pair_ratio;  // ordered pair -> ratio
  for (const auto& mp : m.peers)
    for (const auto& pp : p.peers)
      if (mp.src == pp.src && mp.dst == pp.dst && pp.bandwidth_Bps > 0)
        pair_ratio[{mp.src, mp.dst}] = mp.bandwidth_Bps / pp.bandwidth_Bps;
  for (const auto& [pair, r] : pair_ratio) {
    if (r >= t.micro.low) continue;
    const std::pair<int, int> key{std::min(pair.first, pair.second), std::max(pair.first, pair.second)};
    const auto it = f.slow_pairs.find(key);
    f.slow_pairs[key] = it == f.slow_pairs.end() ? r : std::min(it->second, r);
  }
  // A device whose copies to and from every other device are slow has a bad link of
  // its own (PCIe width/speed, its NVSwitch port); one slow pair is that pair's link.
  if (devices >= 3) {
    for (int d = 0; d < devices; ++d) {
      int slow = 0, total = 0;
      double sum = 0;
      for (int o = 0; o < devices; ++o) {
        if (o == d) continue;
        const std::pair<int, int> key{std::min(d, o), std::max(d, o)};
        ++total;
        if (f.slow_pairs.count(key)) {
          ++slow;
          sum += f.slow_pairs.at(key);
        }
      }
      if (total > 0 && slow == total) f.slow_device_links[d] = sum / slow;
    }
  }
  for (int i = 0; i < devices; ++i) {
    const auto k = static_cast<size_t>(i);
    if (k >= m.single_step_s.size() || k >= p.single_step_s.size() || m.single_step_s[k] <= 0) continue;
    const double r = p.single_step_s[k] / m.single_step_s[k];
    if (r >= t.step.low) continue;
    f.slow_single[i] = r;
    if (!f.slow_gemm.count(i) && !f.slow_memory.count(i)) f.stragglers[i] = r;
  }
  return f;
}

std::string pair_name(int a, int b) { return device_label(a) + "<->" + device_label(b); }

// The likely causes of a slow training step, from the per-device and per-link findings.
std::string step_causes(const Findings& f, bool uses_peers) {
  std::vector<std::string> causes;
  for (const auto& [d, r] : f.stragglers)
    causes.push_back(fmt::format("{} straggles (its own step at {} of predicted speed)", device_label(d), percent(r)));
  for (const auto& [d, r] : f.slow_gemm)
    causes.push_back(fmt::format("{} computes at {} of the predicted GEMM rate", device_label(d), percent(r)));
  for (const auto& [d, r] : f.slow_memory)
    causes.push_back(fmt::format("{} memory bandwidth at {}", device_label(d), percent(r)));
  if (uses_peers) {
    for (const auto& [d, r] : f.slow_device_links)
      causes.push_back(fmt::format("{}'s own link at {}", device_label(d), percent(r)));
    for (const auto& [pair, r] : f.slow_pairs)
      if (!f.slow_device_links.count(pair.first) && !f.slow_device_links.count(pair.second))
        causes.push_back(fmt::format("peer link {} at {}", pair_name(pair.first, pair.second), percent(r)));
  }
  if (causes.empty())
    return "no single device or link explains it: check host-side overhead (CPU load, dispatch, data loading) "
           "or recalibrate the hardware file (--calibrate-out)";
  std::string out = "likely cause: ";
  for (size_t i = 0; i < causes.size(); ++i) out += (i ? "; " : "") + causes[i];
  return out;
}

// Set while building the checks of a run whose timings are not judged.
thread_local const std::optional<std::string>* g_not_judged = nullptr;

CheckOutcome judge(const Figure& fig, const std::function<std::string(double)>& cause_low,
                   const std::function<std::string(double)>& cause_high) {
  const double r = fig.ratio();
  if (g_not_judged && *g_not_judged) return {CheckStatus::skipped, fig.summary(), **g_not_judged};
  if (fig.tolerance.accepts(r)) return CheckOutcome::pass(fig.summary());
  const std::string cause = r < fig.tolerance.low ? cause_low(r) : cause_high(r);
  return CheckOutcome::fail(fig.summary(), fmt::format("{} at {} of the prediction ({}): {}", fig.what, percent(r),
                                                       fig.values(), cause));
}

std::string faster_than_file(double) {
  return "faster than the hardware file predicts: its rates or efficiency fields are too low; recalibrate "
         "(dptwin verify --calibrate-out FILE)";
}

Check fixed(std::string name, CheckOutcome outcome) {
  return {std::move(name), CheckKind::performance, [outcome] { return outcome; }};
}

}  // namespace

std::string size_label(Bytes bytes) {
  if (bytes >= kGiB && bytes % kGiB == 0) return fmt::format("{}GiB", bytes / kGiB);
  if (bytes >= kMiB && bytes % kMiB == 0) return fmt::format("{}MiB", bytes / kMiB);
  if (bytes >= kKiB && bytes % kKiB == 0) return fmt::format("{}KiB", bytes / kKiB);
  return fmt::format("{}B", bytes);
}

PerformanceTolerances default_tolerances(const std::string& backend_name) {
  if (backend_name == "cuda") return {{0.8, 1.25}, {0.7, 1.0 / 0.7}, {0.5, 2.0}};
  if (backend_name == "sim") return {{0.95, 1.05}, {0.95, 1.05}, {0.95, 1.05}};
  return {{0.05, 20.0}, {0.05, 20.0}, {0.05, 20.0}};
}

namespace {

// Why a micro figure is not judged when the host twin was calibrated from it.
const char* const kCalibrated = "the host twin's rates were calibrated from this very figure (no --hardware), "
                                "so it cannot disagree; pass --hardware FILE to check it against a file";

// The per-device GEMM and memory figures (skipped where the host twin was calibrated
// from them).
void micro_checks(const Figures& m, const Figures& p, const PerformanceTolerances& t, const PerformanceContext& ctx,
                  int devices, std::vector<Check>& checks) {
  for (int i = 0; i < devices; ++i) {
    const auto k = static_cast<size_t>(i);
    const std::string dev = device_label(i);
    if (k < m.gemm_flops_per_s.size() && k < p.gemm_flops_per_s.size()) {
      const Figure fig{"performance.gemm." + dev, "GEMM rate of " + dev, "TFLOP/s", 1e12,
                       m.gemm_flops_per_s[k], p.gemm_flops_per_s[k], false, t.micro};
      checks.push_back(fixed(fig.name, ctx.micro_calibrated_from_measurement
                                           ? CheckOutcome::skip(kCalibrated)
                                           : judge(fig,
                                                   [&](double) {
                                                     return fmt::format(
                                                         "a slowed GPU: check clocks, power cap and thermal "
                                                         "throttling (nvidia-smi -q -d PERFORMANCE,CLOCK) and other "
                                                         "processes on {}",
                                                         dev);
                                                   },
                                                   faster_than_file)));
    }
    if (k < m.memory_Bps.size() && k < p.memory_Bps.size()) {
      const Figure fig{"performance.memory_bandwidth." + dev, "memory bandwidth of " + dev, "GB/s", 1e9,
                       m.memory_Bps[k], p.memory_Bps[k], false, t.micro};
      checks.push_back(fixed(fig.name, ctx.micro_calibrated_from_measurement
                                           ? CheckOutcome::skip(kCalibrated)
                                           : judge(fig,
                                                   [&](double) {
                                                     return "check memory clocks and ECC / row-remapping state "
                                                            "(nvidia-smi -q -d CLOCK,ECC,ROW_REMAPPER)";
                                                   },
                                                   faster_than_file)));
    }
  }
}

// Every measured ordered pair's peer copy; a slow pair is blamed on a device whose
// every link is slow.
void peer_checks(const Figures& m, const Figures& p, const PerformanceTolerances& t, const PerformanceContext& ctx,
                 const Findings& f, std::vector<Check>& checks) {
  for (const auto& mp : m.peers) {
    for (const auto& pp : p.peers) {
      if (mp.src != pp.src || mp.dst != pp.dst) continue;
      const std::string name =
          fmt::format("performance.peer_bandwidth.{}->{}", device_label(mp.src), device_label(mp.dst));
      const Figure fig{name, fmt::format("peer copy {} -> {}", device_label(mp.src), device_label(mp.dst)), "GB/s",
                       1e9, mp.bandwidth_Bps, pp.bandwidth_Bps, false, t.micro};
      if (ctx.micro_calibrated_from_measurement) {
        checks.push_back(fixed(name, CheckOutcome::skip(kCalibrated)));
        continue;
      }
      const int a = mp.src, b = mp.dst;
      checks.push_back(fixed(name, judge(fig,
                                         [&](double r) {
                                           for (const int d : {a, b})
                                             if (f.slow_device_links.count(d))
                                               return fmt::format(
                                                   "every peer copy to and from {} is slow (about {}): {}'s own "
                                                   "link is degraded: check its PCIe link width and speed "
                                                   "(lspci -vv: LnkSta) or its NVLink/NVSwitch links "
                                                   "(nvidia-smi nvlink -s -i {})",
                                                   device_label(d), percent(f.slow_device_links.at(d)),
                                                   device_label(d), d);
                                           return fmt::format("peer link {} at {} of hardware file: check "
                                                              "P2P/ACS/NVLink status (nvidia-smi topo -m, "
                                                              "nvidia-smi nvlink -s, ACS on PCIe switches)",
                                                              pair_name(a, b), percent(r));
                                         },
                                         faster_than_file)));
    }
  }
}

// Collective bus bandwidths, explained by the slow links found, or by NCCL's path.
void collective_checks(const Figures& m, const Figures& p, const PerformanceTolerances& t, const Findings& f,
                       std::vector<Check>& checks) {
  for (const auto& mc : m.collectives) {
    for (const auto& pc : p.collectives) {
      if (mc.op != pc.op || mc.size_bytes != pc.size_bytes) continue;
      const std::string name = fmt::format("performance.{}.busbw.{}", mc.op, size_label(mc.size_bytes));
      const Figure fig{name, fmt::format("{} bus bandwidth at {}", mc.op, size_label(mc.size_bytes)), "GB/s", 1e9,
                       mc.busbw_Bps, pc.busbw_Bps, false, t.collective};
      checks.push_back(fixed(name, judge(fig,
                                         [&](double) {
                                           std::vector<std::string> links;
                                           for (const auto& [d, r] : f.slow_device_links)
                                             links.push_back(fmt::format("{}'s own link at {}", device_label(d),
                                                                         percent(r)));
                                           for (const auto& [pair, r] : f.slow_pairs)
                                             if (!f.slow_device_links.count(pair.first) &&
                                                 !f.slow_device_links.count(pair.second))
                                               links.push_back(fmt::format("peer link {} at {}",
                                                                           pair_name(pair.first, pair.second),
                                                                           percent(r)));
                                           if (!links.empty()) {
                                             std::string s = "a ring runs at the pace of its slowest link: "
                                                             "consistent with ";
                                             for (size_t i = 0; i < links.size(); ++i) s += (i ? "; " : "") + links[i];
                                             return s;
                                           }
                                           return std::string(
                                               "the peer links are healthy, so NCCL fell back to a slow path: check "
                                               "NCCL_DEBUG=INFO for the transport (P2P vs SHM or NET/Socket), "
                                               "NCCL_P2P_DISABLE / NCCL_P2P_LEVEL, ACS and the IOMMU");
                                         },
                                         faster_than_file)));
    }
  }
}

// Training steps: each device alone, then DataParallel and DDP over all of them.
void step_checks(const Figures& m, const Figures& p, const PerformanceTolerances& t, const Findings& f, int devices,
                 std::vector<Check>& checks) {
  for (int i = 0; i < devices; ++i) {
    const auto k = static_cast<size_t>(i);
    if (k >= m.single_step_s.size() || k >= p.single_step_s.size()) continue;
    const std::string dev = device_label(i);
    const Figure fig{"performance.step.single." + dev, "training step on " + dev + " alone", "ms", 1e-3,
                     m.single_step_s[k], p.single_step_s[k], true, t.step};
    checks.push_back(fixed(fig.name, judge(fig,
                                           [&](double) {
                                             if (f.stragglers.count(i))
                                               return fmt::format(
                                                   "{} straggles: its step takes {:.3g} ms longer than predicted "
                                                   "while its kernels run at the predicted rate: check host-side "
                                                   "work for that device (data loading, CPU affinity/NUMA, other "
                                                   "processes)",
                                                   dev, (m.single_step_s[k] - p.single_step_s[k]) * 1e3);
                                             return fmt::format("consistent with {}'s slow kernels ({})", dev,
                                                                f.slow_gemm.count(i) ? "GEMM" : "memory");
                                           },
                                           faster_than_file)));
  }
  for (const auto& [label, ms, ps] : {std::tuple{"dp", m.dp_step_s, p.dp_step_s},
                                      std::tuple{"ddp", m.ddp_step_s, p.ddp_step_s}}) {
    if (ms <= 0 || ps <= 0) continue;
    const std::string what = std::string(label) == "dp" ? "DataParallel step" : "DDP step";
    const Figure fig{std::string("performance.step.") + label, what, "ms", 1e-3, ms, ps, true, t.step};
    checks.push_back(fixed(fig.name, judge(fig, [&](double) { return step_causes(f, true); }, faster_than_file)));
  }
}

}  // namespace

std::vector<Check> performance_checks(const Figures& m, const Figures& p, const PerformanceTolerances& t,
                                      const PerformanceContext& ctx) {
  g_not_judged = &ctx.not_judged_because;
  struct Reset {
    ~Reset() { g_not_judged = nullptr; }
  } reset;
  const int devices = static_cast<int>(std::min(m.device_names.size(), p.device_names.size()));
  const Findings f = analyse(m, p, t, devices);
  std::vector<Check> checks;

  micro_checks(m, p, t, ctx, devices, checks);
  if (devices < 2) {
    checks.push_back(fixed("performance.peer_bandwidth", CheckOutcome::skip("one device: no peer copies")));
    checks.push_back(fixed("performance.collectives", CheckOutcome::skip("one device: no collectives")));
  }
  peer_checks(m, p, t, ctx, f, checks);
  collective_checks(m, p, t, f, checks);
  step_checks(m, p, t, f, devices, checks);
  return checks;
}

}  // namespace dpt::verify
