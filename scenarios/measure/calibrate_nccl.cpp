#include "scenarios/measure/calibrate_nccl.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "scenarios/measure/twin_figures.hpp"

namespace dpt {
namespace {

// The efficiency field that bounds a collective among these ranks (see the header).
double& bounding_field(sim::HardwareSpec& hw, const NcclTestsLog& log, std::string& name) {
  if (log.hosts.size() > 1) {
    name = "efficiency.nic";
    return hw.efficiency.nic;
  }
  if (hw.nvlink || hw.nvswitch) {
    name = "efficiency.p2p";
    return hw.efficiency.p2p;
  }
  name = "efficiency.pcie";
  return hw.efficiency.pcie;
}

}  // namespace

BytesPerSecond twin_busbw(const sim::HardwareSpec& hw, const std::string& collective, int ranks, Bytes size_bytes) {
  verify::MeasureConfig c;
  c.devices = ranks;
  c.collective_sizes = {size_bytes};
  c.repeats = 1;
  verify::MeasureParts parts{false, false, true, false, false, false};
  const verify::Figures f = verify::simulate_figures(hw, verify::Faults{}, c, parts);
  for (const auto& cf : f.collectives)
    if (cf.op == collective) return cf.busbw_Bps;
  throw std::invalid_argument(fmt::format("the twin has no {} figure for {} bytes on {} ranks", collective,
                                          size_bytes, ranks));
}

NcclCalibrationResult calibrate_from_nccl_logs(const sim::HardwareSpec& base, const std::vector<NcclTestsLog>& logs,
                                               const std::string& date) {
  if (logs.empty()) throw std::invalid_argument("calibrate: no nccl-tests log given");
  NcclCalibrationResult out;
  out.spec = base;
  verify::YamlComments comments;
  for (const auto& log : logs) {
    if (log.collective != "all_reduce" && log.collective != "all_gather")
      throw std::invalid_argument(fmt::format(
          "{}: {} logs cannot calibrate the twin here (all_reduce_perf and all_gather_perf can)", log.where,
          log.collective));
    if (log.ranks < 2 || log.ranks > base.gpu_count())
      throw std::invalid_argument(fmt::format("{}: {} ranks, but hardware '{}' has {} GPUs (and a collective needs 2)",
                                              log.where, log.ranks, base.name, base.gpu_count()));
    if (static_cast<int>(log.hosts.size()) > base.nodes)
      throw std::invalid_argument(fmt::format("{}: ranks on {} hosts, but hardware '{}' has {} node(s)", log.where,
                                              log.hosts.size(), base.name, base.nodes));
    // The largest size: a ring is bandwidth-bound there.
    const NcclTestsRow& row = *std::max_element(log.rows.begin(), log.rows.end(), [](auto& a, auto& b) {
      return a.size_bytes < b.size_bytes;
    });
    const NcclTestsTiming& t = log.timing(row);
    if (t.wrong && *t.wrong > 0)
      throw std::invalid_argument(fmt::format("{}:{}: #wrong = {}: the collective gave wrong results, so its "
                                              "bandwidth calibrates nothing",
                                              log.where, row.line, *t.wrong));
    if (t.busbw_Bps <= 0)
      throw std::invalid_argument(fmt::format("{}:{}: busbw 0 at the largest size", log.where, row.line));
    NcclFieldCalibration fc;
    fc.log = log.where;
    fc.collective = log.collective;
    fc.ranks = log.ranks;
    fc.line = row.line;
    fc.size_bytes = row.size_bytes;
    fc.measured_busbw_Bps = t.busbw_Bps;
    double& field = bounding_field(out.spec, log, fc.field);
    fc.before = field;
    fc.predicted_before_Bps = twin_busbw(out.spec, log.collective, log.ranks, row.size_bytes);
    BytesPerSecond predicted = fc.predicted_before_Bps;
    // Bandwidth-bound, busbw is proportional to the field; latency makes it slightly
    // less than proportional, so a few fixed-point steps close the gap.
    for (int iter = 0; iter < 4 && std::abs(predicted / t.busbw_Bps - 1.0) > 0.01; ++iter) {
      const double next = field * t.busbw_Bps / predicted;
      if (next >= 1.0) {
        if (field >= 1.0) {
          fc.capped = true;
          break;
        }
        field = 1.0;
      } else {
        field = next;
      }
      sim::validate_hardware(out.spec);
      predicted = twin_busbw(out.spec, log.collective, log.ranks, row.size_bytes);
    }
    fc.after = field;
    fc.predicted_after_Bps = predicted;
    comments[fc.field] = fmt::format(
        "calibrated {} from {} line {} ({} on {} ranks, {} B: busbw {:.4g} GB/s; was {:.4g}){}", date, log.where,
        row.line, log.collective, log.ranks, row.size_bytes, t.busbw_Bps / 1e9, fc.before,
        fc.capped ? "; capped at 1: the log is faster than the file's link rates" : "");
    out.fields.push_back(fc);
  }
  out.yaml = verify::hardware_yaml(out.spec, comments,
                                   fmt::format("{} calibrated from nccl-tests logs by `dptwin calibrate --from` ({}).\n"
                                               "Fields marked `calibrated` come from the logs; the others are {}'s.",
                                               base.name, date,
                                               base.source_file.empty() ? base.name : base.source_file));
  return out;
}

}  // namespace dpt
