// Scenario files: the what-if questions dptwin answers, as YAML with a schema
// version, validated on load. A scenario names the hardware, the model, the
// strategy, the devices and nodes, the batch (global or per device), the dtype,
// DDP's bucket size, overrides of any hardware field, and sweep axes over any of
// these. Every error is std::invalid_argument "FILE:LINE: key: what".
//
//   schema_version: 1
//   name: resnet50-dgx                # optional; defaults to the file's stem
//   question: "How far does DDP scale ResNet-50 on a DGX A100?"   # optional
//   hardware: dgx-a100                # library name (scenarios/hardware/) or a path
//   model: resnet50                   # library name (scenarios/models/), a path, or mlp:IN-...-OUT
//   strategy: ddp                     # single | dp | ddp
//   devices: 8                        # GPUs per node (default 1)
//   nodes: 1                          # default 1
//   gpus: 64                          # alternative to devices/nodes: total GPUs, whole nodes
//   batch_per_device: 32              # or batch: 256 (the global batch of one step); not both
//   dtype: f32                        # f32 | f64
//   precision: bf16-amp               # f32 (PyTorch defaults) | tf32 | bf16-amp | f16-amp | bf16 | f16-master | f64
//   memory_format: channels_last      # contiguous (PyTorch's default, NCHW) | channels_last (NHWC)
//   inputs: device                    # host (each step copies its batch, x.to(device)) | device (resident: synthetic or DALI)
//   accumulate: 4                     # DDP gradient accumulation: micro-batches per step (default 1)
//   global_batch: 2048                # or: K = global_batch / (batch_per_device x GPUs), whole
//   checkpoint: every                 # activation checkpointing: none | every (each layer) | N (layers per segment)
//   comm_hook: fp16_compress          # DDP comm hook: none | fp16_compress | bf16_compress | powersgd[:R]
//   bucket_cap_mb: 25                 # DDP bucket size (PyTorch's default 25)
//   optimizer: sgd_momentum           # sgd | sgd_momentum | adamw
//   optimizer_impl: foreach           # foreach (PyTorch >= 2.0 default) | for_loop (before 2.0) | fused
//   overrides:                        # any hardware field by its dotted path
//     gpu.memory: 40 GiB
//     host.gil: false
//   target:                           # optional: what the answer is measured against
//     samples_per_s: 5000             # or: {samples: 1.28e9, within_hours: 24}
//   sweep:                            # optional: the cartesian product of these axes
//     hardware: [l40s-4x-pcie4, dgx-a100]
//     strategy: [dp, ddp]
//     devices: [1, 2, 4, 8]
//     overrides.nvlink.link_bandwidth: [25 GB/s, 50 GB/s]
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "engine/core/dtype.hpp"
#include "engine/nn/model_library.hpp"
#include "engine/optim/optim.hpp"
#include "engine/parallel/strategy.hpp"
#include "sim/net/hardware.hpp"

