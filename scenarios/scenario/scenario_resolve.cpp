// Resolving a scenario point against the library: hardware (with overrides and
// the node count), model, devices, batch both ways, and the memory lower bound.
#include <filesystem>

#include <fmt/format.h>

#include "scenarios/scenario/model_library_yaml.hpp"
#include "scenarios/report/report_format.hpp"
#include "scenarios/scenario/scenario.hpp"
#include "scenarios/scenario/measured_scaling.hpp"
#include "sim/net/hardware.hpp"

namespace dpt::scenario {
namespace {

[[noreturn]] void infeasible(const std::string& where, const std::string& what) { throw InfeasiblePoint(where, what); }

// "FILE:LINE: field: " for a field of the point (or "FILE: field: " when the
// scenario does not set it), the prefix of every error about it.
struct PointWhere {
  const Scenario& s;
  const PointConfig& c;
  std::string operator()(const std::string& field) const {
    auto it = c.where.find(field);
    return it != c.where.end() ? it->second : fmt::format("{}: {}: ", s.file, field);
  }
};

// The model, a relative model file (FILE.yaml, or hf:PATH's config.json) relative to
// the scenario's directory.
ModelDescription load_point_model(const Scenario& s, const PointConfig& c, const Library& lib, const PointWhere& where) {
  try {
    return load_model(model_relative_to(c.model.value(), s.dir), lib.models_dir);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where("model") + e.what());
  }
}

// Precision and dtype, and the DDP-only options (bucket size, accumulation, comm
// hook, global batch), each refused for a strategy that lacks it.
void resolve_training(const PointConfig& c, const Library& lib, const PointWhere& where, ResolvedPoint& r) {
  // dtype names the parameters' dtype; a precision that stores them otherwise contradicts it.
  r.precision = c.precision.value_or(precision_of_dtype(c.dtype));
  r.dtype = precision_parameter_dtype(r.precision);
  r.memory_format = c.memory_format;
  r.inputs_resident = c.inputs_resident;
  // A profiled model's measured times: as measured on that GPU kind, scaled by op class to another.
  r.measured_costs_note = resolve_measured_costs(r.model, r.hardware, r.precision, lib.hardware_dir);
  // PyTorch runs scaled_dot_product_attention in f64 in its math backend, eager's s x s
  // tensors and all: a model built with the fused kernel does not describe that step.
  if (r.precision == Precision::f64)
    for (const auto& l : r.model.layers)
      if (l.sdpa)
        infeasible(where("precision"),
                   fmt::format("model {} runs fused attention (sdpa), which PyTorch does not in f64 (it takes its "
                               "math backend there, eager attention's s x s tensors and all); give the model eager "
                               "attention (hf:...:attn=eager, or a transformer: spec without attn=sdpa)",
                               r.model.name));
  // transformers' flash_attention_2 runs the flash-attn package's kernels: float16 and
  // bfloat16 only (transformers refuses a float32 model with it), Ampere and later only.
  if (r.model.flash_attention_2) {
    const bool half =
        r.precision == Precision::f16_amp || r.precision == Precision::bf16_amp || r.precision == Precision::bf16 ||
        r.precision == Precision::f16_master;
    if (!half)
      infeasible(where("precision"),
                 fmt::format("model {} asks for attn_implementation flash_attention_2, which transformers runs only "
                             "in float16 or bfloat16 (the flash-attn kernels), not {}; train in bf16-amp or f16-amp, "
                             "or give the model sdpa (hf:...:attn=sdpa)",
                             r.model.name, precision_name(r.precision)));
    if (const int cc = sim::gpu_compute_capability_of(r.hardware.gpu); cc < 80)
      infeasible(where("hardware"),
                 fmt::format("model {} asks for attn_implementation flash_attention_2, whose kernels need an Ampere "
                             "or newer GPU; {} is compute capability {}.{}; give the model sdpa (hf:...:attn=sdpa)",
                             r.model.name, r.hardware.gpu.name, cc / 10, cc % 10));
  }
  // A precision given on the command line takes the place of a dtype that a file (or the
  // embedded default scenario) states: `sweep FILE --precision f16-master` over a file with
  // `dtype: f32` means the flag (found by an outside-user review: every shipped what-if file
  // refused the f16 precisions). Both from flags, or both from one file, must agree.
  auto from_flag = [&](const char* field) {
    const auto it = c.where.find(field);
    return it != c.where.end() && it->second.rfind("--", 0) == 0;
  };
  const bool flag_overrides_file = from_flag("precision") && !from_flag("dtype");
  if (c.precision && c.where.count("dtype") && r.dtype != c.dtype && !flag_overrides_file)
    throw std::invalid_argument(where("precision") + fmt::format("precision {} keeps parameters in {}, but dtype is {}",
                                                                 precision_name(r.precision), dtype_name(r.dtype),
                                                                 dtype_name(c.dtype)));
  r.bucket_cap_mb = c.bucket_cap_mb;
  r.accumulate = c.accumulate;
  if (r.accumulate > 1 && r.strategy != StrategyKind::ddp)
    throw std::invalid_argument(where("accumulate") + fmt::format("gradient accumulation (no_sync) needs strategy ddp, "
                                                                  "not {}",
                                                                  c.strategy.value()));
  r.comm_hook = c.comm_hook;
  if (r.comm_hook.kind != CommHook::none && r.strategy != StrategyKind::ddp)
    throw std::invalid_argument(where("comm_hook") + fmt::format("comm hook {} is DDP's (register_comm_hook): it needs "
                                                                 "strategy ddp, not {}",
                                                                 comm_hook_name(r.comm_hook), c.strategy.value()));
  if (c.global_batch && (c.where.count("accumulate") || c.batch))
    throw std::invalid_argument(where("global_batch") + "global_batch sets the accumulation from batch_per_device: "
                                                        "give neither accumulate nor batch with it");
  if (c.global_batch && r.strategy != StrategyKind::ddp)
    infeasible(where("global_batch"), fmt::format("global_batch is reached through DDP gradient accumulation "
                                                  "(no_sync), which strategy {} does not have",
                                                  c.strategy.value()));
  r.optimizer = c.optimizer;
  r.optimizer_impl = c.optimizer_impl;
}

// GPUs per node and nodes (from gpus, or devices and nodes), checked against the
// hardware and the strategy; the hardware is resized to that many nodes.
void resolve_gpu_count(const PointConfig& c, const PointWhere& where, ResolvedPoint& r) {
  const auto& hw = r.hardware;
  const int per_node = hw.gpus_per_node;
  if (c.gpus) {
    const int g = *c.gpus;
    if (g <= per_node) {
      r.devices = g;
      r.nodes = 1;
    } else {
      if (g % per_node != 0)
        infeasible(where("gpus"), fmt::format("{} GPUs do not fill whole nodes of {} on {}", g, per_node, r.hardware_name));
      r.devices = per_node;
      r.nodes = g / per_node;
    }
  } else {
    r.devices = c.devices.value_or(1);
    r.nodes = c.nodes.value_or(1);
    // Nodes without GPUs per node run one GPU per node, as documented: say so, since on a
    // cluster of 8-GPU nodes that is rarely meant (an outside-user review read 57 % scaling
    // efficiency for 4 GPUs over 4 nodes, asked as "--nodes 4").
    if (!c.devices && r.nodes > 1 && per_node > 1)
      r.resolve_warnings.push_back(fmt::format(
          "{} nodes of 1 GPU each: GPUs per node (devices, --devices) default to 1; devices: {} (or gpus: {}) fills "
          "the nodes of {}",
          r.nodes, per_node, r.nodes * per_node, r.hardware_name));
  }
  const std::string count_key = c.gpus ? "gpus" : "devices";
  if (r.devices > per_node)
    infeasible(where(count_key), fmt::format("{} GPUs per node, but {} has {}", r.devices, r.hardware_name, per_node));
  // A file with a network describes a cluster of identical nodes that may be resized
  // (its `nodes` is a default); one without is a single machine.
  if (r.nodes > hw.nodes && !hw.network)
    infeasible(where(c.gpus ? "gpus" : "nodes"),
               fmt::format("{} GPUs on {} nodes, but {} is one machine of {} GPU{} (no network section)", r.world(),
                           r.nodes, r.hardware_name, hw.gpu_count(), hw.gpu_count() == 1 ? "" : "s"));
  if (r.strategy == StrategyKind::single && r.world() > 1)
    infeasible(where("strategy"), fmt::format("single runs on one GPU, but {} are asked for", r.world()));
  if (r.strategy == StrategyKind::data_parallel && r.nodes > 1)
    infeasible(where("strategy"),
               fmt::format("DataParallel runs in one process on one node, but {} nodes are asked for", r.nodes));
  if (r.nodes != hw.nodes) {
    try {
      r.hardware = sim::with_nodes(hw, r.nodes);
    } catch (const std::invalid_argument& e) {
      infeasible(where(c.gpus ? "gpus" : "nodes"), e.what());
    }
  }
}

// The batch both ways (global and per device), and the accumulation a global_batch asks for.
void resolve_batch(const PointConfig& c, const PointWhere& where, ResolvedPoint& r) {
  if (c.batch) {
    r.batch_global = *c.batch;
    // torch.chunk and DistributedSampler both give ceil(B / N) to the first devices.
    r.batch_per_device = (r.batch_global + r.world() - 1) / r.world();
    // DDP splits the global batch with torch.chunk: chunks of ceil(B / N), so fewer than N
    // chunks when (N - 1) x ceil(B / N) >= B, and a rank without samples cannot run a step
    // (DataParallel just leaves those GPUs idle, as its scatter does).
    const std::int64_t chunks = (r.batch_global + r.batch_per_device - 1) / std::max<std::int64_t>(r.batch_per_device, 1);
    if (r.strategy == StrategyKind::ddp && (r.batch_global == 0 || chunks < r.world()))
      infeasible(where("batch"),
                 fmt::format("DDP splits a global batch of {} over {} ranks with torch.chunk into {} chunk(s) of up to "
                             "{}, leaving {} rank(s) without samples; use a batch that gives every rank at least one "
                             "(e.g. a multiple of {})",
                             r.batch_global, r.world(), chunks, r.batch_per_device, r.world() - chunks, r.world()));
  } else {
    r.batch_per_device = c.batch_per_device.value();
    r.batch_global = r.batch_per_device * r.world();
  }
  if (c.global_batch) {
    // K micro-batches of batch_per_device on every GPU make the global batch.
    if (*c.global_batch % r.batch_global != 0)
      infeasible(where("global_batch"),
                 fmt::format("a global batch of {} is not a whole number of micro-batches of {} x {} GPUs = {}",
                             *c.global_batch, r.batch_per_device, r.world(), r.batch_global));
    r.accumulate = static_cast<int>(*c.global_batch / r.batch_global);
  }
}

}  // namespace

