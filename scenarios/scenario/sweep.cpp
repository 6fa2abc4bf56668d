#include "scenarios/scenario/sweep.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/device.hpp"
#include "engine/core/fault_injection.hpp"
#include "engine/io/atomic_file.hpp"
#include "scenarios/scenario/model_library_yaml.hpp"
#include "scenarios/scenario/predict_runner.hpp"
#include "scenarios/scenario/progress_bar.hpp"
#include "sim/net/hardware_yaml.hpp"
#include "sim/twin/sim_process.hpp"

namespace dpt::scenario {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string value_label(const YAML::Node& v) {
  if (v.IsScalar()) return v.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << v;
  return e.c_str();
}

PointResult result_skeleton(const SweepPoint& p) {
  PointResult r;
  r.index = p.index;
  r.axes = p.axes;
  const auto& c = p.config;
  r.hardware = c.hardware.value_or("");
  r.model = c.model.value_or("");
  r.strategy = c.strategy.value_or("");
  r.devices = c.gpus ? 0 : c.devices.value_or(1);
  r.nodes = c.gpus ? 0 : c.nodes.value_or(1);
  r.dtype = std::string(dtype_name(c.dtype));
  r.precision = std::string(precision_name(c.precision.value_or(precision_of_dtype(c.dtype))));
  r.bucket_cap_mb = c.bucket_cap_mb;
  r.optimizer = optimizer_kind_name(c.optimizer);
  return r;
}

void fill_resolved(PointResult& r, const ResolvedPoint& rp) {
  r.gpu_name = rp.hardware.gpu.name;
  r.model = rp.model.name;
  r.devices = rp.devices;
  r.nodes = rp.nodes;
  // The step's global batch, as the report counts it: every micro-batch of an accumulated
  // step (the resolved point's batch fields describe one micro-batch).
  r.batch_global = rp.batch_global * rp.accumulate;
  r.batch_per_device = rp.batch_per_device;
}

std::string trace_file_name(const PointResult& r) {
  // The hardware's name (or path) is cut so the file name stays within NAME_MAX (255).
  const std::string hardware = r.hardware.substr(0, 160);
  std::string name = fmt::format("point-{:04d}-{}-{}-{}gpu.json", r.index, hardware, r.strategy, r.gpus());
  for (auto& ch : name)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '.' || ch == '_')) ch = '_';
  return name;
}

// What a child process hands back: the report, or the error and its kind.
json run_point_in_child(const PointRunner& runner, const ResolvedPoint& rp, const std::string& trace) {
  try {
    return {{"report", step_report_to_json(runner(rp, trace))}};
  } catch (const OutOfMemory& e) {
    return {{"error", e.what()}, {"kind", "out_of_memory"}};
  } catch (const std::exception& e) {
    return {{"error", e.what()}, {"kind", "failed"}};
  }
}

void apply_child_output(PointResult& r, const json& out) {
  if (out.contains("report")) {
    r.report = step_report_from_json(out.at("report"), "prediction");
    if (r.report->out_of_memory) {
      r.status = PointStatus::out_of_memory;
      r.reason = r.report->out_of_memory->message;
    } else if (!r.report->step_time_s) {
      r.status = PointStatus::failed;
      r.reason = "the prediction has no step time";
    }
    return;
  }
  r.status = out.value("kind", "failed") == "out_of_memory" ? PointStatus::out_of_memory : PointStatus::failed;
  r.reason = out.value("error", "unknown error");
}


}  // namespace

std::string text_digest(const std::string& text) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", h);
}

std::size_t sweep_point_count(const Scenario& s) {
  std::size_t total = 1;
  for (const auto& a : s.sweep) {
    if (a.values.empty()) throw std::invalid_argument(fmt::format("{}: sweep.{}: expected a non-empty list", s.file, a.name));
    if (total > kMaxSweepPoints / a.values.size())
      throw std::invalid_argument(fmt::format("{}: sweep: the {} axes make more than {} points (at most {} per sweep)",
                                              s.file, s.sweep.size(), kMaxSweepPoints, kMaxSweepPoints));
    total *= a.values.size();
  }
  return total;
}

