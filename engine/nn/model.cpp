// Sequential and the MLP builder.
#include "engine/nn/model.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "engine/core/kernels.hpp"
#include "engine/nn/init.hpp"
#include "engine/nn/layers.hpp"

namespace dpt {

Sequential::Sequential(std::vector<std::unique_ptr<Layer>> layers) : layers_(std::move(layers)) {
  for (auto& l : layers_)
    if (!l) throw std::invalid_argument("Sequential: a layer is null");
}

void Sequential::append(std::unique_ptr<Layer> layer) {
  if (!layer) throw std::invalid_argument("Sequential::append: the layer is null");
  layers_.push_back(std::move(layer));
}

Device& Sequential::device() const {
  for (auto& l : layers_)
    for (Parameter* p : l->parameters()) return p->value.device();
  throw std::logic_error("Sequential::device: the model has no parameters, so no device");
}

std::vector<NamedParameter> Sequential::named_parameters() {
  std::vector<NamedParameter> out;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (Parameter* p : layers_[i]->parameters()) out.push_back({fmt::format("{}.{}", i, p->name), p});
  return out;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  if (checkpoint_layers_ == 0) {
    for (auto& l : layers_) h = l->forward(h);
    return h;
  }
  segment_inputs_.clear();
  const bool keep_all = fault_active(Fault::checkpoint_keeps_activations);  // planted fault
  const bool no_recompute = fault_active(Fault::checkpoint_no_recompute);  // planted fault
  for (size_t a = 0; a < layers_.size(); a += checkpoint_layers_) {
    const size_t b = std::min(a + checkpoint_layers_, layers_.size());
    const bool checkpointed = b < layers_.size();  // the last segment runs as usual
    if (checkpointed) {
      if (keep_all) {
        Tensor copy = Tensor::empty(h.device(), h.shape(), h.dtype(), MemoryCategory::activations);
        kernel_copy(h, copy);
        segment_inputs_.push_back(copy);
      } else {
        segment_inputs_.push_back(h);
      }
    }
    for (size_t i = a; i < b; ++i) h = layers_[i]->forward(h);
    // torch.utils.checkpoint runs the segment under no_grad: nothing saved for backward.
    if (checkpointed && !keep_all && !no_recompute)
      for (size_t i = a; i < b; ++i) layers_[i]->clear_saved();
  }
  return h;
}

Tensor Sequential::backward(const Tensor& dy, const std::function<void(size_t)>& on_grad_ready,
                            bool need_input_grad) {
  // Index of each layer's first parameter in named_parameters(), for the hook.
  std::vector<size_t> first_param(layers_.size() + 1, 0);
  for (size_t i = 0; i < layers_.size(); ++i) first_param[i + 1] = first_param[i] + layers_[i]->parameters().size();
  Tensor g = dy;
  const size_t seg = checkpoint_layers_ == 0 ? layers_.size() : checkpoint_layers_;
  const size_t segments = layers_.empty() ? 0 : (layers_.size() + seg - 1) / seg;
  for (size_t s = segments; s-- > 0;) {
    const size_t a = s * seg, b = std::min(a + seg, layers_.size());
    if (checkpoint_layers_ != 0 && s < segment_inputs_.size() && !fault_active(Fault::checkpoint_no_recompute)) {
      // Recompute: the segment's forward again, from its saved input.
      Tensor h = segment_inputs_[s];
      for (size_t i = a; i < b; ++i) h = layers_[i]->forward(h);
    }
    for (size_t i = b; i-- > a;) {
      g = layers_[i]->backward(g, i > 0 || need_input_grad);
      if (on_grad_ready)
        for (size_t j = first_param[i]; j < first_param[i + 1]; ++j) on_grad_ready(j);
    }
    if (s < segment_inputs_.size()) segment_inputs_[s] = Tensor();  // freed once its segment is done
  }
  segment_inputs_.clear();
  return need_input_grad ? g : Tensor();
}

void Sequential::zero_grad() {
  for (auto& l : layers_)
    for (Parameter* p : l->parameters()) kernel_fill(p->grad, 0.0);
}

void Sequential::clear_saved() {
  for (auto& l : layers_) l->clear_saved();
  segment_inputs_.clear();
}

void Sequential::set_autocast(std::optional<DType> low) {
  for (auto& l : layers_)
    if (auto* linear = dynamic_cast<Linear*>(l.get())) linear->set_autocast(low);
}

Sequential Sequential::replicate_on(Device& device) const {
  std::vector<std::unique_ptr<Layer>> copies;
  copies.reserve(layers_.size());
  for (auto& l : layers_) copies.push_back(l->replicate_on(device));
  Sequential out(std::move(copies));
  out.set_checkpoint(checkpoint_layers_);
  return out;
}

Shape Sequential::output_shape(const Shape& input) const {
  Shape s = input;
  for (auto& l : layers_) s = l->output_shape(s);
  return s;
}

Elements Sequential::parameter_count() {
  Elements n = 0;
  for (auto& l : layers_)
    for (Parameter* p : l->parameters()) n += p->value.numel();
  return n;
}

MlpSpec parse_mlp_spec(const std::string& spec) {
  const std::string prefix = "mlp:";
  if (spec.rfind(prefix, 0) != 0)
    throw std::invalid_argument(fmt::format("model spec '{}': expected mlp:IN-H1-...-OUT (e.g. mlp:4-16-2)", spec));
  MlpSpec out;
  const std::string body = spec.substr(prefix.size());
  size_t start = 0;
  while (true) {
    const size_t end = body.find('-', start);
    const std::string part = body.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::int64_t width = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), width);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || width < 1)
      throw std::invalid_argument(fmt::format("model spec '{}': width {} is '{}', not a positive integer", spec,
                                              out.widths.size() + 1, part));
    out.widths.push_back(width);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (out.widths.size() < 2)
    throw std::invalid_argument(
        fmt::format("model spec '{}': needs at least two widths, input and output (e.g. mlp:4-2)", spec));
  // A Linear's weight of in x out elements, counted in 64 bits, and the FLOPs built from it,
  // must not wrap: mlp:1-4294967296-4294967296-1 had 2^64 weights read as 0 and predicted a
  // step (an outside-user review). The model files' bound: 10^13 elements per tensor.
  constexpr std::int64_t kMaxWeightElements = 10'000'000'000'000;
  std::int64_t total = 0;
  for (size_t i = 0; i + 1 < out.widths.size(); ++i) {
    if (out.widths[i] > kMaxWeightElements / out.widths[i + 1])
      throw std::invalid_argument(fmt::format(
          "model spec '{}': Linear({}, {}) has {:.4g} weights, more than a tensor may hold here ({:.0e})", spec,
          out.widths[i], out.widths[i + 1], static_cast<double>(out.widths[i]) * static_cast<double>(out.widths[i + 1]),
          static_cast<double>(kMaxWeightElements)));
    total += out.widths[i] * out.widths[i + 1];
    if (total > kMaxWeightElements)
      throw std::invalid_argument(fmt::format("model spec '{}': more than {:.0e} weights in all", spec,
                                              static_cast<double>(kMaxWeightElements)));
  }
  return out;
}