ResolvedPoint resolve_point(const Scenario& s, const PointConfig& c, const Library& lib) {
  const PointWhere where{s, c};
  ResolvedPoint r;
  r.config = c;
  r.hardware_name = c.hardware.value();
  r.hardware = load_hardware_with_overrides(r.hardware_name, c.overrides, lib, s.dir, where("hardware"));
  r.model = load_point_model(s, c, lib, where);
  r.strategy = strategy_kind_from_name(c.strategy.value());
  resolve_training(c, lib, where, r);
  resolve_gpu_count(c, where, r);
  resolve_batch(c, where, r);

  const auto& hw = r.hardware;
  const Bytes param_bytes = model_parameter_count(r.model) * dtype_size_bytes(r.dtype);
  r.static_memory_bytes = param_bytes * (2 + optimizer_state_tensors(r.optimizer));
  // f16-master: the optimizer holds f32 master weights, f32 master gradients and f32 state.
  if (precision_uses_master_weights(r.precision))
    r.static_memory_bytes = param_bytes * 2 + model_parameter_count(r.model) * dtype_size_bytes(DType::f32) *
                                                  (2 + optimizer_state_tensors(r.optimizer));
  if (r.static_memory_bytes > hw.gpu.memory_bytes)
    throw ModelDoesNotFit(
        where("model"),
        fmt::format("{} does not fit: parameters, gradients and {} state need {} per GPU at {}, {} has {}", r.model.name,
                    optimizer_kind_name(r.optimizer), report::format_gib(r.static_memory_bytes), precision_name(r.precision),
                    hw.gpu.name, report::format_gib(hw.gpu.memory_bytes)),
        std::make_shared<const ResolvedPoint>(r));
  return r;
}

}  // namespace dpt::scenario
