// Flags shared by the what-if commands (predict, sweep, report, plan, compare):
// the scenario fields as flags (which override the file, sweep axes included),
// the library location, and the job count. One table per flag: CLI11 builds
// the help from the same definitions the parser uses.
#pragma once
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "scenarios/cli/cli_docs.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "scenarios/cli/flag_limits.hpp"
#include "scenarios/cli/library_dir.hpp"
#include "scenarios/scenario/model_hf_config.hpp"
#include "scenarios/scenario/model_library_yaml.hpp"
#include "scenarios/scenario/scenario.hpp"

namespace dpt::cli::whatif {

// The scenario library (library_dir.hpp says where it is looked for).
inline scenario::Library library() { return scenario::Library::at(scenarios_dir()); }

// The CPUs this process may run on (sched_getaffinity: taskset, a Slurm job's
// --cpus-per-task, docker --cpuset-cpus), not every CPU of the machine: on a large node
// with a small allocation, one worker per machine CPU oversubscribed the allocation.
inline int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

inline int default_jobs() { return usable_cpus(); }

inline bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

struct PointFlags {
  std::optional<std::string> hardware, model, strategy, dtype, precision, memory_format, inputs, optimizer, comm_hook,
      checkpoint, optimizer_impl;
  std::optional<int> devices, nodes, gpus, accumulate;
  std::optional<long long> batch, batch_per_device, global_batch;
  std::optional<double> bucket_cap_mb;
  std::vector<std::string> overrides;  // PATH=VALUE
};

inline void add_point_flags(CLI::App* app, PointFlags& f) {
  const char* g = "Scenario fields (override the file and its sweep axes)";
  app->add_option("--hardware", f.hardware, "hardware name (dptwin hardware list: the library and the fidelity table's machines) or YAML path")->group(g);
  app->add_option("--model", f.model, "model library name, YAML path, mlp:IN-H-...-OUT, transformer:..., or hf:PATH/config.json[:seq=N][:attn=eager|sdpa] (dptwin model list)")->group(g);
  with_choices(app->add_option("--strategy", f.strategy, "single | dp | ddp"), {"single", "dp", "ddp"})->group(g);
  app->add_option("--devices", f.devices, "GPUs per node")->group(g);
  app->add_option("--nodes", f.nodes, "nodes")->group(g);
  app->add_option("--gpus", f.gpus, "GPUs in all, filling whole nodes (instead of --devices/--nodes)")->group(g);
  app->add_option("--batch", f.batch, "global batch of one step (as a DataParallel script writes it)")->group(g);
  app->add_option("--batch-per-device", f.batch_per_device, "per-GPU batch (as a DDP script writes it)")->group(g);
  with_choices(app->add_option("--dtype", f.dtype, "f32 | f64"), {"f32", "f64"})->group(g);
  with_choices(app->add_option("--precision", f.precision,
                  "f32 (PyTorch defaults: TF32 convolutions on Ampere+) | tf32 | bf16-amp | f16-amp | bf16 | f16-master | f64"),
               {"f32", "tf32", "bf16-amp", "f16-amp", "bf16", "f16-master", "f64"})
      ->group(g);
  with_choices(app->add_option("--memory-format", f.memory_format,
                               "contiguous (PyTorch's default, NCHW) | channels_last "
                               "(model.to(memory_format=torch.channels_last))"),
               {"contiguous", "channels_last"})
      ->group(g);
  with_choices(app->add_option("--inputs", f.inputs,
                               "host (default: each step copies its batch to the GPUs, x.to(device)) | device (the "
                               "batch stays on the GPUs: a synthetic benchmark's on-GPU batch, DALI)"),
               {"host", "device"})
      ->group(g);
  app->add_option("--accumulate", f.accumulate, "DDP gradient accumulation: K micro-batches per step (no_sync for K-1)")
      ->group(g);
  app->add_option("--global-batch", f.global_batch,
                  "DDP: reach this global batch by accumulation, K = global / (batch-per-device x GPUs)")
      ->group(g);
  // Completion offers the named values (N and powersgd's rank are typed).
  with_choices(app->add_option("--checkpoint", f.checkpoint,
                               "activation checkpointing: none | every (each layer) | N (layers per segment)"),
               {"none", "every"})
      ->group(g);
  with_choices(app->add_option("--comm-hook", f.comm_hook,
                               "DDP comm hook: none | fp16_compress | bf16_compress | powersgd[:R]"),
               {"none", "fp16_compress", "bf16_compress", "powersgd"})
      ->group(g);
  app->add_option("--bucket-cap-mb", f.bucket_cap_mb, "DDP bucket size in MiB (PyTorch's default 25)")->group(g);
  with_choices(app->add_option("--optimizer", f.optimizer, "sgd | sgd_momentum | adamw"), {"sgd", "sgd_momentum", "adamw"})
      ->group(g);
  with_choices(app->add_option("--optimizer-impl", f.optimizer_impl,
                               "the optimizer's kernels as PyTorch runs them: foreach (default: torch.optim on CUDA "
                               "since 2.0) | for_loop (before 2.0, hand-written loops such as BertAdam) | fused "
                               "(fused=True, apex FusedAdam)"),
               {"foreach", "for_loop", "fused"})
      ->group(g);
  app->add_option("--override", f.overrides, "hardware field PATH=VALUE, e.g. --override 'gpu.memory=40 GiB'")->group(g);
}

namespace detail {
// A flag fixes the field: it replaces the file's value and any sweep axis over it.
// The value goes into the scenario as its type (no text round trip), through the
// checks the file's keys get.
inline void set_flag(scenario::Scenario& s, const std::string& field, const scenario::PointValue& value,
                     const std::string& flag) {
  std::erase_if(s.sweep, [&](const scenario::SweepAxis& a) { return a.name == field; });
  scenario::set_point_value(s.base, field, value, flag + ": ");
}
inline void clear_field(scenario::Scenario& s, const std::string& field) {
  std::erase_if(s.sweep, [&](const scenario::SweepAxis& a) { return a.name == field; });
  s.base.where.erase(field);
  if (field == "batch") s.base.batch.reset();
  if (field == "batch_per_device") s.base.batch_per_device.reset();
  if (field == "gpus") s.base.gpus.reset();
  if (field == "devices") s.base.devices.reset();
  if (field == "nodes") s.base.nodes.reset();
}
// A file path given as a flag is relative to the working directory, as a shell user
// means it (a scenario file's own paths are relative to its folder): made absolute here,
// before the scenario's folder could take it. Library names, mlp: and transformer: specs
// are kept; hf: keeps its prefix and any :seq= suffix.
inline std::string flag_path_from_cwd(const std::string& value) {
  namespace fs = std::filesystem;
  if (value.rfind("mlp:", 0) == 0 || value.rfind("transformer:", 0) == 0) return value;
  const std::string prefix = value.rfind("hf:", 0) == 0 ? "hf:" : "";
  const std::string path = value.substr(prefix.size());
  const bool is_path = path.find('/') != std::string::npos || fs::path(path).extension() == ".yaml";
  if (!is_path || path.empty() || fs::path(path).is_absolute()) return value;
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  return ec ? value : prefix + abs.lexically_normal().string();
}
// Flags that contradict each other are refused, as the same keys in a file are.
inline void check_flag_conflicts(const PointFlags& f) {
  if (f.gpus && (f.devices || f.nodes))
    throw std::invalid_argument(fmt::format("--gpus {}{}{}: give --gpus (total) or --devices and --nodes, not both",
                                            *f.gpus, f.devices ? fmt::format(" --devices {}", *f.devices) : "",
                                            f.nodes ? fmt::format(" --nodes {}", *f.nodes) : ""));
  if (f.batch && f.batch_per_device)
    throw std::invalid_argument(fmt::format("--batch {} --batch-per-device {}: give --batch (global) or "
                                            "--batch-per-device, not both",
                                            *f.batch, *f.batch_per_device));
}
}  // namespace detail

// Applies the flags to a scenario and re-checks its cross-field rules.
inline void apply_point_flags(scenario::Scenario& s, const PointFlags& f) {
  using detail::clear_field;
  using detail::set_flag;
  using I = std::int64_t;
  detail::check_flag_conflicts(f);
  // Paths in flags are the working directory's; only a scenario file in another folder
  // would read them otherwise.
  std::error_code ec;
  const bool elsewhere = std::filesystem::weakly_canonical(s.dir.empty() ? "." : s.dir, ec) !=
                         std::filesystem::current_path(ec);
  const auto flag_path = [&](const std::string& v) { return elsewhere ? detail::flag_path_from_cwd(v) : v; };
  if (f.hardware) set_flag(s, "hardware", flag_path(*f.hardware), "--hardware");
  if (f.model) set_flag(s, "model", flag_path(*f.model), "--model");
  if (f.strategy) set_flag(s, "strategy", *f.strategy, "--strategy");
  if (f.gpus) {
    clear_field(s, "devices");
    clear_field(s, "nodes");
    set_flag(s, "gpus", I{*f.gpus}, "--gpus");
  }
  if (f.devices || f.nodes) clear_field(s, "gpus");
  if (f.devices) set_flag(s, "devices", I{*f.devices}, "--devices");
  if (f.nodes) set_flag(s, "nodes", I{*f.nodes}, "--nodes");
  if (f.batch) {
    clear_field(s, "batch_per_device");
    set_flag(s, "batch", I{*f.batch}, "--batch");
  }
  if (f.batch_per_device) {
    clear_field(s, "batch");
    set_flag(s, "batch_per_device", I{*f.batch_per_device}, "--batch-per-device");
  }
  if (f.dtype) set_flag(s, "dtype", *f.dtype, "--dtype");
  if (f.precision) set_flag(s, "precision", *f.precision, "--precision");
  if (f.memory_format) set_flag(s, "memory_format", *f.memory_format, "--memory-format");
  if (f.inputs) set_flag(s, "inputs", *f.inputs, "--inputs");
  if (f.accumulate) set_flag(s, "accumulate", I{*f.accumulate}, "--accumulate");
  if (f.global_batch) set_flag(s, "global_batch", I{*f.global_batch}, "--global-batch");
  if (f.comm_hook) set_flag(s, "comm_hook", *f.comm_hook, "--comm-hook");
  if (f.checkpoint) set_flag(s, "checkpoint", *f.checkpoint, "--checkpoint");
  if (f.bucket_cap_mb) set_flag(s, "bucket_cap_mb", *f.bucket_cap_mb, "--bucket-cap-mb");
  if (f.optimizer) set_flag(s, "optimizer", *f.optimizer, "--optimizer");
  if (f.optimizer_impl) set_flag(s, "optimizer_impl", *f.optimizer_impl, "--optimizer-impl");
  for (const auto& o : f.overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == o.size())
      throw std::invalid_argument(fmt::format("--override {}: expected PATH=VALUE, e.g. --override 'gpu.memory=40 GiB'", o));
    // The value is text as the user wrote it (it may carry a unit): the hardware parser reads it.
    const std::string path = o.substr(0, eq);
    set_flag(s, "overrides." + path, o.substr(eq + 1), "--override " + path);
  }
  scenario::check_scenario_fields(s);
}