Sequential make_mlp(const MlpSpec& spec, Device& device, DType dtype, std::uint64_t seed) {
  if (spec.widths.size() < 2)
    throw std::invalid_argument(fmt::format("make_mlp: needs at least two widths, got {}", spec.widths.size()));
  Generator gen(seed);
  Sequential model;
  for (size_t i = 0; i + 1 < spec.widths.size(); ++i) {
    model.append(std::make_unique<Linear>(device, spec.widths[i], spec.widths[i + 1], dtype, gen));
    if (i + 2 == spec.widths.size()) break;  // no normalisation or activation after the output layer
    if (spec.layernorm) model.append(std::make_unique<LayerNorm>(device, spec.widths[i + 1], dtype));
    model.append(std::make_unique<ActivationLayer>(spec.activation));
  }
  return model;
}

Sequential make_mlp(const MlpSpec& spec, Backend& backend, Device& device, DType dtype, std::uint64_t seed) {
  if (device.host_readable()) return make_mlp(spec, device, dtype, seed);
  Sequential on_host = make_mlp(spec, backend.host_memory(), dtype, seed);
  Sequential m = on_host.replicate_on(device);
  auto src = on_host.named_parameters(), dst = m.named_parameters();
  for (size_t i = 0; i < src.size(); ++i) backend.copy(src[i].param->value, dst[i].param->value);
  return m;
}

}  // namespace dpt
