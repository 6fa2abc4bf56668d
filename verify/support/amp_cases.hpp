// Shared by the AMP tests on the host (autocast_test) and on GPUs (cuda_amp_test):
// one training step's gradients with or without autocast, and the tolerance an
// autocast run keeps against the f32 run.
#pragma once
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include <rapidcheck.h>

#include "engine/core/half_round.hpp"
#include "engine/optim/grad_scaler.hpp"
#include "engine/parallel/strategy.hpp"
#include "scenarios/verify/mlp_cases.hpp"

namespace dpt::test {

// f32 MLP cases (autocast keeps f32 master weights): depth 1-3, widths 1-32, batch 1-16,
// GELU, no LayerNorm.
inline verify::MlpCase gen_amp_case() {
  verify::MlpCaseBounds bounds;
  bounds.max_batch = 16;
  bounds.max_devices = 1;
  bounds.max_width = 32;
  bounds.max_depth = 3;
  bounds.dtypes = {DType::f32};
  verify::MlpCase c = *verify::gen_mlp_case(bounds);
  // GELU without LayerNorm: the bound below is first order. ReLU's kink turns a
  // pre-activation within one rounding of 0 into an O(1) change of its unit's
  // gradient, and LayerNorm divides by a row's standard deviation; neither is a
  // rounding-sized change, so no rounding bound covers them.
  c.spec.activation = Activation::gelu;
  c.spec.layernorm = false;
  return c;
}

// The gradients of one single-device step on `backend`: f32 when `low` is nullopt,
// else autocast in `low`, with a GradScaler (PyTorch's defaults) for f16 as the f16
// recipe runs it, repeated until the scaler takes the step. SGD with lr 0 leaves
// the weights as they were.
inline std::vector<std::vector<double>> amp_step_grads(Backend& backend, const verify::MlpCase& c,
                                                       const verify::Batch& b, std::optional<DType> low) {
  StrategyOptions o;
  o.kind = StrategyKind::single;
  o.loss = c.loss;
  const ModelBuilder base = verify::mlp_builder(backend, c);
  const GradScaler* scaler = nullptr;
  auto strategy = make_strategy(
      backend, o,
      [&](Device& d) {
        Sequential m = base(d);
        m.set_autocast(low);
        return m;
      },
      [&](std::vector<NamedParameter> p) {
        std::unique_ptr<Optimizer> sgd = make_sgd(p, SgdOptions{0.0});
        if (low != DType::f16) return sgd;
        auto g = std::make_unique<GradScaler>(std::move(sgd), std::move(p));
        scaler = g.get();
        return std::unique_ptr<Optimizer>(std::move(g));
      });
  // f16: a scaled gradient past f16's 65504 is inf, the scaler skips the step and
  // halves its scale, as torch's does in a run's first steps; the step is repeated
  // (weights unchanged: lr 0) until one is taken.
  for (int attempt = 0; attempt < 40; ++attempt) {
    strategy->train_step(b.x, b.target);
    if (!scaler || !scaler->last_step_skipped()) break;
  }
  return verify::grads_of(backend, strategy->module());
}

// How far an autocast gradient may be from the f32 one, as gradient_error measures
// it (against the sum of |per-sample terms|). Each Linear rounds six operands to the
// low type, each by at most u (bf16 2^-8, f16 2^-11): x, W and y forward; dy, W
// and dx backward. A gradient term is a product along the forward and backward
// chains of `depth` Linears, so to first order it moves by at most 6 depth u of its
// own size; the factor 2 covers the activations' derivatives (GELU's up to 1.13)
// and second-order terms. f32's own rounding (2^-24) is negligible beside it.
// MSE's gradient 2 (p - t) / n takes the output's rounding as an absolute error of
// about u |p|, which is large against |p - t| when the model already fits: the bound
// is multiplied by kappa = (sum |p| + sum |t|) / sum |p - t| (>= 1; 1 for
// cross-entropy, whose softmax - onehot has no such cancellation at these scales).
inline double amp_tolerance(DType low, size_t depth, double kappa = 1.0) {
  return 2.0 * 6.0 * static_cast<double>(depth) * unit_roundoff(low) * kappa;
}

// kappa above, from the f32 model's output on the batch (computed on `host`).
inline double mse_cancellation(Backend& host, const verify::MlpCase& c, const verify::Batch& b) {
  if (c.loss != LossKind::mse) return 1.0;
  Device& d = host.device(0);
  Sequential m = verify::mlp_builder(c)(d);
  const Tensor p = m.forward(copy_to(host, b.x, d, MemoryCategory::inputs));
  const std::vector<double> pv = verify::read_values(host, p), tv = verify::read_values(host, b.target);
  double sum_abs = 0, sum_diff = 0;
  for (size_t i = 0; i < pv.size() && i < tv.size(); ++i) {
    sum_abs += std::fabs(pv[i]) + std::fabs(tv[i]);
    sum_diff += std::fabs(pv[i] - tv[i]);
  }
  return sum_diff > 0 ? std::max(1.0, sum_abs / sum_diff) : 1.0;
}

}  // namespace dpt::test
