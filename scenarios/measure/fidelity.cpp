// The twin's side of the fidelity table (fidelity.hpp): each entry predicted through
// the path the user's own command takes, and the errors summarised per class.
#include "scenarios/measure/fidelity.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/fault_injection.hpp"
#include "engine/io/atomic_file.hpp"
#include "scenarios/measure/bench_sim.hpp"
#include "scenarios/scenario/predict_runner.hpp"
#include "sim/net/hardware.hpp"
#include "sim/twin/sim_process.hpp"

namespace dpt::fidelity {
namespace {

// nccl-tests' warm-up and timed iterations are -w 5 -n 20; the twin is deterministic,
// so fewer iterations give the same average (kept above one so the timed window
// starts after a warm-up call, as nccl-tests' does).
constexpr int kWarmupIters = 2;
constexpr int kTimedIters = 4;

// entry_hardware resized to `nodes`.
sim::HardwareSpec entry_hardware_on(const Entry& e, const scenario::Library& lib, const std::filesystem::path& dir,
                                    int nodes) {
  sim::HardwareSpec hw = entry_hardware(e, lib, dir);
  if (nodes != hw.nodes) {
    try {
      hw = sim::with_nodes(hw, nodes);
    } catch (const std::invalid_argument& ex) {
      throw std::invalid_argument(fmt::format("{}:{}: hardware_file: {} nodes: {}", e.file, e.line, nodes, ex.what()));
    }
  }
  return hw;
}

// As `dptwin bench --backend sim` times one size: through the same run_bench_sim.
Result predict_collective(const Entry& e, const scenario::Library& lib, const std::filesystem::path& dir) {
  const CollectiveConfig& c = *e.collective;
  const sim::HardwareSpec hw = entry_hardware_on(e, lib, dir, c.nodes);
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
  scenario::set_point_value(s.base, "inputs", t.inputs, where);
  scenario::set_point_value(s.base, "optimizer", t.optimizer, where);
  scenario::set_point_value(s.base, "optimizer_impl", t.optimizer_impl, where);
  s.base.overrides = e.overrides;
  scenario::check_scenario_fields(s);
  // A measured run that the twin says does not fit is a miss of the twin's, not bad input:
  // the row predicts 0 samples/s (error -100 %) and says why, and the table goes on.
  auto out_of_memory = [&](const std::string& why) {
    Result r;
    r.entry = &e;
    r.predicted = 0;
    r.detail = "the twin predicts out of memory: " + why;
    return r;
  };
  std::optional<scenario::ResolvedPoint> resolved;
  try {
    resolved = scenario::resolve_point(s, s.base, lib);
  } catch (const scenario::ModelDoesNotFit& oom) {
    return out_of_memory(oom.what());
  }
  scenario::ResolvedPoint& point = *resolved;
  point.dp_loss_per_replica = t.dp_loss == "per_replica";
  const StepReport rep = scenario::predict_point(point, "");
  if (rep.out_of_memory) return out_of_memory(rep.out_of_memory->message);
  if (!rep.step_time_s) throw std::runtime_error(where + "the twin gave no step time");
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
  // A measured figure 4x off the twin's either way is more often a typo than a miss: a
  // Gb/s figure typed as GB/s is 8x, a per-rank count for a total 8x on 8 GPUs (an
  // outside-user review's Gb/s row printed -85 % and nothing else).
  if (r.predicted > 0 && (r.predicted > 4 * e.measured || 4 * r.predicted < e.measured)) {
    const char* unit = e.metric == Metric::samples_per_s ? "samples/s of all GPUs together (not tokens/s, not per GPU)"
                       : e.metric == Metric::time_us     ? "microseconds"
                                                         : "GB/s, not Gb/s";
    r.detail += fmt::format("; measured {:.3g}x the twin's: check the figure, its unit ({}) and the configuration",
                            e.measured / r.predicted, unit);
  }
  return r;
}

namespace {

// A worker's answer: the prediction, or the error its job threw and of which kind.
nlohmann::json predict_in_child(const Job& job, const Predictor& predict) {
  try {
    const Result r = predict(*job.entry, job.source_dir);
    return {{"predicted", r.predicted}, {"error", r.error}, {"detail", r.detail}};
  } catch (const std::invalid_argument& e) {
    return {{"failure", e.what()}, {"kind", "invalid"}};
  } catch (const std::exception& e) {
    return {{"failure", e.what()}, {"kind", "failed"}};
  }
}

// The job's result from its worker's exit status and file; a failure as the exception
// its job threw (or a runtime_error saying how the worker ended).
struct Collected {
  std::optional<Result> result;
  std::string failure;
  bool invalid = false;
};

Collected collect(const Job& job, int status, const std::filesystem::path& file) {
  Collected c;
  std::ifstream in(file);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !in) {
    c.failure = WIFSIGNALED(status) ? fmt::format("{}: the prediction process died of signal {} ({})", job.entry->id,
                                                  WTERMSIG(status), strsignal(WTERMSIG(status)))
                                    : fmt::format("{}: the prediction process ended without a result", job.entry->id);
    return c;
  }
  try {
    const auto j = nlohmann::json::parse(in);
    if (j.contains("failure")) {
      c.failure = j.at("failure").get<std::string>();
      c.invalid = j.value("kind", "") == "invalid";
      return c;
    }
    Result r;
    r.entry = job.entry;
    r.predicted = j.at("predicted").get<double>();
    r.error = j.at("error").get<double>();
    r.detail = j.at("detail").get<std::string>();
    c.result = std::move(r);
  } catch (const std::exception& e) {
    c.failure = fmt::format("{}: unreadable prediction: {}", job.entry->id, e.what());
  }
  return c;
}

struct RemoveDirOnExit {
  std::filesystem::path dir;
  ~RemoveDirOnExit() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

double cost_hint(const Entry& e) {
  if (!e.collective) return 0;
  return static_cast<double>(e.collective->bytes) * (kWarmupIters + e.collective->iters.value_or(kTimedIters));
}

std::vector<Result> predict_entries(const std::vector<Job>& jobs_to_run, int jobs, const Predictor& predict,
                                    const std::function<void()>& on_done) {
  if (jobs < 1) throw std::invalid_argument(fmt::format("--jobs {}: must be at least 1", jobs));
  std::vector<Result> out;
  if (jobs == 1) {
    for (const auto& job : jobs_to_run) {
      Result r = predict(*job.entry, job.source_dir);
      r.entry = job.entry;
      out.push_back(std::move(r));
      if (on_done) on_done();
    }
    return out;
  }
  const std::filesystem::path tmp = make_run_temp_dir("dptwin-fidelity");
  const RemoveDirOnExit cleanup{tmp};
  auto file_of = [&](size_t i) { return tmp / fmt::format("{}.json", i); };
  std::map<size_t, Collected> done;  // by job index
  // Planted fault: results listed in the order their workers finish.
  std::vector<size_t> finish_order;
  std::map<pid_t, size_t> running;
  std::vector<size_t> order(jobs_to_run.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return jobs_to_run[a].cost_hint > jobs_to_run[b].cost_hint; });
  size_t next = 0;
  bool failed = false;
  sim::ChildProcessScope workers;  // SIGINT/SIGTERM end the workers; `cleanup` removes tmp
  while ((next < jobs_to_run.size() && !failed) || !running.empty()) {
    workers.throw_if_stopped();
    while (next < jobs_to_run.size() && !failed && static_cast<int>(running.size()) < jobs) {
      const size_t i = order[next++];
      const pid_t pid = workers.fork_child();
      if (pid == 0) {
        // Child: predict, hand the result back in a file, leave without the parent's
        // exit handlers or buffered output.
        const nlohmann::json answer = predict_in_child(jobs_to_run[i], predict);
        std::ofstream(file_of(i)) << answer.dump();
        ::_exit(0);
      }
      running.emplace(pid, i);
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(fmt::format("waiting for fidelity workers: {}", std::strerror(errno)));
    }
    workers.reaped(pid);
    const auto it = running.find(pid);
    if (it == running.end()) continue;  // not one of ours
    const size_t i = it->second;
    running.erase(it);
    Collected c = collect(jobs_to_run[i], status, file_of(i));
    failed = failed || !c.result;
    done.emplace(i, std::move(c));
    finish_order.push_back(i);
    if (on_done) on_done();
  }
  for (auto& [i, c] : done)
    if (!c.result) {
      if (c.invalid) throw std::invalid_argument(c.failure);
      throw std::runtime_error(c.failure);
    }
  if (fault_active(Fault::fidelity_completion_order))
    for (size_t i : finish_order) out.push_back(*done.at(i).result);
  else
    for (auto& [i, c] : done) out.push_back(std::move(*c.result));
  return out;
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
                       EntryClass::training, EntryClass::training_shm}) {
    ClassSummary s{c};
    std::vector<double> abs_errors, errors;
    for (const auto& r : results) {
      if (classify(*r.entry) != c) continue;
      const double a = std::abs(r.error);
      abs_errors.push_back(a);
      errors.push_back(r.error);
      if (a >= s.max_abs_error) {
        s.max_abs_error = a;
        s.worst_id = r.entry->id;
      }
    }
    s.count = static_cast<int>(abs_errors.size());
    s.median_abs_error = median(abs_errors);
    s.median_error = median(errors);
    if (s.count > 0) out.push_back(s);
  }
  return out;
}

}  // namespace dpt::fidelity
