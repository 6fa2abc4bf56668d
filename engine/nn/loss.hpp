// Losses computed on the output device: MSE and softmax cross-entropy.
#pragma once
#include <optional>
#include <string>

#include "engine/core/kernels.hpp"
#include "engine/core/tensor.hpp"

namespace dpt {

enum class LossKind { mse, cross_entropy };
LossKind loss_kind_from_name(const std::string& name);  // "mse" | "ce"; throws naming the value

struct LossResult {
  double value = 0;   // the loss
  Tensor grad;        // dLoss/dOutput, same shape as the output
};

// Loss and its gradient. `divisor` overrides the reduction's divisor (mean: the
// number of samples for ce, elements for mse; sum: 1); DDP's weighted mode uses it.
// `grad_scale` multiplies the gradient only (a GradScaler's loss scale, a power of
// two): it divides the divisor, so no extra kernel runs, and the value is unscaled.
LossResult loss_forward_backward(LossKind kind, Reduction reduction, const Tensor& output, const Tensor& target,
                                 std::optional<double> divisor = std::nullopt, double grad_scale = 1.0);

}  // namespace dpt
