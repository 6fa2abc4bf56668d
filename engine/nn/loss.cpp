// MSE and softmax cross-entropy with PyTorch's mean and sum reductions.
#include "engine/nn/loss.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace dpt {

LossKind loss_kind_from_name(const std::string& name) {
  if (name == "mse") return LossKind::mse;
  if (name == "ce" || name == "cross_entropy") return LossKind::cross_entropy;
  throw std::invalid_argument(fmt::format("unknown loss '{}': expected mse or ce", name));
}

LossResult loss_forward_backward(LossKind kind, Reduction reduction, const Tensor& output, const Tensor& target,
                                 std::optional<double> divisor, double grad_scale) {
  if (!(grad_scale > 0) || !std::isfinite(grad_scale))
    throw std::invalid_argument(fmt::format("loss: the gradient scale must be positive and finite, got {}", grad_scale));
  // bf16/f16 outputs (pure bf16 training) only where nothing computes: the twin's shape-only mode.
  const bool storage_only = dtype_is_half(output.dtype()) && !output.device().computes();
  if (!dtype_is_floating(output.dtype()) && !storage_only)
    throw std::invalid_argument(fmt::format("loss: output needs a floating dtype, got {}", dtype_name(output.dtype())));
  if (&output.device() != &target.device())
    throw std::invalid_argument(fmt::format("loss: output on {} but target on {}", output.device().name(),
                                            target.device().name()));
  LossResult r;
  r.grad = Tensor::empty(output.device(), output.shape(), output.dtype(), MemoryCategory::activations);
  if (kind == LossKind::mse) {
    // nn.MSELoss: mean over every element, or their sum.
    const double d = divisor.value_or(reduction == Reduction::mean ? static_cast<double>(output.numel()) : 1.0);
    r.value = kernel_mse(output, target, d / grad_scale, &r.grad) / grad_scale;
  } else {
    // nn.CrossEntropyLoss with class indices: mean over the samples, or their sum.
    if (target.ndim() != 1)
      throw std::invalid_argument(fmt::format("cross-entropy: target must be [batch] int64 class labels, got {}",
                                              shape_to_string(target.shape())));
    const double d = divisor.value_or(reduction == Reduction::mean ? static_cast<double>(output.dim(0)) : 1.0);
    r.value = kernel_cross_entropy(output, target, d / grad_scale, &r.grad) / grad_scale;
  }
  return r;
}

}  // namespace dpt
