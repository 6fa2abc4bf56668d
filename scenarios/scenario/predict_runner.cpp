#include "scenarios/scenario/predict_runner.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include <fmt/format.h>

#include "engine/core/closest_name.hpp"
#include "engine/optim/master_weights.hpp"
#include "engine/optim/optim.hpp"
#include "scenarios/scenario/sweep.hpp"
#include "sim/collectives/nccl_model.hpp"
#include "sim/net/hardware.hpp"
#include "sim/twin/predict.hpp"

namespace dpt::scenario {

namespace {

// Module class names the cost model reads (cost_model.cpp, cost_layer.cpp) and the
// library's models use. A layer type part within a typo of one of them, and not one of
// them, is charged as a GEMM layer by its FLOPs: likely a misspelling that moves the layer
// to another op class (an outside-user review's "BottleNeck" ran ResNet-50 1.87x slower,
// silently). A real module of that name stays allowed; the warning says what it costs as.
const std::vector<std::string>& known_module_names() {
  static const std::vector<std::string> names = {
      "Bottleneck", "BasicBlock", "Conv1d", "Conv2d", "Conv3d", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "RMSNorm",
      "GroupNorm", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "Dropout", "Flatten", "Identity", "MaxPool2d",
      "AvgPool2d", "AdaptiveAvgPool2d", "Linear", "TiedLinear", "Embedding", "GPT2Block", "GPT2Embeddings",
      "BertLayer", "BertEmbeddings", "BertPooler", "BertOnlyMLMHead", "BertPreTrainingHeads", "LlamaDecoderLayer",
      "ViTLayer", "ViTEmbeddings", "MultiheadAttention"};
  return names;
}

std::vector<std::string> layer_type_warnings(const ModelDescription& m) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  const auto& known = known_module_names();
  for (const auto& l : m.layers) {
    std::string_view type = l.type;
    while (!type.empty()) {
      const size_t plus = type.find('+');
      const std::string part(type.substr(0, plus));
      type = plus == std::string_view::npos ? std::string_view() : type.substr(plus + 1);
      if (part.empty() || std::find(known.begin(), known.end(), part) != known.end() || !seen.insert(part).second)
        continue;
      std::optional<std::string> near = closest_name(part, known);
      for (const auto& k : known)  // "bottleneck": the same name but for its case
        if (!near && std::equal(part.begin(), part.end(), k.begin(), k.end(),
                                [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
          near = k;
      if (!near) continue;
      const OpClass c = layer_op_class(l);
      out.push_back(fmt::format("layer type '{}' ({} and every layer of that type) is no module dptwin knows; did you "
                                "mean '{}'? Such a layer is charged as {}",
                                part, l.name, *near,
                                c == OpClass::conv     ? "a convolution"
                                : c == OpClass::matmul ? "a GEMM layer by its FLOPs (op class gemm)"
                                                       : "memory-bound work"));
    }
    // A hand-written Linear whose FLOPs are below one row's: nn.Linear(in, out) does
    // 2 x in x out per row, plus out for the bias (an outside-user review wrote 8,192 for
    // Linear(10, 4096), whose one row is 86,016, and was told nothing).
    if (l.type == "Linear") {
      const auto w = std::find_if(l.parameters.begin(), l.parameters.end(),
                                  [](const ParameterDescription& p) { return p.name.ends_with("weight"); });
      const bool bias = std::any_of(l.parameters.begin(), l.parameters.end(),
                                    [](const ParameterDescription& p) { return p.name.ends_with("bias"); });
      if (w != l.parameters.end() && w->shape.size() == 2) {
        const double row = 2.0 * static_cast<double>(w->shape[0]) * static_cast<double>(w->shape[1]) +
                           (bias ? static_cast<double>(w->shape[0]) : 0.0);
        if (l.forward_flops_per_sample < 0.99 * row)
          out.push_back(fmt::format("layer '{}' (Linear, weight [{}, {}]) states forward_flops_per_sample {:g}, less "
                                    "than one row's 2 x {} x {}{} = {:g}: nn.Linear does 2 x in x out FLOPs per row "
                                    "(plus out for the bias), times the rows of a sample",
                                    l.name, w->shape[0], w->shape[1], l.forward_flops_per_sample, w->shape[1],
                                    w->shape[0], bias ? fmt::format(" + {}", w->shape[0]) : "", row));
        // Its output is `out` features per row, so a sample's are a multiple of out (an
        // outside-user review's weight [12, 64] with output_features 10 passed silently).
        if (w->shape[0] > 0 && l.output_features % w->shape[0] != 0)
          out.push_back(fmt::format("layer '{}' (Linear, weight [{}, {}]) states output_features {}, not a multiple of "
                                    "its {} output features per row: the next layer's input and this layer's "
                                    "activations are counted from it",
                                    l.name, w->shape[0], w->shape[1], l.output_features, w->shape[0]));
      }
    }
  }
  return out;
}

}  // namespace

StepReport predict_point_with(const ResolvedPoint& p, const std::string& trace_path, bool every_rank, bool link_usage) {
  PredictConfig c;
  c.symmetric_ranks = !every_rank;
  c.link_usage = link_usage;
  c.strategy = p.strategy;
  c.devices = p.world();
  c.nodes = p.nodes;
  // The batch as the scenario gave it: a global batch is chunked (DataParallel) or
  // split by the sampler (DDP); a per-device batch is what each rank takes.
  if (p.config.batch) c.batch_global = p.batch_global;
  else c.batch_per_device = p.batch_per_device;
  c.dtype = p.dtype;
  c.precision = p.precision;
  c.memory_format = p.memory_format;
  c.inputs_resident = p.inputs_resident;
  c.accumulate = p.accumulate;
  c.comm_hook = p.comm_hook;
  c.checkpoint_layers = static_cast<size_t>(p.config.checkpoint_layers);
  c.bucket_cap_mb = p.bucket_cap_mb;
  c.dp_loss_per_replica = p.dp_loss_per_replica;
  c.numeric = false;
  c.trace_path = trace_path;
  c.model_name = p.model.name;
  c.input_features = p.model.input_features;
  c.output_features = model_output_features(p.model);
  const OptimizerImpl impl = p.optimizer_impl;
  switch (p.optimizer) {
    case OptimizerKind::sgd:
      c.optimizer = [impl](std::vector<NamedParameter> params) { return make_sgd(std::move(params), SgdOptions{}, impl); };
      break;
    case OptimizerKind::sgd_momentum:
      c.optimizer = [impl](std::vector<NamedParameter> params) {
        SgdOptions o;
        o.momentum = 0.9;  // the torchvision ImageNet recipe's momentum
        return make_sgd(std::move(params), o, impl);
      };
      break;
    case OptimizerKind::adamw:
      c.optimizer = [impl](std::vector<NamedParameter> params) {
        return make_adamw(std::move(params), AdamWOptions{}, impl);
      };
      break;
  }
  // f16-amp: a GradScaler around it; f16-master: it steps f32 masters of the f16 weights.
  c.optimizer = optimizer_for_precision(c.optimizer, p.precision);
  // A profiled model's times were fitted to this GPU by resolve_point (measured_costs_note).
  const ModelDescription& model = p.model;
  const Precision precision = p.precision;
  const MemoryFormat memory_format = p.memory_format;
  StepReport r = predict_step(
      p.hardware,
      [model, precision, memory_format](Device& d) { return make_cost_only_model(model, d, precision, memory_format); },
      c);
  r.hardware = p.hardware_name;
  r.tokens_per_sample = tokens_per_sample_of(p.model);
  r.optimizer = optimizer_kind_name(p.optimizer);
  r.optimizer_impl = optimizer_impl_name(p.optimizer_impl);
  // A profiled model names the optimizer its step ran; a prediction with another (predict's
  // default is sgd) is said, so its optimizer figure is not read as the profile's (an
  // outside-user review's adamw profile ran sgd silently).
  if (p.model.measured && !p.model.measured->optimizer.empty() &&
      p.model.measured->optimizer != optimizer_kind_name(p.optimizer) &&
      !(p.model.measured->optimizer == "sgd" && p.optimizer == OptimizerKind::sgd_momentum))
    r.warnings.push_back(fmt::format("model {} was profiled stepping {}; this prediction steps {} (--optimizer {} "
                                     "matches the profile)",
                                     p.model.name, p.model.measured->optimizer, optimizer_kind_name(p.optimizer),
                                     p.model.measured->optimizer));
  r.hardware_overrides.emplace();
  for (const auto& o : p.config.overrides) r.hardware_overrides->push_back(override_description(o));
  // A step that ran out of memory before its optimizer.step() holds none of the optimizer's
  // state (PyTorch allocates it lazily, at the first step): say what would come on top, so
  // the breakdown is not read as the whole need (an outside-user review).
  if (r.out_of_memory && !r.out_of_memory->memory_breakdown_bytes.count("optimizer_state")) {
    const auto n = static_cast<Bytes>(model_parameter_count(p.model));
    const int k = optimizer_state_tensors(p.optimizer);
    // f16-master: f32 master weights, f32 master gradients and f32 state; else the state in
    // the parameters' dtype.
    const Bytes state = precision_uses_master_weights(p.precision)
                            ? n * dtype_size_bytes(DType::f32) * (2 + k)
                            : n * dtype_size_bytes(precision_parameter_dtype(p.precision)) * k;
    if (state > 0)
      r.out_of_memory->message += fmt::format(
          "; not yet allocated when it failed: {} {} of {} state per GPU, which the first optimizer step adds",
          fmt::format("{:.3f} GiB", static_cast<double>(state) / static_cast<double>(kGiB)),
          precision_uses_master_weights(p.precision) ? "(f32 master weights, master gradients and state)" : "more",
          optimizer_kind_name(p.optimizer));
  }
  if (!p.measured_costs_note.empty()) r.warnings.push_back(p.measured_costs_note);
  r.warnings.insert(r.warnings.end(), p.resolve_warnings.begin(), p.resolve_warnings.end());
  for (auto& w : layer_type_warnings(p.model)) r.warnings.push_back(std::move(w));
  // A Hugging Face config read without :seq=: its sample is the config's position count,
  // often far past what training runs (Llama 3's 131,072 tokens: an outside-user review's
  // 1B model ran out of memory and nothing named the length).
  if (p.model.name.rfind("hf:", 0) == 0 && p.model.name.find(":seq=") == std::string::npos)
    if (const auto tokens = tokens_per_sample_of(p.model); tokens && *tokens > 8192)
      r.warnings.push_back(fmt::format("{} runs samples of {:.0f} tokens, its config's position count "
                                       "(max_position_embeddings); name the sequence you train with {}:seq=N",
                                       p.model.name, *tokens, p.model.name));
  // A link made faster than NCCL's per-link figure for the GPU's compute capability: NCCL
  // plans its rings (channels, bandwidth) with its figure, and the twin's collectives run at
  // it, so only copies gain (an outside-user review: nvswitch.link_bandwidth 25 -> 100 GB/s
  // changed nothing and said nothing).
  for (const auto& o : p.config.overrides) {
    const bool nvswitch = o.path == "nvswitch.link_bandwidth", nvlink = o.path == "nvlink.link_bandwidth";
    if (!nvswitch && !nvlink) continue;
    const auto& hw = p.hardware;
    const BytesPerSecond link = nvswitch && hw.nvswitch ? hw.nvswitch->link_bandwidth
                                : nvlink && hw.nvlink   ? hw.nvlink->link_bandwidth
                                                        : 0.0;
    const int cc = sim::gpu_compute_capability_of(hw.gpu);
    const double nccl_gbs = sim::nccl_nvlink_link_bw_gbs(cc);
    if (link > nccl_gbs * 1e9)
      r.warnings.push_back(fmt::format(
          "{} {:g} GB/s is above NCCL's {:g} GB/s per link for compute capability {}.{} (src/graph/topo.h): NCCL "
          "plans and runs its collectives at its own figure, so only copies (DataParallel's scatter and gather, "
          "peer copies) use the faster link; a new NVLink generation comes with a new compute capability "
          "(gpu.compute_capability)",
          o.path, link / 1e9, nccl_gbs, cc / 10, cc % 10));
  }
  // channels_last only changes convolutions: on a model without any, say so rather than
  // print "Tensor Core convolutions run NHWC" as if it did something.
  if (p.memory_format == MemoryFormat::channels_last &&
      std::none_of(p.model.layers.begin(), p.model.layers.end(),
                   [](const LayerDescription& l) { return layer_op_class(l) == OpClass::conv; }))
    r.warnings.push_back(fmt::format("memory format channels_last changes nothing here: {} has no convolutions",
                                     p.model.name));
  return r;
}

StepReport out_of_memory_before_step(const Scenario& s, const ModelDoesNotFit& e) {
  StepReport r;
  r.backend = "sim";
  r.hardware = s.base.hardware.value_or("");
  r.model = s.base.model.value_or("");
  r.strategy = s.base.strategy.value_or("");
  r.devices = s.base.gpus.value_or(s.base.devices.value_or(1) * s.base.nodes.value_or(1));
  if (const ResolvedPoint* p = e.point()) {
    r.hardware = p->hardware_name;
    r.model = p->model.name;
    r.strategy = strategy_kind_name(p->strategy);
    r.devices = p->devices;
    r.nodes = p->nodes;
    r.dtype = std::string(dtype_name(p->dtype));
    r.precision = std::string(precision_name(p->precision));
    r.batch_global = p->batch_global * p->accumulate;
    r.batch_per_device = p->batch_per_device;
    if (p->accumulate > 1) r.accumulate = p->accumulate;
    r.tokens_per_sample = tokens_per_sample_of(p->model);
    r.optimizer = optimizer_kind_name(p->optimizer);
    r.optimizer_impl = optimizer_impl_name(p->optimizer_impl);
  }
  r.out_of_memory = OutOfMemoryReport{"every GPU", e.reason(), 0, {}, std::nullopt};
  return r;
}

std::optional<double> tokens_per_sample_of(const ModelDescription& model) { return model.tokens_per_sample; }

StepReport predict_point(const ResolvedPoint& p, const std::string& trace_path) {
  return predict_point_with(p, trace_path, false, true);
}
StepReport predict_point_every_rank(const ResolvedPoint& p, const std::string& trace_path) {
  return predict_point_with(p, trace_path, true, true);
}

}  // namespace dpt::scenario