SweepPoint sweep_point(const Scenario& s, std::size_t index) {
  SweepPoint p;
  p.index = index;
  p.config = s.base;
  // Row-major: the last axis varies fastest.
  size_t rest = index;
  std::vector<size_t> pick(s.sweep.size());
  for (size_t a = s.sweep.size(); a-- > 0;) {
    pick[a] = rest % s.sweep[a].values.size();
    rest /= s.sweep[a].values.size();
  }
  for (size_t a = 0; a < s.sweep.size(); ++a) {
    const auto& axis = s.sweep[a];
    set_point_field(p.config, axis.name, axis.values[pick[a]], axis.where[pick[a]]);
    p.axes.emplace_back(axis.name, value_label(axis.values[pick[a]]));
  }
  return p;
}

std::vector<SweepPoint> expand_sweep(const Scenario& s) {
  const std::size_t total = sweep_point_count(s);
  std::vector<SweepPoint> points;
  points.reserve(total);
  for (size_t i = 0; i < total; ++i) points.push_back(sweep_point(s, i));
  return points;
}

Target target_in_samples_for(const Scenario& s, const Library& lib) {
  const Target& t = *s.target;
  if (!t.in_tokens()) return t;
  // The models the scenario runs: its own, and a sweep's (a relative file, hf:PATH's
  // config.json too, relative to the scenario's folder).
  std::vector<std::string> models;
  if (s.base.model) models.push_back(*s.base.model);
  for (const auto& axis : s.sweep)
    if (axis.name == "model") {
      models.clear();
      for (const auto& v : axis.values)
        if (v.IsScalar()) models.push_back(v.as<std::string>());
    }
  std::optional<double> tokens;  // per sample, the models' (all agree)
  std::string first;
  bool unreadable = false;
  for (const auto& name : models) {
    ModelDescription model;
    try {
      model = load_model(model_relative_to(name, s.dir), lib.models_dir);
    } catch (const std::invalid_argument&) {
      unreadable = true;  // resolving its points says what is wrong, with the file and line
      continue;
    }
    const auto own = tokens_per_sample_of(model);
    if (t.tokens_per_sample) {
      // A count that contradicts the model's own sample would judge one sequence length
      // and simulate another (4 GPUs "meeting" 100,000 tokens/s at 2,048 tokens a sample
      // while they simulate 1,024).
      if (own && std::abs(*t.tokens_per_sample - static_cast<double>(*own)) > 0.5)
        throw std::invalid_argument(fmt::format(
            "{}: target: tokens_per_sample (--tokens-per-sample) {} contradicts the model {}, whose sample is {} tokens; "
            "leave it out, or give the model the sequence you train (hf:PATH:seq=N, transformer:...,seq=N)",
            s.file, *t.tokens_per_sample, model.name, *own));
      continue;
    }
    if (!own)
      throw std::invalid_argument(fmt::format("{}: target: the model {} does not say its tokens per sample (its sample "
                                              "is \"{}\"); add tokens_per_sample to the target (--tokens-per-sample), or tokens_per_sample: N to the "
                                              "model file",
                                              s.file, model.name, model.sample));
    if (tokens && std::abs(*tokens - static_cast<double>(*own)) > 0.5)
      throw std::invalid_argument(fmt::format(
          "{}: target: a target in tokens is one target in samples for the whole sweep, but {} trains {}-token "
          "samples and {} {}-token ones; give the target in samples, or sweep models of one sequence length",
          s.file, first, *tokens, model.name, *own));
    if (!tokens) first = model.name;
    tokens = static_cast<double>(*own);
  }
  if (t.tokens_per_sample) return target_in_samples(t, *t.tokens_per_sample);
  if (!tokens && unreadable) return t;
  if (!tokens) throw std::invalid_argument(fmt::format("{}: target: a target in tokens needs a model", s.file));
  return target_in_samples(t, *tokens);
}

void validate_scenario(const Scenario& s, const Library& lib, int shard_index, int shard_count) {
  const std::size_t total = sweep_point_count(s);
  std::optional<std::string> first_infeasible;
  bool any_feasible = false;
  for (std::size_t i = static_cast<std::size_t>(shard_index); i < total; i += static_cast<std::size_t>(shard_count)) {
    try {
      resolve_point(s, sweep_point(s, i).config, lib);
      any_feasible = true;
    } catch (const InfeasiblePoint& e) {
      if (s.sweep.empty()) throw;
      if (!first_infeasible) first_infeasible = e.what();
    } catch (const ModelDoesNotFit&) {
      // In a sweep, a point that does not fit is an answer (the report says so).
      if (s.sweep.empty()) throw;
      any_feasible = true;
    }
  }
  if (!any_feasible && first_infeasible)
    throw std::invalid_argument(*first_infeasible + (shard_count == 1 ? "; no point of the sweep can run"
                                                                      : "; no point of this shard can run"));
}

