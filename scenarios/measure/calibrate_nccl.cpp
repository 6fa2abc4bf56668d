#include "scenarios/measure/calibrate_nccl.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "scenarios/measure/twin_figures.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/twin/sim_process.hpp"

namespace dpt {
namespace {

// Whether the log's ranks, GPUs 0 .. ranks-1 of one node, include a pair that NCCL
// connects through host memory (SHM) rather than P2P.
bool ranks_use_shm(const sim::HardwareSpec& hw, int ranks) {
  for (int a = 0; a < ranks; ++a)
    for (int b = a + 1; b < ranks; ++b)
      if (!sim::nccl_p2p_within_node(hw, a, b, ranks)) return true;
  return false;
}

// The field that bounds a collective among these ranks (see the header), and the most it
// may be: 1 for an efficiency; for the host-staged rate, the GPU link's raw rate.
double& bounding_field(sim::HardwareSpec& hw, const NcclTestsLog& log, std::string& name, double& most) {
  most = 1.0;
  if (log.hosts.size() > 1) {
    name = "efficiency.nic";
    return hw.efficiency.nic;
  }
  if (ranks_use_shm(hw, log.ranks)) {
    name = "pcie.staged_bidirectional";
    most = sim::pcie_lane_bandwidth(hw.pcie.generation) * hw.pcie.lanes;
    hw.pcie.staged_bidirectional = std::min(most, sim::staged_bidirectional_rate(hw));
    return *hw.pcie.staged_bidirectional;
  }
  if (hw.nvlink || hw.nvswitch) {
    name = "efficiency.p2p";
    return hw.efficiency.p2p;
  }
  name = "efficiency.pcie";
  return hw.efficiency.pcie;
}

}  // namespace

namespace {
// The twin's time for the log's collective at one size, as `bench --backend sim` times
// it: the collective alone on the first ranks' GPUs (nccl-tests times the collective
// without a framework's per-op dispatch, which the step-level figures include).
Seconds twin_time(const sim::HardwareSpec& hw, const NcclTestsLog& log, Bytes size) {
  return twin_collective_time(hw, log.collective, log.ranks, size);
}
}  // namespace

Seconds twin_collective_time(const sim::HardwareSpec& hw, const std::string& collective, int ranks, Bytes size) {
  const int n = ranks;
  if (collective != "all_reduce" && collective != "all_gather")
    throw std::invalid_argument(fmt::format("twin_collective_time: {} (allowed: all_reduce, all_gather)", collective));
  const CollectiveOp op = collective == "all_reduce" ? CollectiveOp::all_reduce : CollectiveOp::all_gather;
  const CollectiveCall call{op, std::max<Elements>(n, size / 4 / n * n), 4, 0};
  std::vector<int> gpus(n);
  for (int i = 0; i < n; ++i) gpus[i] = i;
  std::shared_ptr<sim::CollectiveGroup> group;
  const std::string out = sim::run_simulation(
      hw,
      [&](sim::Platform& p) {
        group = std::make_shared<sim::CollectiveGroup>(p, gpus);
        for (int r = 0; r < n; ++r)
          simgrid::s4u::Actor::create(fmt::format("rank{}", r), p.gpu_host(r), [group, r, call]() { group->run(r, call); });
      },
      [&](sim::Platform&) {
        const auto& rec = group->records().at(0);
        return fmt::format("{:.17g}", rec.end_s - rec.start_s);
      });
  return std::stod(out);
}

namespace {

// The latency regime: the log's smallest size with a float per rank (up to 64 KiB, where NCCL runs LL and the
// time is its latency term), fitted by scaling efficiency.nccl_latency: the time there is
// about proportional to the scale; a few fixed-point steps close the gap. The time
// column is used (nccl-tests rounds busbw to 0.00 at the smallest sizes).
void fit_latency(sim::HardwareSpec& hw, const NcclTestsLog& log, const std::string& date,
                 sim::YamlComments& comments, std::vector<NcclFieldCalibration>& fields) {
  const NcclTestsRow* small = nullptr;
  // The twin's figure needs at least one 4-byte element per rank.
  for (const auto& row : log.rows)
    if (row.size_bytes >= 4 * log.ranks && (!small || row.size_bytes < small->size_bytes)) small = &row;
  if (!small || small->size_bytes > 64 * kKiB) return;
  const NcclTestsTiming& t = log.timing(*small);
  if (t.time_s <= 0 || (t.wrong && *t.wrong > 0)) return;
  NcclFieldCalibration fc;
  fc.log = log.where;
  fc.collective = log.collective;
  fc.ranks = log.ranks;
  fc.line = small->line;
  fc.size_bytes = small->size_bytes;
  const double n = log.ranks;
  const double factor = log.collective == "all_reduce" ? 2 * (n - 1) / n : (n - 1) / n;
  fc.measured_busbw_Bps = static_cast<double>(small->size_bytes) * factor / t.time_s;
  fc.field = "efficiency.nccl_latency";
  double& field = hw.efficiency.nccl_latency;
  fc.before = field;
  Seconds predicted = twin_time(hw, log, small->size_bytes);
  fc.predicted_before_Bps = static_cast<double>(small->size_bytes) * factor / predicted;
  for (int iter = 0; iter < 4 && std::abs(predicted / t.time_s - 1.0) > 0.01; ++iter) {
    const double next = std::clamp(field * t.time_s / predicted, 0.1, 10.0);
    fc.capped = next == 0.1 || next == 10.0;
    field = next;
    sim::validate_hardware(hw);
    predicted = twin_time(hw, log, small->size_bytes);
    if (fc.capped) break;
  }
  fc.after = field;
  fc.predicted_after_Bps = static_cast<double>(small->size_bytes) * factor / predicted;
  comments[fc.field] = fmt::format("calibrated {} from {} line {} ({} on {} ranks, {} B: time {:.4g} us; was {:.4g}){}",
                                   date, log.where, small->line, log.collective, log.ranks, small->size_bytes,
                                   t.time_s * 1e6, fc.before, fc.capped ? "; at its bound (0.1 .. 10)" : "");
  fields.push_back(fc);
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
  sim::YamlComments comments;
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
    double most = 1.0;
    const bool staged_unset = !out.spec.pcie.staged_bidirectional;
    double& field = bounding_field(out.spec, log, fc.field, most);
    fc.before = field;
    fc.predicted_before_Bps = twin_busbw(out.spec, log.collective, log.ranks, row.size_bytes);
    BytesPerSecond predicted = fc.predicted_before_Bps;
    // Bandwidth-bound, busbw is proportional to the field; latency makes it slightly
    // less than proportional, so a few fixed-point steps close the gap.
    for (int iter = 0; iter < 4 && std::abs(predicted / t.busbw_Bps - 1.0) > 0.01; ++iter) {
      const double next = field * t.busbw_Bps / predicted;
      if (next >= most) {
        if (field >= most) {
          fc.capped = true;
          break;
        }
        field = most;
      } else {
        field = next;
      }
      sim::validate_hardware(out.spec);
      predicted = twin_busbw(out.spec, log.collective, log.ranks, row.size_bytes);
    }
    fc.after = field;
    fc.predicted_after_Bps = predicted;
    const bool rate = fc.field == "pcie.staged_bidirectional";
    comments[fc.field] = fmt::format(
        "calibrated {} from {} line {} ({} on {} ranks{}, {} B: busbw {:.4g} GB/s; was {:.4g}{}){}", date,
        log.where, row.line, log.collective, log.ranks, rate ? " over SHM" : "", row.size_bytes, t.busbw_Bps / 1e9,
        rate ? fc.before / 1e9 : fc.before,
        !rate ? "" : staged_unset ? " GB/s: unset, 0.41 of the link's raw rate" : " GB/s",
        !fc.capped ? ""
        : rate     ? "; capped at the link's raw rate: the log is faster than the file's links"
                   : "; capped at 1: the log is faster than the file's link rates");
    out.fields.push_back(fc);
    fit_latency(out.spec, log, date, comments, out.fields);
  }
  out.yaml = sim::hardware_yaml(
      out.spec, comments,
      verify::calibration_header(
          base, fmt::format("{} calibrated from nccl-tests logs by `dptwin calibrate --from` ({})", base.name, date),
          "calibrated", "the logs"));
  return out;
}

}  // namespace dpt
