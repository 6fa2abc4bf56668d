// nn.LayerNorm over the last dimension: per-row mean and reciprocal standard
// deviation are saved in forward so backward needs no second pass over statistics.
#include <fmt/format.h>

#include <stdexcept>

#include "engine/nn/layers.hpp"

namespace dpt {

LayerNorm::LayerNorm(Uninitialised, Device& device, std::int64_t features, DType dtype, double eps)
    : features_(features), eps_(eps) {
  if (features < 1)
    throw std::invalid_argument(fmt::format("LayerNorm({}): the normalised size must be at least 1", features));
  if (!(eps > 0))
    throw std::invalid_argument(fmt::format("LayerNorm({}): eps must be positive, got {}", features, eps));
  if (!dtype_is_floating(dtype))
    throw std::invalid_argument(fmt::format("LayerNorm: parameters need a floating dtype, got {}", dtype_name(dtype)));
  weight_ = make_parameter(device, "weight", {features}, dtype);
  bias_ = make_parameter(device, "bias", {features}, dtype);
}

LayerNorm::LayerNorm(Device& device, std::int64_t features, DType dtype, double eps)
    : LayerNorm(Uninitialised{}, device, features, dtype, eps) {
  kernel_fill(weight_.value, 1.0);
  kernel_fill(bias_.value, 0.0);
}

Tensor LayerNorm::forward(const Tensor& x) {
  if (x.ndim() < 1 || x.shape().back() != features_)
    throw std::invalid_argument(fmt::format("LayerNorm({}): input shape {} does not end in {}", features_,
                                            shape_to_string(x.shape()), features_));
  if (x.dtype() != weight_.value.dtype())
    throw std::invalid_argument(fmt::format("LayerNorm({}): input dtype {} differs from the weight's {}", features_,
                                            dtype_name(x.dtype()), dtype_name(weight_.value.dtype())));
  if (&x.device() != &weight_.value.device())
    throw std::invalid_argument(fmt::format("LayerNorm({}): input on {} but parameters on {}", features_,
                                            x.device().name(), weight_.value.device().name()));
  const std::int64_t rows = x.numel() / features_;
  // The kernels see [rows, features]; leading dimensions are flattened into rows.
  const Tensor x2 = x.reshape({rows, features_});
  Tensor y = Tensor::empty(x.device(), {rows, features_}, x.dtype(), MemoryCategory::activations);
  Tensor mean = Tensor::empty(x.device(), {rows}, x.dtype(), MemoryCategory::activations);
  Tensor rstd = Tensor::empty(x.device(), {rows}, x.dtype(), MemoryCategory::activations);
  kernel_layernorm_forward(eps_, x2, weight_.value, bias_.value, y, mean, rstd);
  saved_x_ = x2;
  saved_mean_ = mean;
  saved_rstd_ = rstd;
  return y.reshape(x.shape());
}

Tensor LayerNorm::backward(const Tensor& dy, bool need_input_grad) {
  if (!saved_x_.defined())
    throw std::logic_error(fmt::format("LayerNorm({}): backward without a saved forward", features_));
  if (dy.numel() != saved_x_.numel())
    throw std::invalid_argument(fmt::format("LayerNorm({}): gradient shape {} does not match the input's {}", features_,
                                            shape_to_string(dy.shape()), shape_to_string(saved_x_.shape())));
  // The kernel writes dx in the same call that accumulates the parameter gradients,
  // so dx is computed even when the caller does not need it (it is then dropped).
  Tensor dx = Tensor::empty(dy.device(), saved_x_.shape(), dy.dtype(), MemoryCategory::activations);
  kernel_layernorm_backward(saved_x_, weight_.value, saved_mean_, saved_rstd_, dy.reshape(saved_x_.shape()), dx,
                            weight_.grad, bias_.grad);
  if (!need_input_grad) return Tensor();
  return dx.reshape(dy.shape());
}

void LayerNorm::clear_saved() {
  saved_x_ = Tensor();
  saved_mean_ = Tensor();
  saved_rstd_ = Tensor();
}

std::unique_ptr<Layer> LayerNorm::replicate_on(Device& device) const {
  return std::unique_ptr<Layer>(new LayerNorm(Uninitialised{}, device, features_, weight_.value.dtype(), eps_));
}

Shape LayerNorm::output_shape(const Shape& input) const {
  if (input.empty() || input.back() != features_)
    throw std::invalid_argument(
        fmt::format("LayerNorm({}): input shape {} does not end in {}", features_, shape_to_string(input), features_));
  return input;
}

}  // namespace dpt