namespace dpt::scenario {

inline constexpr int kScenarioSchemaVersion = 1;

// Where the library lives: hardware/ and models/ below it (scenarios/ in the source tree).
struct Library {
  std::filesystem::path hardware_dir;
  std::filesystem::path models_dir;
  static Library at(const std::filesystem::path& scenarios_dir);
};

// The engine's optimizer names (engine/optim/optim.hpp).
using dpt::OptimizerKind;
using dpt::optimizer_kind_name;
using dpt::OptimizerImpl;
using dpt::optimizer_state_tensors;

// What a result is measured against: a throughput, or a number of samples to
// train within a time (which is the same thing as a throughput).
struct Target {
  std::optional<double> samples_per_s;
  std::optional<double> samples;
  std::optional<double> within_hours;
  // A target in tokens: predict, sweep, report and plan convert it to samples with the
  // model's tokens per sample (tokens_per_sample, or the model's "N-token" sample;
  // target_in_samples_for).
  std::optional<double> tokens_per_s;
  std::optional<double> tokens;
  std::optional<double> tokens_per_sample;  // given in the file, or set by the conversion
  bool in_tokens() const { return tokens_per_s.has_value() || tokens.has_value(); }
  // Throws std::invalid_argument for a target in tokens not yet converted.
  double required_samples_per_s() const;
  // "5,000 samples/s", "1.28e+09 samples in 24 h (14,800 samples/s)" or
  // "2,000,000 tokens/s (1,950 samples/s of 1,024 tokens)".
  std::string describe() const;
};
// The target with samples_per_s or samples set from its tokens.
Target target_in_samples(Target t, double tokens_per_sample);

// One hardware override: a dotted path into the hardware file and its new value.
struct Override {
  std::string path;   // "gpu.memory"
  YAML::Node value;   // as written (may carry units: "40 GiB")
  std::string where;  // "FILE:LINE: overrides.gpu.memory: "
};

// One configuration with every field fixed (a scenario without sweep, or one
// point of a sweep). `where` says, per field, where its value was written, so
// errors found when resolving it point at the right line.
struct PointConfig {
  std::optional<std::string> hardware;
  std::optional<std::string> model;
  std::optional<std::string> strategy;
  std::optional<int> devices;
  std::optional<int> nodes;
  std::optional<int> gpus;
  std::optional<std::int64_t> batch;
  std::optional<std::int64_t> batch_per_device;
  DType dtype = DType::f32;
  std::optional<Precision> precision;  // none: the dtype's (f32: PyTorch defaults)
  // model.to(memory_format=...): channels_last spares Tensor Core convolutions their transposes.
  MemoryFormat memory_format = MemoryFormat::contiguous;
  // Where the batch lives: host (the default: each step copies it, x.to(device) on a
  // DataLoader's batch) or device (resident across steps: a synthetic benchmark's on-GPU
  // batch, DALI's GPU pipeline), StrategyOptions::inputs_resident.
  bool inputs_resident = false;
  int accumulate = 1;  // DDP: micro-batches per optimizer step; the batch fields describe one
  // A fixed global batch reached through accumulation: K = global_batch / (batch_per_device
  // x GPUs) at each point (a sweep skips a point where that is not whole).
  std::optional<std::int64_t> global_batch;
  CommHookSpec comm_hook;  // DDP register_comm_hook
  int checkpoint_layers = 0;  // activation checkpointing: layers per segment (every: 1); 0: none
  double bucket_cap_mb = 25.0;
  OptimizerKind optimizer = OptimizerKind::sgd;
  // Its kernels as PyTorch runs them (OptimizerImpl): foreach, torch.optim's default on CUDA
  // since 2.0; for_loop before 2.0; fused for fused=True and apex.
  OptimizerImpl optimizer_impl = OptimizerImpl::foreach;
  std::vector<Override> overrides;
  std::map<std::string, std::string> where;  // field -> "FILE:LINE: key: "
};

struct SweepAxis {
  std::string name;                 // a field name or "overrides.<path>"
  std::vector<YAML::Node> values;   // as written
  std::vector<std::string> where;   // per value: "FILE:LINE: sweep.devices[2]: "
};

// Candidate hardware for `dptwin plan`, with an optional price.
struct PlanCandidate {
  std::string hardware;
  std::optional<double> price_per_gpu_hour;  // in the user's currency
  std::string where;
};

struct PlanSpec {
  std::vector<PlanCandidate> candidates;
  std::vector<std::string> strategies = {"dp", "ddp"};
  int max_gpus = 64;
  std::string currency;                  // "USD": printed with every price (empty: none given; see valid_currency_code)
  std::optional<double> train_samples;   // samples one training run needs (time to train, total cost)
  double tie_margin = 0.02;              // costs within this fraction of the cheapest are alternatives
  // The twin's predicted throughput must exceed the target by this fraction (0.3: 30 %),
  // for the twin's own error on the hardware (`dptwin fidelity --gpu NAME`); 0: none.
  double headroom = 0;
};

struct Scenario {
  std::string file;          // path loaded from, or a label ("<default>")
  std::filesystem::path dir; // relative hardware/model paths resolve against it
  std::string name;
  std::string question;
  PointConfig base;
  std::vector<SweepAxis> sweep;
  std::optional<Target> target;
  std::optional<PlanSpec> plan;
  std::string text;          // the YAML as read (its digest identifies sweep shards)
};

// Parses and validates the schema (types, known keys, value ranges). Library
// references are checked by validate_scenario, which needs the library.
Scenario parse_scenario(const std::string& text, const std::string& file_label,
                        const std::filesystem::path& dir = ".");
Scenario load_scenario_file(const std::filesystem::path& path);
// The cross-field rules (hardware, model and strategy given; batch or
// batch_per_device, not both; gpus or devices/nodes, not both). parse_scenario
// applies them; call again after changing fields (command-line flags).
void check_scenario_fields(const Scenario& s);

// A point resolved against the library: the hardware with overrides and node
// count applied, the model, and the batch both ways.
struct ResolvedPoint {
  PointConfig config;
  sim::HardwareSpec hardware;
  std::string hardware_name;   // as the scenario names it
  ModelDescription model;  // a profiled model's times already fit the hardware (resolve_measured_costs)
  std::string measured_costs_note;  // what was done with them; empty without a profile
  // Warnings about how the point was read (e.g. nodes given without GPUs per node), which
  // its step report carries.
  std::vector<std::string> resolve_warnings;
  StrategyKind strategy = StrategyKind::ddp;
  int devices = 1;             // GPUs used per node
  int nodes = 1;
  int world() const { return devices * nodes; }
  std::int64_t batch_global = 0;
  std::int64_t batch_per_device = 0;  // the largest per-device batch
  DType dtype = DType::f32;  // of parameters, gradients and optimizer state (precision_parameter_dtype)
  Precision precision = Precision::f32;
  MemoryFormat memory_format = MemoryFormat::contiguous;
  bool inputs_resident = false;  // PointConfig::inputs_resident
  int accumulate = 1;
  CommHookSpec comm_hook;
  double bucket_cap_mb = 25.0;
  OptimizerKind optimizer = OptimizerKind::sgd;
  OptimizerImpl optimizer_impl = OptimizerImpl::foreach;  // PointConfig::optimizer_impl
  // DataParallel: the module computes its loss in each replica (StrategyOptions::dp_loss_per_replica).
  bool dp_loss_per_replica = false;
  // Parameters, gradients and optimizer state on one GPU: a lower bound on its memory.
  Bytes static_memory_bytes = 0;
};

// A configuration the hardware cannot run (more GPUs than it has, DataParallel
// across nodes): a sweep records it as skipped; a single scenario fails with it.
class InfeasiblePoint : public std::invalid_argument {
 public:
  InfeasiblePoint(const std::string& where, const std::string& reason)
      : std::invalid_argument(where + reason), reason_(reason) {}
  const std::string& reason() const { return reason_; }  // without the location

