// The numeric layers: Linear, ReLU, GELU and LayerNorm, as PyTorch's nn modules.
// Every computation goes through the kernel_* functions (kernels.hpp), so each op
// states its cost and runs on the layer's device. Forward saves what backward
// needs (input, LayerNorm statistics) as handles to the tensors it already has,
// never as copies.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/nn/init.hpp"
#include "engine/core/kernels.hpp"
#include "engine/nn/layer.hpp"

namespace dpt {

// A parameter named `name` on `device`: the value uninitialised (MemoryCategory::parameters),
// the gradient zero-filled (MemoryCategory::gradients) so backward can accumulate into it.
Parameter make_parameter(Device& device, std::string name, const Shape& shape, DType dtype);

// nn.Linear(in_features, out_features, bias): y = x W^T + b, W [out, in].
class Linear : public Layer {
 public:
  // Parameters on `device`, initialised as PyTorch initialises nn.Linear from `gen`.
  Linear(Device& device, std::int64_t in_features, std::int64_t out_features, DType dtype, Generator& gen,
         bool bias = true);
  std::string type_name() const override { return "Linear"; }
  std::vector<Parameter*> parameters() override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy, bool need_input_grad) override;
  std::unique_ptr<Layer> replicate_on(Device& device) const override;
  void clear_saved() override { saved_x_ = Tensor(); }
  Shape output_shape(const Shape& input) const override;

  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }
  Parameter& weight() { return weight_; }
  Parameter& bias() { return bias_; }  // undefined tensors when built without bias
  // torch.autocast: forward and backward in bf16 or f16 with f32 accumulation on the
  // f32 parameters (kernel_linear_forward_autocast); nullopt runs in the parameters' dtype.
  void set_autocast(std::optional<DType> low);
  std::optional<DType> autocast() const { return autocast_; }

 private:
  struct Uninitialised {};
  Linear(Uninitialised, Device& device, std::int64_t in_features, std::int64_t out_features, DType dtype, bool bias);

  std::int64_t in_, out_;
  bool has_bias_;
  std::optional<DType> autocast_;
  Parameter weight_, bias_;
  Tensor saved_x_;
};

// nn.ReLU and nn.GELU (exact erf form, PyTorch's approximate='none').
class ActivationLayer : public Layer {
 public:
  explicit ActivationLayer(Activation kind) : kind_(kind) {}
  std::string type_name() const override { return kind_ == Activation::relu ? "ReLU" : "GELU"; }
  std::vector<Parameter*> parameters() override { return {}; }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy, bool need_input_grad) override;
  std::unique_ptr<Layer> replicate_on(Device& device) const override;
  void clear_saved() override { saved_x_ = Tensor(); }
  Shape output_shape(const Shape& input) const override { return input; }
  Activation kind() const { return kind_; }

 private:
  Activation kind_;
  Tensor saved_x_;
};

// nn.LayerNorm(features, eps=1e-5) over the last dimension, elementwise affine
// (weight 1, bias 0 at construction), biased variance as PyTorch.
class LayerNorm : public Layer {
 public:
  LayerNorm(Device& device, std::int64_t features, DType dtype, double eps = 1e-5);
  std::string type_name() const override { return "LayerNorm"; }
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy, bool need_input_grad) override;
  std::unique_ptr<Layer> replicate_on(Device& device) const override;
  void clear_saved() override;
  Shape output_shape(const Shape& input) const override;
  std::int64_t features() const { return features_; }
  double eps() const { return eps_; }
  Parameter& weight() { return weight_; }
  Parameter& bias() { return bias_; }

 private:
  struct Uninitialised {};
  LayerNorm(Uninitialised, Device& device, std::int64_t features, DType dtype, double eps);

  std::int64_t features_;
  double eps_;
  Parameter weight_, bias_;
  Tensor saved_x_, saved_mean_, saved_rstd_;
};

}  // namespace dpt
