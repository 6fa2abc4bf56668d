#include "engine/nn/model_library.hpp"

#include <cctype>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/gpu_names.hpp"

namespace dpt {

Elements model_parameter_count(const ModelDescription& m) {
  Elements n = 0;
  for (const auto& l : m.layers)
    for (const auto& p : l.parameters) n += shape_numel(p.shape);
  return n;
}

double model_forward_flops_per_sample(const ModelDescription& m) {
  double f = 0;
  for (const auto& l : m.layers) f += l.forward_flops_per_sample;
  return f;
}

Elements model_activation_elements_per_sample(const ModelDescription& m) {
  Elements n = 0;
  for (const auto& l : m.layers) n += l.activation_elements_per_sample;
  return n;
}

std::int64_t model_output_features(const ModelDescription& m) {
  if (m.layers.empty()) throw std::invalid_argument(fmt::format("model {}: no layers", m.name));
  return m.layers.back().output_features;
}

void validate_model_description(const ModelDescription& m) {
  auto fail = [&](const std::string& where, const std::string& what) {
    throw std::invalid_argument(fmt::format("model {}: {}{}", m.name, where.empty() ? "" : where + ": ", what));
  };
  if (m.name.empty()) fail("", "empty name");
  if (m.input_features <= 0) fail("", fmt::format("input_features must be positive, got {}", m.input_features));
  if (m.layers.empty()) fail("", "no layers");
  std::set<std::string> layer_names;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    const std::string where = fmt::format("layer {} ({})", i, l.name);
    if (l.name.empty()) fail(where, "empty layer name");
    if (!layer_names.insert(l.name).second) fail(where, "duplicate layer name");
    if (l.type.empty()) fail(where, "empty type");
    if (!(l.forward_flops_per_sample >= 0)) fail(where, "forward_flops_per_sample must be >= 0");
    if (l.activation_elements_per_sample < 0) fail(where, "activation_elements_per_sample must be >= 0");
    if (l.activation_elements_per_sample > kMaxLayerActivationElements)
      fail(where, fmt::format("saves {} activation elements per sample, more than 10^13, the most dptwin models per "
                              "layer{}",
                              l.activation_elements_per_sample,
                              l.bmms.empty() ? ""
                                             : " (eager attention's s x s probabilities grow with the square of the "
                                               "sequence; :attn=sdpa or attn=sdpa saves none)"));
    if (l.output_features <= 0) fail(where, fmt::format("output_features must be positive, got {}", l.output_features));
    if (const auto& a = l.sdpa) {
      if (a->heads <= 0 || a->query_len <= 0 || a->key_len <= 0 || a->head_dim <= 0)
        fail(where, fmt::format("sdpa sizes must be positive, got heads {}, query_len {}, key_len {}, head_dim {}",
                                a->heads, a->query_len, a->key_len, a->head_dim));
      if (!l.bmms.empty()) fail(where, "a layer with a fused sdpa kernel has no eager bmms");
    }
    std::set<std::string> names;
    for (const auto& p : l.parameters) {
      if (p.name.empty()) fail(where, "parameter with an empty name");
      if (!names.insert(p.name).second) fail(where, fmt::format("duplicate parameter name '{}'", p.name));
      if (p.shape.empty()) fail(where, fmt::format("parameter '{}' has an empty shape", p.name));
      for (auto d : p.shape)
        if (d <= 0) fail(where, fmt::format("parameter '{}' has shape {}: dimensions must be positive", p.name,
                                            shape_to_string(p.shape)));
    }
  }
}

bool measured_on_gpu_kind(const MeasuredProfile& p, const std::string& gpu_model) {
  if (p.gpu_model) return *p.gpu_model == gpu_model;
  if (p.device_kind != "cuda" || gpu_model.empty()) return false;
  // The model, board and memory size as same_gpu_kind reads them: a profile of an "NVIDIA
  // GeForce RTX 3090" is not one of an RTX 4090 (the first word, "RTX", had matched every RTX
  // card: a code review), nor an "NVIDIA H100 PCIe" one of the SXM5 part.
  return same_gpu_kind(p.device, gpu_model);
}

std::string apply_measured_costs(ModelDescription& m, const std::string& gpu_model, const std::string& dtype) {
  if (!m.measured) return "";
  const MeasuredProfile& p = *m.measured;
  const std::string where = fmt::format("{} (torch {}, {}, batch {})", p.device, p.torch, p.dtype, p.batch);
  if (measured_on_gpu_kind(p, gpu_model) && p.dtype == dtype)
    return fmt::format("model {}: per-layer forward and backward times measured on {} used as measured on {}, "
                       "scaled linearly with the batch",
                       m.name, where, gpu_model);
  for (auto& l : m.layers) {
    l.measured_forward_s_per_sample.reset();
    l.measured_backward_s_per_sample.reset();
  }
  // How to make them apply: the profile names its device by the GPU model of the hardware
  // file it is for (dptwin_profile --gpu-model), in the dtype predicted (an outside-user
  // review profiled on the host and was not told --gpu-model host-cpu-1-thread fixes it).
  return fmt::format("model {}: measured on {}, predicted on {} in {}: the measured times do not apply (another "
                     "device kind or dtype); the layers cost their FLOPs and bytes on {}. To use them, profile "
                     "with `dptwin_profile --gpu-model {}`{}",
                     m.name, where, gpu_model, dtype, gpu_model, gpu_model,
                     p.dtype == dtype ? "" : fmt::format(", your model built in {}", dtype));
}

ModelDescription describe_mlp(const MlpSpec& spec) {
  if (spec.widths.size() < 2) throw std::invalid_argument("describe_mlp: an MLP needs at least two widths");
  ModelDescription m;
  m.name = "mlp:";
  for (size_t i = 0; i < spec.widths.size(); ++i) m.name += fmt::format("{}{}", i ? "-" : "", spec.widths[i]);
  m.sample = "one feature vector";
  m.input_features = spec.widths.front();
  m.sources = {"engine/nn/model.hpp make_mlp: nn.Sequential(Linear, [LayerNorm], activation, ..., Linear); FLOPs as "
               "engine/core/kernels.cpp states them"};
  // Layer indices follow make_mlp's registration, so names match Sequential's "i.weight".
  int index = 0;
  for (size_t i = 0; i + 1 < spec.widths.size(); ++i) {
    const std::int64_t in = spec.widths[i], out = spec.widths[i + 1];
    // Linear saves its input for the weight gradient; gemm 2 x in x out plus the bias add.
    m.layers.push_back({std::to_string(index++), "Linear", {{"weight", {out, in}}, {"bias", {out}}},
                        2.0 * static_cast<double>(in * out) + static_cast<double>(out), in, out});
    if (i + 2 == spec.widths.size()) break;
    if (spec.layernorm)  // saves its input and per-row mean and rstd; 8 FLOPs per element (kernels.cpp)
      m.layers.push_back({std::to_string(index++), "LayerNorm", {{"weight", {out}}, {"bias", {out}}},
                          8.0 * static_cast<double>(out), out + 2, out});
    const bool relu = spec.activation == Activation::relu;
    m.layers.push_back({std::to_string(index++), relu ? "ReLU" : "GELU", {},
                        (relu ? 1.0 : 12.0) * static_cast<double>(out), out, out});
  }
  return m;
}

}  // namespace dpt