 private:
  std::string reason_;
};
// The model's parameters, gradients and optimizer state alone exceed a GPU's memory.
class ModelDoesNotFit : public std::invalid_argument {
 public:
  ModelDoesNotFit(const std::string& where, const std::string& reason,
                  std::shared_ptr<const ResolvedPoint> point = nullptr)
      : std::invalid_argument(where + reason), reason_(reason), point_(std::move(point)) {}
  const std::string& reason() const { return reason_; }
  // The point as resolved up to the memory check (GPU counts, batches, precision), so the
  // result of a configuration that does not fit still says what it was; null if unknown.
  const ResolvedPoint* point() const { return point_.get(); }

 private:
  std::string reason_;
  std::shared_ptr<const ResolvedPoint> point_;
};

// Resolves one point. Throws InfeasiblePoint or ModelDoesNotFit (both
// std::invalid_argument with "FILE:LINE: key: what"), or std::invalid_argument
// for a bad reference or value.
ResolvedPoint resolve_point(const Scenario& s, const PointConfig& config, const Library& lib);

// Sets one field (a field name or "overrides.<path>") from a YAML value; used for
// the file's keys, sweep values and command-line overrides alike.
void set_point_field(PointConfig& c, const std::string& field, const YAML::Node& value, const std::string& where);
// One field's value, typed: command-line flags set fields with it directly, never
// printing a number back to text. set_point_field reads a YAML value into one of
// these and calls set_point_value, so a flag and a file key get the same checks
// and the same messages (after `where`: "--devices: " or "FILE:LINE: devices: ").
using PointValue = std::variant<std::string, std::int64_t, double>;
void set_point_value(PointConfig& c, const std::string& field, const PointValue& value, const std::string& where);
// The `inputs` field: "host" (false) or "device" (true, StrategyOptions::inputs_resident);
// anything else throws std::invalid_argument naming the value and both choices.
bool inputs_resident_from_name(const std::string& name);
// Field names a sweep may range over (besides overrides.<path>).
const std::vector<std::string>& sweepable_fields();

// The hardware spec with `overrides` applied; errors name the override's line.
sim::HardwareSpec load_hardware_with_overrides(const std::string& name_or_path, const std::vector<Override>& overrides,
                                               const Library& lib, const std::filesystem::path& dir,
                                               const std::string& where);

// A currency code as prices print it: 1 to 8 ASCII letters (ISO 4217's USD, EUR; "credits").
inline bool valid_currency_code(const std::string& c) {
  if (c.empty() || c.size() > 8) return false;
  for (const char ch : c)
    if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z'))) return false;
  return true;
}

}  // namespace dpt::scenario
