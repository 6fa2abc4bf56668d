// The twin's side of the fidelity table (fidelity.hpp): each entry predicted through
// the path the user's own command takes, and the errors summarised per class.
#include "scenarios/measure/fidelity.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "scenarios/measure/bench_sim.hpp"
#include "scenarios/scenario/predict_runner.hpp"
#include "sim/net/hardware.hpp"

namespace dpt::fidelity {
namespace {

// nccl-tests' warm-up and timed iterations are -w 5 -n 20; the twin is deterministic,
// so fewer iterations give the same average (kept above one so the timed window
// starts after a warm-up call, as nccl-tests' does).
constexpr int kWarmupIters = 2;
constexpr int kTimedIters = 4;

sim::HardwareSpec entry_hardware(const Entry& e, const scenario::Library& lib, const std::filesystem::path& dir,
                                 int nodes) {
  const std::string where = fmt::format("{}:{}: hardware_file: ", e.file, e.line);
  sim::HardwareSpec hw = scenario::load_hardware_with_overrides(e.hardware_file, e.overrides, lib, dir, where);
  if (nodes != hw.nodes) {
    try {
      hw = sim::with_nodes(hw, nodes);
    } catch (const std::invalid_argument& ex) {
      throw std::invalid_argument(fmt::format("{}{} nodes: {}", where, nodes, ex.what()));
    }
  }
  return hw;
}

// As `dptwin bench --backend sim` times one size: through the same run_bench_sim.
Result predict_collective(const Entry& e, const scenario::Library& lib, const std::filesystem::path& dir) {
  const CollectiveConfig& c = *e.collective;
  const sim::HardwareSpec hw = entry_hardware(e, lib, dir, c.nodes);
  if (c.gpus > hw.gpu_count())
    throw std::invalid_argument(fmt::format("{}:{}: collective.gpus: {} GPUs, but {} on {} nodes has {}", e.file, e.line,
                                            c.gpus, hw.name, c.nodes, hw.gpu_count()));
  // Ranks fill nodes evenly: gpus / nodes per node, from each node's first GPU.
  std::vector<int> ranks;
  const int per_node = c.gpus / c.nodes;
  for (int node = 0; node < c.nodes; ++node)
    for (int g = 0; g < per_node; ++g) ranks.push_back(node * hw.gpus_per_node + g);
  const bool blocked = c.op == sim::CollectiveOp::all_gather || c.op == sim::CollectiveOp::reduce_scatter;
  // The whole buffer, as `dptwin bench` passes it (rounded down to a multiple of the ranks
  // for all_gather and reduce_scatter, as nccl-tests rounds it).
  Elements count = c.bytes / c.element_bytes;
  if (blocked) count = count / c.gpus * c.gpus;
  if (blocked && fault_active(Fault::fidelity_per_rank_count)) count /= c.gpus;  // planted: one rank's count
  const CollectiveCall call{c.op, count, c.element_bytes, 0};
  SimBenchRun run;
  run.ranks = ranks;
  run.calls = {call};
  run.warmup_iters = kWarmupIters;
  // The source's timed calls when it states them: with -g the window's first launches
  // weigh 1 / iters of the time per call.
  run.timed_iters = c.iters.value_or(kTimedIters);
  run.gpus_per_thread = c.gpus_per_thread;
  if (c.algorithm) run.settings.algorithm = sim::parse_collective_algorithm(*c.algorithm);
  run.plan_error_prefix = fmt::format("{}:{}: collective: ", e.file, e.line);
  const SimBenchRow row = run_bench_sim(hw, run).at(0);
  const int n = static_cast<int>(ranks.size());
  const double time_s = row.time_s;
  const double algbw = static_cast<double>(c.bytes) / time_s / 1e9;
  Result r;
  r.entry = &e;
  if (e.metric == Metric::time_us) r.predicted = time_s * 1e6;
  else if (e.metric == Metric::algbw_GB_per_s) r.predicted = algbw;
  else r.predicted = algbw * busbw_factor(c.op, n);
  r.detail = fmt::format("{} x{} ch, {:.1f} us", row.algorithm, row.channels, time_s * 1e6);
  return r;
}

// As `dptwin predict` runs a point: the scenario's fields set through the same checks,
// resolved against the library, predicted. With gradient accumulation (A micro-batches
// per optimizer step, DDP's no_sync on the first A-1) the step is one predicted step plus
// A-1 micro-batches that neither synchronise nor update: the twin's single-device step of
// the same per-device batch (its input copy and dispatch included) less its optimizer.
Result predict_training(const Entry& e, const scenario::Library& lib, const std::filesystem::path& dir) {
  const TrainingConfig& t = *e.training;
  const std::string where = fmt::format("{}:{}: training: ", e.file, e.line);
  scenario::Scenario s;
  s.file = e.file;
  s.dir = dir;
  s.name = e.id;
  using I = std::int64_t;
  scenario::set_point_value(s.base, "hardware", e.hardware_file, where);
  scenario::set_point_value(s.base, "model", t.model, where);
  scenario::set_point_value(s.base, "strategy", t.strategy, where);
  scenario::set_point_value(s.base, "devices", I{t.gpus}, where);
  scenario::set_point_value(s.base, "nodes", I{t.nodes}, where);
  scenario::set_point_value(s.base, "batch_per_device", I{t.batch_per_device}, where);
  scenario::set_point_value(s.base, "precision", t.precision, where);
  scenario::set_point_value(s.base, "memory_format", t.memory_format, where);
  scenario::set_point_value(s.base, "optimizer", t.optimizer, where);
  s.base.overrides = e.overrides;
  scenario::check_scenario_fields(s);
  scenario::ResolvedPoint point = scenario::resolve_point(s, s.base, lib);
  point.dp_loss_per_replica = t.dp_loss == "per_replica";
  const StepReport rep = scenario::predict_point(point, "");
  if (rep.out_of_memory || !rep.step_time_s)
    throw std::invalid_argument(fmt::format("{}the twin predicts out of memory ({})", where,
                                            rep.out_of_memory ? rep.out_of_memory->message : "no step time"));
  const int a = t.accumulation_steps;
  const std::optional<Seconds> single_s = t.strategy == "single" ? rep.step_time_s : rep.single_device_step_time_s;
  if (a > 1 && !single_s)
    throw std::invalid_argument(fmt::format("{}accumulation_steps: the twin gave no single-device step to compose "
                                            "the no_sync micro-batches from",
                                            where));
  const double micro_s = a > 1 ? *single_s - rep.breakdown_s.optimizer : 0;
  const double step_s = *rep.step_time_s + (a - 1) * micro_s;
  const double samples = static_cast<double>(rep.batch_global) * a;
  Result r;
  r.entry = &e;
  r.predicted = samples / step_s;
  r.detail = a == 1 ? fmt::format("step {:.2f} ms", *rep.step_time_s * 1e3)
                    : fmt::format("step {:.2f} ms + {} x no_sync {:.2f} ms", *rep.step_time_s * 1e3, a - 1,
                                  micro_s * 1e3);
  return r;
}

}  // namespace

Result predict_entry(const Entry& e, const scenario::Library& lib, const std::filesystem::path& source_dir) {
  Result r = e.collective ? predict_collective(e, lib, source_dir) : predict_training(e, lib, source_dir);
  r.error = (r.predicted - e.measured) / e.measured;
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::vector<ClassSummary> summarise(const std::vector<Result>& results) {
  std::vector<ClassSummary> out;
  for (EntryClass c : {EntryClass::collective_small, EntryClass::collective_mid, EntryClass::collective_large,
                       EntryClass::training}) {
    ClassSummary s{c};
    std::vector<double> abs_errors;
    for (const auto& r : results) {
      if (classify(*r.entry) != c) continue;
      const double a = std::abs(r.error);
      abs_errors.push_back(a);
      if (a >= s.max_abs_error) {
        s.max_abs_error = a;
        s.worst_id = r.entry->id;
      }
    }
    s.count = static_cast<int>(abs_errors.size());
    s.median_abs_error = median(abs_errors);
    if (s.count > 0) out.push_back(s);
  }
  return out;
}

}  // namespace dpt::fidelity
