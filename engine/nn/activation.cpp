// nn.ReLU and nn.GELU: element-wise, the input saved by handle for backward.
#include <stdexcept>

#include <fmt/format.h>

#include "engine/nn/layers.hpp"

namespace dpt {

Tensor ActivationLayer::forward(const Tensor& x) {
  if (!dtype_is_floating(x.dtype()))
    throw std::invalid_argument(fmt::format("{}: input needs a floating dtype, got {}", type_name(),
                                            dtype_name(x.dtype())));
  Tensor y = Tensor::empty(x.device(), x.shape(), x.dtype(), MemoryCategory::activations);
  kernel_activation_forward(kind_, x, y);
  saved_x_ = x;
  return y;
}

Tensor ActivationLayer::backward(const Tensor& dy, bool need_input_grad) {
  if (!saved_x_.defined()) throw std::logic_error(type_name() + ": backward without a saved forward");
  if (!need_input_grad) return Tensor();  // no parameters: nothing else to compute
  if (dy.shape() != saved_x_.shape())
    throw std::invalid_argument(fmt::format("{}: gradient shape {} differs from the input's {}", type_name(),
                                            shape_to_string(dy.shape()), shape_to_string(saved_x_.shape())));
  Tensor dx = Tensor::empty(dy.device(), dy.shape(), dy.dtype(), MemoryCategory::activations);
  kernel_activation_backward(kind_, saved_x_, dy, dx);
  return dx;
}

std::unique_ptr<Layer> ActivationLayer::replicate_on(Device&) const {
  return std::make_unique<ActivationLayer>(kind_);
}

}  // namespace dpt