std::pair<int, int> parse_shard(const std::string& text, const std::string& flag) {
  auto digits = [](const std::string& t) { return !t.empty() && t.find_first_not_of("0123456789") == std::string::npos; };
  const auto slash = text.find('/');
  const std::string i_text = slash == std::string::npos ? "" : text.substr(0, slash);
  const std::string n_text = slash == std::string::npos ? "" : text.substr(slash + 1);
  const bool well_formed = digits(i_text) && digits(n_text);
  // Compared as text lengths first, so no count wraps on its way to an int.
  const std::string max_text = std::to_string(kMaxSweepPoints);
  const auto too_big = [&](const std::string& t) {
    const auto first = t.find_first_not_of('0');
    const std::string v = first == std::string::npos ? "0" : t.substr(first);
    return v.size() > max_text.size() || (v.size() == max_text.size() && v > max_text);
  };
  if (well_formed && (too_big(n_text) || too_big(i_text)))
    throw std::invalid_argument(fmt::format("{} {}: at most {} shards", flag, text, kMaxSweepPoints));
  const long long i = well_formed ? std::stoll(i_text) : -1, n = well_formed ? std::stoll(n_text) : 0;
  if (!well_formed || n < 1 || i < 0 || i >= n)
    throw std::invalid_argument(
        fmt::format("{} {}: expected I/N with 0 <= I < N, e.g. {} 0/4 (Slurm: --array=0-<N-1> and {} "
                    "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT; an --array from 1 needs "
                    "$((SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN)) as I)",
                    flag, text, flag, flag));
  return {static_cast<int>(i), static_cast<int>(n)};
}

namespace {

// A point waiting for, or running in, a worker process.
struct SweepJob {
  PointResult result;
  ResolvedPoint resolved;
  std::string trace;  // the point's Chrome trace file, "" for none
};

// The shard's points resolved: feasible ones queued for a worker, the others
// finished at once as skipped (infeasible) or out of memory.
void resolve_shard(const Scenario& s, const Library& lib, const SweepOptions& options, std::size_t total_points,
                   std::deque<SweepJob>& queue, std::map<size_t, PointResult>& finished) {
  for (std::size_t i = static_cast<std::size_t>(options.shard_index); i < total_points;
       i += static_cast<std::size_t>(options.shard_count)) {
    const SweepPoint p = sweep_point(s, i);
    PointResult r = result_skeleton(p);
    try {
      ResolvedPoint rp = resolve_point(s, p.config, lib);
      fill_resolved(r, rp);
      std::string trace;
      if (!options.trace_dir.empty()) trace = (fs::path(options.trace_dir) / trace_file_name(r)).string();
      queue.push_back({std::move(r), std::move(rp), trace});
    } catch (const InfeasiblePoint& e) {
      r.status = PointStatus::skipped;
      r.reason = e.reason();
      finished[r.index] = std::move(r);
    } catch (const ModelDoesNotFit& e) {
      if (e.point()) fill_resolved(r, *e.point());  // what it was: GPUs, batches
      r.status = PointStatus::out_of_memory;
      r.reason = e.reason();
      finished[r.index] = std::move(r);
    }
  }
}

// A worker's result, from its exit status and the file it wrote: the prediction, or
// a failed point saying why there is none.
void collect_worker_result(int status, const fs::path& result_file, PointResult& result) {
  std::ifstream in(result_file);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !in) {
    result.status = PointStatus::failed;
    result.reason = WIFSIGNALED(status) ? fmt::format("the prediction process died of signal {} ({})",
                                                      WTERMSIG(status), strsignal(WTERMSIG(status)))
                                        : "the prediction process ended without a result";
    return;
  }
  try {
    apply_child_output(result, json::parse(in));
  } catch (const std::exception& e) {
    result.status = PointStatus::failed;
    result.reason = fmt::format("unreadable prediction: {}", e.what());
  }
}

// Removes a folder when the sweep ends, by return or by exception.
struct RemoveOnExit {
  fs::path dir;
  ~RemoveOnExit() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

}  // namespace

