#include "scenarios/measure/calibrate_nccl.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "engine/core/gpu_names.hpp"
#include "scenarios/measure/bench_sim.hpp"
#include "scenarios/measure/twin_figures.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/collectives/nccl_model.hpp"
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

// The fits' tolerance: the calibrated twin reproduces the log's figure within 1 %, in log
// space (|log(twin / measured)| <= log 1.01), in at most kFitSteps twin runs after the bounds.
const double kFitTolerance = std::log1p(0.01);
// The bandwidth fit's size: the twin's latency under this share of its time there.
constexpr double kMaxLatencyShare = 0.10;
// A bandwidth fit's size: the twin's bus bandwidth there at least this share of its plateau.
constexpr double kMinPlateauShare = 0.90;
// How far a log may beat the twin at a field's most (efficiency 1, the link's raw rate) and still
// be capped there rather than refused: a few per cent is a datasheet's rounding; 25 % more is
// another machine.
constexpr double kMaxBeyondReach = 1.25;
constexpr int kFitSteps = 40;

struct FieldFit {
  bool reached = false;  // |h| <= kFitTolerance at the field's final value
  bool moves = true;     // the field's bound moves the twin by more than the tolerance
  double h = 0;          // h at the field's final value
};

// Sets `field` in [lo, hi] so that h() = log(twin / measured), non-decreasing in the field,
// is 0 within kFitTolerance: bisection on log(field) in the bracket between the start value
// and the bound on h's side (the twin's response is piecewise: proportional where the link
// bounds it, flat where something else does, such as NCCL's per-channel bandwidth, so a
// proportional step alone can stall). Where even the bound misses, the field goes no
// further than it changes the twin (within half the tolerance of the bound's h), and stays
// where it was when the bound does not move the twin at all; `reached` is false.
template <typename H>
FieldFit fit_field(double& field, double lo, double hi, H h) {
  const double start = field;
  FieldFit r;
  r.h = h();
  if (std::abs(r.h) <= kFitTolerance) {
    r.reached = true;
    return r;
  }
  const bool up = r.h < 0;
  field = up ? hi : lo;
  const double h_bound = h();
  const bool reachable = up ? h_bound >= -kFitTolerance : h_bound <= kFitTolerance;
  if (!reachable && std::abs(h_bound - r.h) <= kFitTolerance) {
    field = start;
    h();  // leaves any state h() keeps at the start value
    r.moves = false;
    return r;
  }
  const double aim = reachable ? 0.0 : h_bound + (up ? -kFitTolerance : kFitTolerance) / 2;
  const double accept = kFitTolerance / 4;
  double a = up ? start : lo, b = up ? hi : start;  // h(a) < aim < h(b)
  double ha = up ? r.h : h_bound, hb = up ? h_bound : r.h;
  r.h = h_bound;
  for (int step = 0; step < kFitSteps && std::abs(r.h - aim) > accept; ++step) {
    field = std::sqrt(a * b);
    r.h = h();
    (r.h < aim ? a : b) = field;
    (r.h < aim ? ha : hb) = r.h;
  }
  if (std::abs(r.h - aim) > accept) {  // a step in the twin's response between a and b: the nearer side
    field = std::abs(ha - aim) < std::abs(hb - aim) ? a : b;
    r.h = h();
  }
  r.reached = std::abs(r.h) <= kFitTolerance;
  return r;
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

// The twin's worst |log(twin / measured)| over a log's sizes (a float per rank, a time, right
// results), and where: the figure a fit must not make worse.
std::pair<double, Bytes> worst_error(const sim::HardwareSpec& hw, const NcclTestsLog& log) {
  std::pair<double, Bytes> w{0.0, 0};
  for (const auto& row : log.rows) {
    const NcclTestsTiming& rt = log.timing(row);
    if (row.size_bytes < 4 * log.ranks || rt.time_s <= 0 || (rt.wrong && *rt.wrong > 0)) continue;
    const double e = std::abs(std::log(twin_time(hw, log, row.size_bytes) / rt.time_s));
    if (e > w.first) w = {e, row.size_bytes};
  }
  return w;
}

// A field's calibration from one row of a log: which log, collective, ranks, line and size.
NcclFieldCalibration field_from(const NcclTestsLog& log, const NcclTestsRow& row) {
  NcclFieldCalibration fc;
  fc.log = log.where;
  fc.collective = log.collective;
  fc.ranks = log.ranks;
  fc.line = row.line;
  fc.size_bytes = row.size_bytes;
  return fc;
}

// The latency regime: the log's smallest size with a float per rank (up to 64 KiB, where NCCL runs LL and the
// time is its latency term), fitted by scaling efficiency.nccl_latency (fit_field: the twin's
// time there grows with the scale, down to the links' own latencies). The scale moves
// the twin at every size NCCL's latency term reaches, and where the twin's time there is
// not that term (its shape differs from the log's) the fit can make those sizes worse: a
// fit that raises the twin's worst error over the log's sizes is not applied, and says so.
// The time column is used (nccl-tests rounds busbw to 0.00 at the smallest sizes).
void fit_latency(sim::HardwareSpec& hw, const NcclTestsLog& log, const std::string& date,
                 sim::YamlComments& comments, std::vector<NcclFieldCalibration>& fields) {
  const NcclTestsRow* small = nullptr;
  // The twin's figure needs at least one 4-byte element per rank.
  for (const auto& row : log.rows)
    if (row.size_bytes >= 4 * log.ranks && (!small || row.size_bytes < small->size_bytes)) small = &row;
  if (!small || small->size_bytes > 64 * kKiB) return;
  const NcclTestsTiming& t = log.timing(*small);
  if (t.time_s <= 0 || (t.wrong && *t.wrong > 0)) return;
  NcclFieldCalibration fc = field_from(log, *small);
  const double n = log.ranks;
  const double factor = log.collective == "all_reduce" ? 2 * (n - 1) / n : (n - 1) / n;
  fc.measured_busbw_Bps = static_cast<double>(small->size_bytes) * factor / t.time_s;
  fc.field = "efficiency.nccl_latency";
  double& field = hw.efficiency.nccl_latency;
  fc.before = field;
  const auto [was, was_at] = worst_error(hw, log);
  Seconds predicted = twin_time(hw, log, small->size_bytes);
  fc.predicted_before_Bps = static_cast<double>(small->size_bytes) * factor / predicted;
  // The twin's time grows with the scale (NCCL's latency term; the links' own latencies are
  // a floor the scale cannot go below).
  const FieldFit fit = fit_field(field, 0.1, 10.0, [&] {
    sim::validate_hardware(hw);
    predicted = twin_time(hw, log, small->size_bytes);
    return std::log(predicted / t.time_s);
  });
  fc.reached = fit.reached;
  fc.capped = !fit.reached && fit.moves;
  if (!fit.reached)
    fc.bound = !fit.moves ? "efficiency.nccl_latency does not move the twin's time here"
               : fit.h > 0
                   ? fmt::format("the twin takes at least {:.4g} us (nccl_latency {:.4g} and below): the links' own "
                                 "latencies (the hardware file's latency fields) bound it, not NCCL's latency term",
                                 predicted * 1e6, field)
                   : fmt::format("at nccl_latency {:.4g} (its bound) the twin takes {:.4g} us", field,
                                 predicted * 1e6);
  // Faster than the links' own latencies allow by more than a quarter: not this machine.
  if (!fit.reached && fit.h > 0 && predicted > kMaxBeyondReach * t.time_s &&
      !fault_active(Fault::calibrate_trusts_broken_logs))
    throw std::invalid_argument(fmt::format(
        "{}:{}: {} B in {:.4g} us, but the twin takes at least {:.4g} us there (the hardware file's link latencies, "
        "with NCCL's latency term scaled to nothing): the log is faster than hardware '{}' can be; give the hardware "
        "file of the machine it ran on",
        log.where, small->line, small->size_bytes, t.time_s * 1e6, predicted * 1e6, hw.name));
  if (const auto [now, now_at] = worst_error(hw, log); now > was + kFitTolerance) {
    fc.bound = fmt::format("fitting it to {} B ({:.4g} -> {:.4g}) raises the twin's worst |log(twin / measured)| over "
                           "{} from {:.3f} (at {} B) to {:.3f} (at {} B): the twin's time there is not NCCL's "
                           "latency term",
                           small->size_bytes, fc.before, field, log.where, was, was_at, now, now_at);
    field = fc.before;
    sim::validate_hardware(hw);
    fc.after = field;
    fc.fitted = fc.reached = fc.capped = false;
    fields.push_back(fc);
    return;
  }
  fc.after = field;
  fc.predicted_after_Bps = static_cast<double>(small->size_bytes) * factor / predicted;
  // A -g G log: one thread launched each call on its G GPUs, so its small sizes hold those
  // launches, and so does the scale fitted to them; DDP (one process per GPU) then pays them
  // too. Said, not corrected: the twin's bench -g launch charge (G x kernel_launch_latency)
  // is slower than real -g logs' small sizes (the 4-GPU L40S log: 13.05 us at 16 B, the
  // twin's launches alone 16 us), so it cannot be taken out (an outside-user review).
  if (log.gpus_per_thread > 1)
    fc.note = fmt::format("the log ran -g {} (one thread launching each call on {} GPUs): its {} B time holds those "
                          "launches and so does this scale, which DDP predictions (one process per GPU) then pay; a "
                          "log of one GPU per process (mpirun -np {} ... -g 1) measures NCCL's latency alone",
                          log.gpus_per_thread, log.gpus_per_thread, small->size_bytes, log.ranks);
  comments[fc.field] = fmt::format("calibrated {} from {} line {} ({} on {} ranks, {} B: time {:.4g} us; was {:.4g}){}{}",
                                   date, log.where, small->line, log.collective, log.ranks, small->size_bytes,
                                   t.time_s * 1e6, fc.before, fc.reached ? "" : "; cannot reach: " + fc.bound,
                                   log.gpus_per_thread > 1 ? fmt::format("; the log ran -g {}", log.gpus_per_thread) : "");
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

// The hardware file's GPU model: the first token of its GPU name that holds a digit
// ("H100" of "H100-SXM5-80GB", "L40S" of "L40S-48GB", "4090" of "RTX-4090-24GB"); empty
// when none does (then no check is made).
std::string gpu_model_token(const std::string& gpu_name) {
  std::string token;
  for (size_t i = 0; i <= gpu_name.size(); ++i) {
    const char c = i < gpu_name.size() ? gpu_name[i] : ' ';
    if (std::isalnum(static_cast<unsigned char>(c))) {
      token += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      continue;
    }
    if (std::any_of(token.begin(), token.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }))
      return token;
    token.clear();
  }
  return "";
}

namespace {
std::string upper_case(const std::string& s) {
  std::string u;
  for (char c : s) u += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}
// The board a GPU name says, where it says one: "PCIE" (NVIDIA A100 80GB PCIe, H100 PCIe),
// "NVL" (H100 NVL), "SXM" (A100-SXM4-80GB, the file's H100-SXM5-80GB); empty otherwise
// (nvidia-smi names an H100 SXM5 "NVIDIA H100 80GB HBM3").
std::string board_of(const std::string& name) {
  const std::string u = upper_case(name);
  for (const char* board : {"PCIE", "NVL", "SXM"})
    if (u.find(board) != std::string::npos) return board;
  // CUDA names the H100 SXM5 "NVIDIA H100 80GB HBM3" (its PCIe and NVL boards say so in
  // theirs): HBM3 with no board named is the SXM part (an SXM5 log had calibrated an H100
  // PCIe file; found by an outside-user review).
  if (u.find("HBM3") != std::string::npos) return "SXM";
  return "";
}
}  // namespace

void require_same_gpus(const sim::HardwareSpec& hw, const std::vector<std::string>& device_names,
                       const std::string& where) {
  const std::string model = gpu_model_token(hw.gpu.name);
  if (model.empty()) return;
  const std::string board = board_of(hw.gpu.name);
  for (const auto& device : device_names) {
    // A bench file's CUDA devices are named "cuda:N" alone: nothing to compare.
    if (device.find(' ') == std::string::npos && device.find(':') != std::string::npos) continue;
    // A host bench's devices are CPU workers ("host:0 Intel(R) Xeon(R) Processor"), which a
    // host platform's file (host-cpu-gloo: "GPUs" named host-cpu-...) describes: its CPU
    // vendor is compared with the file's host.cpu (it read "has host-cpu-1-thread GPUs", an
    // outside-user review). A GPU machine's file refuses them below, as other GPUs.
    if (device.rfind("host:", 0) == 0 && hw.gpu.name.rfind("host-", 0) == 0) {
      const std::string cpu = device.find(' ') == std::string::npos ? "" : device.substr(device.find(' ') + 1);
      // The vendor as a known word anywhere in the name ("13th Gen Intel(R) Core(TM) ...");
      // a name with none (an ARM host's "unknown CPU") has nothing to compare.
      std::string vendor;
      for (const char* v : {"INTEL", "AMD", "ARM", "NEOVERSE", "GRACE", "AMPERE", "GRAVITON", "POWER", "ZHAOXIN"})
        if (vendor.empty() && upper_case(cpu).find(v) != std::string::npos) vendor = v;
      if (vendor.empty() || upper_case(hw.host.cpu).find(vendor) != std::string::npos) continue;
      throw std::invalid_argument(fmt::format(
          "{}: measured on CPU '{}', but hardware '{}' describes host.cpu '{}': a measurement of another CPU would "
          "calibrate another machine (copy the file, set host.cpu to this CPU, and calibrate the copy)",
          where, cpu, hw.name, hw.host.cpu));
    }
    const std::string other_board = board_of(device);
    // The model as whole words ("NVIDIA A100-SXM4-80GB" is not an A10: a substring search had
    // taken it for one).
    const bool other_model = !same_gpu_model(device, hw.gpu.name);
    // Another board of the same model has other clocks, power and links (H100 PCIe: 350 W,
    // no NVSwitch): its figures would calibrate another machine too.
    const bool other_form = !board.empty() && !other_board.empty() && other_board != board;
    if (other_model || other_form)
      throw std::invalid_argument(fmt::format(
          "{}: measured on '{}', but hardware '{}' has {} GPUs{}: a measurement of other GPUs would calibrate "
          "another machine (give the hardware file of the GPUs it ran on)",
          where, device, hw.name, hw.gpu.name,
          other_model ? "" : fmt::format(" ({} board, not {})", board, other_board)));
  }
}

// A log calibrates only if it is one nccl-tests could have written of a run that worked:
// no wrong results in either column (out-of-place or in-place) nor in its trailer, and
// every row's time agrees with its bandwidth (algbw = size / time: a row with time 0.00
// and a busbw is not a measurement). Throws std::invalid_argument naming the line.
void require_sound_log(const NcclTestsLog& log) {
  if (log.out_of_bounds && *log.out_of_bounds > 0)
    throw std::invalid_argument(fmt::format("{}: 'Out of bounds values : {}': the run gave wrong results, so its "
                                            "figures calibrate nothing",
                                            log.where, *log.out_of_bounds));
  for (const auto& row : log.rows)
    for (const auto& [column, timing] : {std::pair{"out-of-place", &row.out_of_place}, std::pair{"in-place", &row.in_place}}) {
      if (!*timing) continue;
      const NcclTestsTiming& t = **timing;
      if (t.wrong && *t.wrong > 0 && !fault_active(Fault::calibrate_trusts_broken_logs))
        throw std::invalid_argument(fmt::format("{}:{}: {} #wrong = {}: the collective gave wrong results, so the log "
                                                "calibrates nothing",
                                                log.where, row.line, column, *t.wrong));
      if (t.time_s <= 0 && (t.algbw_Bps > 0 || t.busbw_Bps > 0))
        throw std::invalid_argument(fmt::format("{}:{}: {} time {} us with busbw {:.4g} GB/s: a bandwidth needs a time "
                                                "(nccl-tests prints algbw = size / time)",
                                                log.where, row.line, column, t.time_s * 1e6, t.busbw_Bps / 1e9));
      // The columns are rounded to 2 decimals: compare where both carry 3 digits or more.
      if (t.time_s >= 1e-6 && t.algbw_Bps >= 1e9) {
        const double implied = static_cast<double>(row.size_bytes) / t.time_s;
        if (std::abs(implied / t.algbw_Bps - 1) > 0.05)
          throw std::invalid_argument(fmt::format("{}:{}: {} algbw {:.4g} GB/s, but {} B in {:.4g} us is {:.4g} GB/s: "
                                                  "not a row nccl-tests writes",
                                                  log.where, row.line, column, t.algbw_Bps / 1e9, row.size_bytes,
                                                  t.time_s * 1e6, implied / 1e9));
      }
    }
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
    require_same_gpus(base, log.device_names, log.where);
    // No '# Using devices' list (a log cut to its table): nothing says which GPUs ran it.
    if (log.device_names.empty() && !gpu_model_token(base.gpu.name).empty())
      out.notes.push_back(fmt::format("{}: no '# Using devices' list, so the GPUs it ran on are unchecked against "
                                      "hardware '{}' ({}): calibrate with the log nccl-tests wrote, header and all",
                                      log.where, base.name, base.gpu.name));
    require_sound_log(log);
    if (static_cast<int>(log.hosts.size()) > base.nodes)
      throw std::invalid_argument(fmt::format("{}: ranks on {} hosts, but hardware '{}' has {} node(s)", log.where,
                                              log.hosts.size(), base.name, base.nodes));
    // The largest size: a ring is bandwidth-bound there, if anywhere in the log.
    const NcclTestsRow& row = *std::max_element(log.rows.begin(), log.rows.end(), [](auto& a, auto& b) {
      return a.size_bytes < b.size_bytes;
    });
    // Only where the twin's bandwidth term dominates does the size say anything about a
    // link's efficiency: its latency (its time at one float per rank) under 10 % of its time,
    // and its bus bandwidth on its plateau: within 10 % of its bus bandwidth at 16x the size
    // (up to 4 GiB). Below the plateau the ring still ramps (pipeline fill, smaller chunks, a
    // protocol switch), and a link rate fitted there takes the ramp into the rate: a log
    // ending at 2 MiB on 8 PCIe H100s had set their staged rate 1.6-2x the one its larger
    // sizes give (found by an outside-user review).
    const double latency_share =
        row.size_bytes <= 4 * log.ranks ? 1.0
                                        : twin_time(out.spec, log, 4 * log.ranks) / twin_time(out.spec, log, row.size_bytes);
    constexpr Bytes kPlateauProbeMax = Bytes{4} << 30;
    double plateau_share = 1.0;
    if (latency_share < kMaxLatencyShare && row.size_bytes < kPlateauProbeMax / 16 &&
        !fault_active(Fault::calibrate_fits_below_plateau)) {
      const Bytes probe = std::min(kPlateauProbeMax, row.size_bytes * 16);
      plateau_share = twin_busbw(out.spec, log.collective, log.ranks, row.size_bytes) /
                      twin_busbw(out.spec, log.collective, log.ranks, probe);
    }
    // NVLS at that size: its bus bandwidth is NCCL's NVLS model (channels x bandwidth x
    // nvlsEfficiency), not the links' efficiency, so fitting a link field to it cuts the links
    // for every other algorithm (an outside-user review: a 15 % NVLS shortfall set p2p 0.9 ->
    // 0.52, and ring all_gather fell 355 -> 229 GB/s). Planted fault: fitted all the same.
    std::string nvls_algorithm;
    if (log.collective == "all_reduce" && !fault_active(Fault::calibrate_fits_nvls)) {
      SimBenchRun probe_run;
      for (int i = 0; i < log.ranks; ++i) probe_run.ranks.push_back(i);
      probe_run.calls = {CollectiveCall{CollectiveOp::all_reduce,
                                        std::max<Elements>(log.ranks, row.size_bytes / 4 / log.ranks * log.ranks), 4, 0}};
      const std::string a = run_bench_sim(out.spec, probe_run).at(0).algorithm;
      if (a.rfind("nvls", 0) == 0) nvls_algorithm = a;
    }
    if (!nvls_algorithm.empty()) {
      sim::HardwareSpec probe = out.spec;
      NcclFieldCalibration fc = field_from(log, row);
      double most = 1.0;
      fc.before = fc.after = bounding_field(probe, log, fc.field, most);
      fc.fitted = fc.reached = false;
      fc.bound = fmt::format("the twin runs {} at {} B (line {}), whose bus bandwidth is NCCL's NVLS model, not the "
                             "links' efficiency: left as it is; a ring log (NCCL_ALGO=Ring all_reduce_perf, or "
                             "all_gather_perf) calibrates it",
                             nvls_algorithm, row.size_bytes, row.line);
      out.fields.push_back(fc);
      fit_latency(out.spec, log, date, comments, out.fields);
      continue;
    }
    if (latency_share >= kMaxLatencyShare || plateau_share < kMinPlateauShare) {
      sim::HardwareSpec probe = out.spec;
      NcclFieldCalibration fc = field_from(log, row);
      double most = 1.0;
      fc.before = fc.after = bounding_field(probe, log, fc.field, most);
      fc.fitted = fc.reached = false;
      fc.bound =
          latency_share >= kMaxLatencyShare
              ? fmt::format("{} has no bandwidth-bound size: at its largest, {} B (line {}), latency is {:.0f} % of "
                            "the twin's time (a bandwidth fit needs under {:.0f} %); log larger sizes (nccl-tests -e)",
                            log.where, row.size_bytes, row.line, 100 * latency_share, 100 * kMaxLatencyShare)
              : fmt::format("{} has no bandwidth-bound size: at its largest, {} B (line {}), the twin's bus bandwidth "
                            "is {:.0f} % of its bandwidth at 16x the size (a bandwidth fit needs {:.0f} %: the ring "
                            "still ramps there); log larger sizes (nccl-tests -e)",
                            log.where, row.size_bytes, row.line, 100 * plateau_share, 100 * kMinPlateauShare);
      out.fields.push_back(fc);
      const size_t before = out.fields.size();
      fit_latency(out.spec, log, date, comments, out.fields);
      if (out.fields.size() == before)
        throw std::invalid_argument(fmt::format(
            "{}: calibrates nothing: no bandwidth-bound size (the largest, {} B, {}) and no latency-bound size "
            "from {} B (one 4-byte element per rank, the least the twin runs on {} ranks) to 64 KiB",
            log.where, row.size_bytes,
            latency_share >= kMaxLatencyShare
                ? fmt::format("is {:.0f} % latency in the twin", 100 * latency_share)
                : fmt::format("reaches {:.0f} % of the twin's bus bandwidth at 16x the size", 100 * plateau_share),
            4 * log.ranks, log.ranks));
      continue;
    }
    const NcclTestsTiming& t = log.timing(row);  // right results: require_sound_log
    if (t.busbw_Bps <= 0)
      throw std::invalid_argument(fmt::format("{}:{}: busbw 0 at the largest size", log.where, row.line));
    NcclFieldCalibration fc = field_from(log, row);
    fc.measured_busbw_Bps = t.busbw_Bps;
    double most = 1.0;
    const bool staged_unset = !out.spec.pcie.staged_bidirectional;
    double& field = bounding_field(out.spec, log, fc.field, most);
    fc.before = field;
    fc.predicted_before_Bps = twin_busbw(out.spec, log.collective, log.ranks, row.size_bytes);
    BytesPerSecond predicted = fc.predicted_before_Bps;
    // Where the link bounds the ring, busbw is about proportional to the field; where
    // something else does (NCCL's per-channel bandwidth), the field does not move it.
    const double least = most * 1e-3;  // the loader's least efficiency (for the staged rate, of the raw rate)
    const FieldFit fit = fit_field(field, std::min(least, field), std::max(most, field), [&] {
      sim::validate_hardware(out.spec);
      predicted = twin_busbw(out.spec, log.collective, log.ranks, row.size_bytes);
      return std::log(predicted / t.busbw_Bps);
    });
    fc.reached = fit.reached;
    fc.capped = !fit.reached && fit.h < 0 && fit.moves;
    // Faster than the hardware file allows at efficiency 1 by more than a quarter: the log is
    // of other hardware, or the file's rates are wrong. Capping the field would write a file
    // that claims to match a log it cannot (and its latency fit would follow that log).
    if (!fit.reached && t.busbw_Bps > kMaxBeyondReach * predicted && !fault_active(Fault::calibrate_trusts_broken_logs))
      throw std::invalid_argument(fmt::format(
          "{}:{}: busbw {:.4g} GB/s at {} B, but the twin reaches at most {:.4g} GB/s there ({} up to its bound): the "
          "log is {:.2g}x faster than hardware '{}' can be; give the hardware file of the machine it ran on, or fix its "
          "link rates",
          log.where, row.line, t.busbw_Bps / 1e9, row.size_bytes, predicted / 1e9, fc.field, t.busbw_Bps / predicted,
          base.name));
    if (!fit.reached) {
      const sim::NcclGraph g = sim::nccl_graph(out.spec, log.ranks, std::max<int>(1, log.hosts.size()),
                                               !ranks_use_shm(out.spec, log.ranks));
      fc.bound = fit.moves ? fmt::format("the twin reaches {:.4g} GB/s at {} {:.4g}", predicted / 1e9, fc.field,
                                         field / (fc.field == "pcie.staged_bidirectional" ? 1e9 : 1.0))
                           : fmt::format("{} does not move the twin here ({:.4g} GB/s at its bound too): NCCL's "
                                         "per-channel bandwidth bounds it ({} channels x {:.4g} GB/s)",
                                         fc.field, predicted / 1e9, g.ring_channels, g.ring_bw_gbs);
    }
    fc.after = field;
    fc.predicted_after_Bps = predicted;
    const bool rate = fc.field == "pcie.staged_bidirectional";
    comments[fc.field] = fmt::format(
        "calibrated {} from {} line {} ({} on {} ranks{}, {} B: busbw {:.4g} GB/s; was {:.4g}{}){}", date,
        log.where, row.line, log.collective, log.ranks, rate ? " over SHM" : "", row.size_bytes, t.busbw_Bps / 1e9,
        rate ? fc.before / 1e9 : fc.before,
        !rate ? "" : staged_unset ? " GB/s: unset, 0.41 of the link's raw rate" : " GB/s",
        fc.reached ? "" : "; cannot reach: " + fc.bound);
    out.fields.push_back(fc);
    fit_latency(out.spec, log, date, comments, out.fields);
  }
  // One field, one log: a second log fitting a field the first set would silently replace
  // it (fitted from the first's value), so the answer would depend on the order given.
  for (size_t i = 0; i < out.fields.size(); ++i)
    for (size_t j = i + 1; j < out.fields.size(); ++j) {
      const auto &a = out.fields[i], &b = out.fields[j];
      if (a.fitted && b.fitted && a.field == b.field && a.log != b.log)
        throw std::invalid_argument(fmt::format("{}: set by both {} (line {}: {:.4g}) and {} (line {}: {:.4g}); give "
                                                "one log per field (the machine's bounding collective)",
                                                a.field, a.log, a.line, a.after, b.log, b.line, b.after));
    }
  // Nothing fitted: no file to write (an NVLS-only log wrote a "calibrated" file with no
  // field calibrated and its sources' comments gone; an outside-user review).
  if (std::none_of(out.fields.begin(), out.fields.end(), [](const NcclFieldCalibration& f) { return f.fitted; })) {
    std::string why;
    for (const auto& f : out.fields) why += fmt::format("; {}: {}", f.field, f.bound);
    throw std::invalid_argument(fmt::format("calibrates nothing: no field of hardware '{}' is fitted{}", base.name, why));
  }
  out.yaml = sim::hardware_yaml(
      out.spec, comments,
      verify::calibration_header(
          base, fmt::format("{} calibrated from nccl-tests logs by `dptwin calibrate --from` ({})", base.name, date),
          "calibrated", "the logs"));
  return out;
}

}  // namespace dpt