// A scenario from flags alone (no file).
// The files a scenario reads: the scenario itself, and every hardware and model file that
// its fields and sweep axes name (resolved as the points resolve them), for
// limits::refuse_shared_files.
inline std::vector<limits::FileFlag> scenario_input_files(const scenario::Scenario& s) {
  namespace fs = std::filesystem;
  std::vector<limits::FileFlag> in{{"scenario file", s.file}};
  const auto hardware = [&](const std::string& v) {
    if (v.find('/') != std::string::npos || fs::path(v).extension() == ".yaml")
      in.push_back({"hardware file", fs::path(v).is_absolute() ? v : (s.dir / v).string()});
  };
  const auto model = [&](const std::string& v) {
    std::string path = model_relative_to(v, s.dir);
    if (path.rfind("hf:", 0) == 0) {
      try {
        path = parse_hf_reference(path.substr(3)).path.string();
      } catch (const std::invalid_argument&) {
        return;  // refused with its own message when the point resolves
      }
    }
    in.push_back({"model file", path});
  };
  if (s.base.hardware) hardware(*s.base.hardware);
  if (s.base.model) model(*s.base.model);
  for (const auto& axis : s.sweep)
    for (const auto& v : axis.values) {
      if (!v.IsScalar()) continue;
      if (axis.name == "hardware") hardware(v.Scalar());
      if (axis.name == "model") model(v.Scalar());
    }
  return in;
}

inline scenario::Scenario scenario_from_flags(const PointFlags& f, const std::string& name) {
  scenario::Scenario s;
  s.file = "<command line>";
  s.dir = ".";
  s.name = name;
  apply_point_flags(s, f);
  return s;
}

}  // namespace dpt::cli::whatif