std::string run_settings_digest(const Scenario& s, const Library& lib, const std::string& build) {
  std::string text = fmt::format("{}\n-- build: {}\n-- fields:", s.text, build);
  const PointConfig& b = s.base;
  const auto opt = [](const auto& v) { return v ? fmt::format("{}", *v) : std::string("-"); };
  text += fmt::format(" {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", opt(b.hardware), opt(b.model),
                      opt(b.strategy), opt(b.devices), opt(b.nodes), opt(b.gpus), opt(b.batch), opt(b.batch_per_device),
                      static_cast<int>(b.dtype), b.precision ? static_cast<int>(*b.precision) : -1,
                      static_cast<int>(b.memory_format), b.inputs_resident, b.accumulate, opt(b.global_batch),
                      static_cast<int>(b.comm_hook.kind), b.comm_hook.powersgd_rank, b.checkpoint_layers,
                      b.bucket_cap_mb, static_cast<int>(b.optimizer), b.overrides.size());
  for (const auto& o : b.overrides) text += fmt::format("\n-- override {}={}", o.path, YAML::Dump(o.value));
  std::set<std::string> hardware;
  if (b.hardware) hardware.insert(*b.hardware);
  for (const auto& axis : s.sweep) {
    text += fmt::format("\n-- axis {}:", axis.name);
    for (const auto& v : axis.values) text += fmt::format(" {}", YAML::Dump(v));
    if (axis.name == "hardware")
      for (const auto& v : axis.values)
        if (v.IsScalar()) hardware.insert(v.as<std::string>());
  }
  for (const auto& h : hardware) {
    try {
      text += fmt::format("\n-- hardware {}:\n{}", h, sim::hardware_yaml(load_hardware_with_overrides(h, {}, lib, s.dir, "")));
    } catch (const std::exception& e) {  // a point that cannot load it says so; the digest notes it
      text += fmt::format("\n-- hardware {}: {}", h, e.what());
    }
  }
  return text_digest(text);
}

std::string override_description(const Override& o) { return fmt::format("{} = {}", o.path, YAML::Dump(o.value)); }

std::vector<std::string> override_descriptions(const Scenario& s) {
  std::vector<std::string> out;
  for (const auto& o : s.base.overrides) out.push_back(override_description(o));
  for (const auto& a : s.sweep)
    if (a.name.rfind("overrides.", 0) == 0) {
      std::string values;
      for (const auto& v : a.values) values += (values.empty() ? "" : ", ") + YAML::Dump(v);
      out.push_back(fmt::format("{} swept over {}", a.name.substr(10), values));
    }
  return out;
}

SweepResult run_sweep(const Scenario& s, const Library& lib, const PointRunner& runner, const SweepOptions& options) {
  if (options.jobs < 1) throw std::invalid_argument(fmt::format("--jobs {}: must be at least 1", options.jobs));
  SweepResult out;
  out.scenario_name = s.name;
  out.scenario_file = s.file;
  out.question = s.question;
  out.scenario_digest = text_digest(s.text);
  out.run_digest = run_settings_digest(s, lib, options.build);
  out.overrides = override_descriptions(s);
  out.target = s.target;
  out.shard_index = options.shard_index;
  out.shard_count = options.shard_count;
  out.total_points = sweep_point_count(s);

  std::deque<SweepJob> queue;
  std::map<size_t, PointResult> finished;
  resolve_shard(s, lib, options, out.total_points, queue, finished);
  if (!options.trace_dir.empty() && !queue.empty()) fs::create_directories(options.trace_dir);

  // A killed sweep's folder is removed by the next sweep (its pid is in the name).
  const fs::path tmp = make_run_temp_dir("dptwin-sweep");
  const RemoveOnExit cleanup{tmp};

  ProgressBar bar(options.progress, finished.size() + queue.size(), "points");
  for (size_t i = 0; i < finished.size(); ++i) bar.advance();
  using Clock = std::chrono::steady_clock;
  struct Running {
    SweepJob job;
    Clock::time_point start;
  };
  std::map<pid_t, Running> running;
  // SIGINT/SIGTERM stop the workers and throw Interrupted; `cleanup` removes `tmp`.
  sim::ChildProcessScope workers;
  while (!queue.empty() || !running.empty()) {
    workers.throw_if_stopped();
    while (!queue.empty() && static_cast<int>(running.size()) < options.jobs) {
      SweepJob job = std::move(queue.front());
      queue.pop_front();
      const fs::path result_file = tmp / fmt::format("{}.json", job.result.index);
      const pid_t pid = workers.fork_child();
      if (pid == 0) {
        // Child: predict, hand the result back in a file, and leave without running
        // the parent's exit handlers or flushing its buffers.
        const json result = run_point_in_child(runner, job.resolved, job.trace);
        std::ofstream(result_file) << result.dump();
        ::_exit(0);
      }
      running.emplace(pid, Running{std::move(job), Clock::now()});
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(fmt::format("waiting for sweep workers: {}", std::strerror(errno)));
    }
    workers.reaped(pid);
    auto it = running.find(pid);
    if (it == running.end()) continue;  // not one of ours (a gnuplot or other child)
    SweepJob job = std::move(it->second.job);
    job.result.wall_s = std::chrono::duration<double>(Clock::now() - it->second.start).count();
    running.erase(it);
    collect_worker_result(status, tmp / fmt::format("{}.json", job.result.index), job.result);
    finished[job.result.index] = std::move(job.result);
    bar.advance();
  }
  bar.finish();
  for (auto& [index, r] : finished) out.points.push_back(std::move(r));
  return out;
}

