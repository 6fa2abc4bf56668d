// Sequential model with PyTorch's parameter names ("0.weight", "0.bias", "2.weight"...).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/backend.hpp"
#include "engine/core/kernels.hpp"
#include "engine/nn/layer.hpp"

namespace dpt {

struct NamedParameter {
  std::string name;  // "0.weight"
  Parameter* param;
};

class Sequential {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::unique_ptr<Layer>> layers);
  Sequential(Sequential&&) = default;
  Sequential& operator=(Sequential&&) = default;

  void append(std::unique_ptr<Layer> layer);
  size_t size() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_.at(i); }
  Device& device() const;

  // In registration order: layer 0's parameters first, each layer's in its own order.
  std::vector<NamedParameter> named_parameters();
  Tensor forward(const Tensor& x);
  // Backpropagates dy through the layers in reverse. After each layer's backward,
  // on_grad_ready(i) is called for each of its parameters with i its index in
  // named_parameters() (DDP's Reducer hooks here). Returns dL/dx if requested.
  Tensor backward(const Tensor& dy, const std::function<void(size_t)>& on_grad_ready = {},
                  bool need_input_grad = false);
  void zero_grad();
  void clear_saved();
  // Activation checkpointing as torch.utils.checkpoint.checkpoint_sequential runs it:
  // the layers in segments of `segment_layers` (0: none); every segment but the last
  // keeps only its input after forward, and backward reruns the segment's forward
  // from that input before the segment's backward. Same gradients, less activation
  // memory, one more forward of the checkpointed segments.
  void set_checkpoint(size_t segment_layers) { checkpoint_layers_ = segment_layers; }
  size_t checkpoint_segment_layers() const { return checkpoint_layers_; }
  // torch.autocast(dtype=low) around forward and backward: every Linear runs in bf16
  // or f16 with f32 accumulation (Linear::set_autocast); the other layers stay f32,
  // as autocast's fp32 list keeps norms and losses. nullopt: no autocast.
  void set_autocast(std::optional<DType> low);
  // Same structure on another device, parameters allocated but not copied.
  Sequential replicate_on(Device& device) const;
  Shape output_shape(const Shape& input) const;
  Elements parameter_count();

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  size_t checkpoint_layers_ = 0;
  std::vector<Tensor> segment_inputs_;  // the checkpointed segments' inputs, from forward to backward
};

// "mlp:IN-H1-...-OUT": nn.Sequential(Linear, [LayerNorm], Act, Linear, ..., Linear).
struct MlpSpec {
  std::vector<std::int64_t> widths;  // IN, H1, ..., OUT (at least two)
  Activation activation = Activation::relu;
  bool layernorm = false;
};
// Parses "mlp:4-16-2"; throws std::invalid_argument naming the spec on error.
MlpSpec parse_mlp_spec(const std::string& spec);
// Builds the MLP on `device`, initialised as PyTorch initialises nn.Linear
// (kaiming_uniform(a=sqrt(5)) weights, bias uniform in +-1/sqrt(fan_in); LayerNorm
// weight 1, bias 0) from a deterministic generator seeded with `seed`.
Sequential make_mlp(const MlpSpec& spec, Device& device, DType dtype, std::uint64_t seed);
// The same on any of `backend`'s devices: where the CPU cannot write the device's memory
// (a GPU), the weights are drawn in host memory with the same generator and copied over
// (Backend::copy), so a model starts from the same numbers on every backend.
Sequential make_mlp(const MlpSpec& spec, Backend& backend, Device& device, DType dtype, std::uint64_t seed);

}  // namespace dpt
