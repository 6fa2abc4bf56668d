// nn.Linear on the engine's kernels: one GEMM (+ bias) forward, two GEMMs (+ bias
// reduction) backward; the input is saved by handle for the weight gradient.
#include <stdexcept>

#include <fmt/format.h>

#include "engine/nn/layers.hpp"

namespace dpt {

Parameter make_parameter(Device& device, std::string name, const Shape& shape, DType dtype) {
  Parameter p;
  p.name = std::move(name);
  p.value = Tensor::empty(device, shape, dtype, MemoryCategory::parameters);
  p.grad = Tensor::zeros(device, shape, dtype, MemoryCategory::gradients);
  return p;
}

Linear::Linear(Uninitialised, Device& device, std::int64_t in_features, std::int64_t out_features, DType dtype,
               bool bias)
    : in_(in_features), out_(out_features), has_bias_(bias) {
  if (in_features < 0 || out_features < 0)
    throw std::invalid_argument(fmt::format("Linear({}, {}): feature counts must not be negative", in_features,
                                            out_features));
  if (!dtype_is_floating(dtype))
    throw std::invalid_argument(fmt::format("Linear: parameters need a floating dtype, got {}", dtype_name(dtype)));
  weight_ = make_parameter(device, "weight", {out_, in_}, dtype);
  if (has_bias_) bias_ = make_parameter(device, "bias", {out_}, dtype);
}

Linear::Linear(Device& device, std::int64_t in_features, std::int64_t out_features, DType dtype, Generator& gen,
               bool bias)
    : Linear(Uninitialised{}, device, in_features, out_features, dtype, bias) {
  init_linear(weight_.value, has_bias_ ? &bias_.value : nullptr, gen);
}

std::vector<Parameter*> Linear::parameters() {
  if (has_bias_) return {&weight_, &bias_};
  return {&weight_};
}

Tensor Linear::forward(const Tensor& x) {
  if (x.ndim() != 2 || x.dim(1) != in_)
    throw std::invalid_argument(fmt::format("Linear({}, {}): input must be [batch, {}], got {}", in_, out_, in_,
                                            shape_to_string(x.shape())));
  if (x.dtype() != weight_.value.dtype())
    throw std::invalid_argument(fmt::format("Linear({}, {}): input dtype {} differs from the weight's {}", in_, out_,
                                            dtype_name(x.dtype()), dtype_name(weight_.value.dtype())));
  if (&x.device() != &weight_.value.device())
    throw std::invalid_argument(fmt::format("Linear({}, {}): input on {} but parameters on {}", in_, out_,
                                            x.device().name(), weight_.value.device().name()));
  Tensor y = Tensor::empty(x.device(), {x.dim(0), out_}, x.dtype(), MemoryCategory::activations);
  if (autocast_) kernel_linear_forward_autocast(*autocast_, x, weight_.value, has_bias_ ? &bias_.value : nullptr, y);
  else kernel_linear_forward(x, weight_.value, has_bias_ ? &bias_.value : nullptr, y);
  saved_x_ = x;
  return y;
}

Tensor Linear::backward(const Tensor& dy, bool need_input_grad) {
  if (!saved_x_.defined())
    throw std::logic_error(fmt::format("Linear({}, {}): backward without a saved forward", in_, out_));
  Tensor dx;
  if (need_input_grad) dx = Tensor::empty(dy.device(), saved_x_.shape(), dy.dtype(), MemoryCategory::activations);
  if (autocast_)
    kernel_linear_backward_autocast(*autocast_, saved_x_, weight_.value, dy, need_input_grad ? &dx : nullptr,
                                    weight_.grad, has_bias_ ? &bias_.grad : nullptr);
  else
    kernel_linear_backward(saved_x_, weight_.value, dy, need_input_grad ? &dx : nullptr, weight_.grad,
                           has_bias_ ? &bias_.grad : nullptr);
  return dx;
}

void Linear::set_autocast(std::optional<DType> low) {
  if (low && *low != DType::bf16 && *low != DType::f16)
    throw std::invalid_argument(fmt::format("Linear({}, {}): autocast runs in bf16 or f16, got {}", in_, out_,
                                            dtype_name(*low)));
  if (low && weight_.value.dtype() != DType::f32)
    throw std::invalid_argument(fmt::format("Linear({}, {}): autocast needs f32 master weights, got {}", in_, out_,
                                            dtype_name(weight_.value.dtype())));
  autocast_ = low;
}

std::unique_ptr<Layer> Linear::replicate_on(Device& device) const {
  auto copy = std::unique_ptr<Linear>(new Linear(Uninitialised{}, device, in_, out_, weight_.value.dtype(), has_bias_));
  copy->autocast_ = autocast_;
  return copy;
}

Shape Linear::output_shape(const Shape& input) const {
  if (input.empty() || input.back() != in_)
    throw std::invalid_argument(fmt::format("Linear({}, {}): input shape {} does not end in {}", in_, out_,
                                            shape_to_string(input), in_));
  Shape out = input;
  out.back() = out_;
  return out;
}

}  // namespace dpt