SweepResult merge_sweep_results(const std::vector<SweepResult>& shards) {
  if (shards.empty()) throw std::invalid_argument("merge: no sweep results given");
  const SweepResult& first = shards.front();
  SweepResult out = first;
  out.points.clear();
  out.shard_index = 0;
  out.shard_count = 1;
  std::set<int> seen_shards;
  std::map<size_t, PointResult> by_index;
  for (size_t i = 0; i < shards.size(); ++i) {
    const auto& s = shards[i];
    if (s.scenario_digest != first.scenario_digest || s.total_points != first.total_points)
      throw std::invalid_argument(fmt::format(
          "merge: result {} comes from scenario '{}' (digest {}), result 1 from '{}' (digest {}): not shards of one sweep",
          i + 1, s.scenario_name, s.scenario_digest, first.scenario_name, first.scenario_digest));
    if (!s.run_digest.empty() && !first.run_digest.empty() && s.run_digest != first.run_digest &&
        !fault_active(Fault::merge_ignores_run_settings))
      throw std::invalid_argument(fmt::format(
          "merge: result {} ran scenario '{}' with other settings than result 1 (run digest {} against {}: its "
          "command-line flags, a hardware file it names or the dptwin build differ): not shards of one sweep",
          i + 1, s.scenario_name, s.run_digest, first.run_digest));
    if (s.shard_count != first.shard_count)
      throw std::invalid_argument(fmt::format("merge: result {} is shard {}/{}, result 1 is of {} shards", i + 1,
                                              s.shard_index, s.shard_count, first.shard_count));
    if (!seen_shards.insert(s.shard_index).second)
      throw std::invalid_argument(fmt::format("merge: shard {}/{} given twice", s.shard_index, s.shard_count));
    for (const auto& p : s.points) {
      if (static_cast<int>(p.index % static_cast<size_t>(s.shard_count)) != s.shard_index)
        throw std::invalid_argument(fmt::format("merge: shard {}/{} holds point {}, which belongs to shard {}",
                                                s.shard_index, s.shard_count, p.index, p.index % s.shard_count));
      if (!by_index.emplace(p.index, p).second)
        throw std::invalid_argument(fmt::format("merge: point {} is listed twice (in shard {}/{})", p.index,
                                                s.shard_index, s.shard_count));
    }
  }
  std::vector<std::string> missing;
  for (int i = 0; i < first.shard_count; ++i)
    if (!seen_shards.count(i)) missing.push_back(fmt::format("{}/{}", i, first.shard_count));
  if (!missing.empty())
    throw std::invalid_argument(fmt::format("merge: shard{} {} missing", missing.size() == 1 ? "" : "s",
                                            fmt::join(missing, ", ")));
  if (by_index.size() != first.total_points)
    throw std::invalid_argument(fmt::format("merge: the shards hold {} of the sweep's {} points", by_index.size(),
                                            first.total_points));
  for (auto& [i, p] : by_index) out.points.push_back(std::move(p));
  return out;
}

}  // namespace dpt::scenario
