// Shared pieces of the strategy properties (strategies_test, ddp_test): random MLP
// cases, data, the single-device reference computed directly with the layers and
// the loss (not through any strategy), and the relative-error measure.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "engine/host/host_backend.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/optim/optim.hpp"
#include "engine/parallel/strategy.hpp"

namespace dpt::verify {

struct MlpCase {
  MlpSpec spec;
  DType dtype = DType::f64;
  LossKind loss = LossKind::mse;
  std::int64_t batch = 1;
  int devices = 1;
  std::uint64_t seed = 0;  // model initialisation and data
};

inline std::string describe(const MlpCase& c) {
  std::ostringstream os;
  os << "mlp:";
  for (size_t i = 0; i < c.spec.widths.size(); ++i) os << (i ? "-" : "") << c.spec.widths[i];
  os << (c.spec.activation == Activation::gelu ? " gelu" : " relu") << (c.spec.layernorm ? " +LN" : "")
     << (c.dtype == DType::f64 ? " f64" : " f32") << (c.loss == LossKind::mse ? " mse" : " ce") << " batch " << c.batch
     << " devices " << c.devices << " seed " << c.seed;
  return os.str();
}

// depth 1-4 Linear layers, widths 1-max_width, ReLU or GELU, with or without
// LayerNorm, f64 or f32, MSE or CE (CE needs at least 2 classes).
inline MlpCase gen_mlp_case(std::int64_t max_batch, int max_devices, int max_width = 64) {
  MlpCase c;
  const int depth = *rc::gen::inRange(1, 5);
  c.loss = *rc::gen::element(LossKind::mse, LossKind::cross_entropy);
  for (int i = 0; i <= depth; ++i) c.spec.widths.push_back(*rc::gen::inRange<std::int64_t>(1, max_width + 1));
  if (c.loss == LossKind::cross_entropy && c.spec.widths.back() < 2) c.spec.widths.back() = 2;
  c.spec.activation = *rc::gen::element(Activation::relu, Activation::gelu);
  c.spec.layernorm = *rc::gen::arbitrary<bool>();
  c.dtype = *rc::gen::element(DType::f64, DType::f32);
  // LayerNorm over fewer than 4 features is degenerate (1 feature: a constant output;
  // 2: outputs of exactly +-1), so its backward is pure f32 cancellation noise that
  // no summation-order bound covers (seen: 4.8e-5 on mlp:18-39-2-6-3 +LN f32). Such
  // hidden widths are still exercised in f64, where the bound holds.
  if (c.spec.layernorm && c.dtype == DType::f32)
    for (size_t i = 1; i + 1 < c.spec.widths.size(); ++i) c.spec.widths[i] = std::max<std::int64_t>(c.spec.widths[i], 4);
  c.batch = *rc::gen::inRange<std::int64_t>(1, max_batch + 1);
  c.devices = *rc::gen::inRange(1, max_devices + 1);
  c.seed = *rc::gen::inRange<std::uint64_t>(0, 1u << 30);
  RC_TAG(c.loss == LossKind::mse ? "mse" : "ce");
  return c;
}

struct Batch {
  Tensor x, target;
};

// Inputs uniform in [-1, 1]; MSE targets uniform, CE labels uniform over the classes.
inline Batch make_batch(Backend& backend, const MlpCase& c, std::uint64_t salt = 0) {
  std::mt19937_64 gen(c.seed * 7919 + salt);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const std::int64_t in = c.spec.widths.front(), out = c.spec.widths.back();
  Batch b;
  b.x = Tensor::empty(backend.host_memory(), {c.batch, in}, c.dtype, MemoryCategory::inputs);
  std::vector<double> xs(static_cast<size_t>(c.batch * in));
  for (auto& v : xs) v = u(gen);
  tensor_fill_from_f64(b.x, xs);
  if (c.loss == LossKind::mse) {
    b.target = Tensor::empty(backend.host_memory(), {c.batch, out}, c.dtype, MemoryCategory::inputs);
    std::vector<double> ts(static_cast<size_t>(c.batch * out));
    for (auto& v : ts) v = u(gen);
    tensor_fill_from_f64(b.target, ts);
  } else {
    b.target = Tensor::empty(backend.host_memory(), {c.batch}, DType::i64, MemoryCategory::inputs);
    std::vector<double> ls(static_cast<size_t>(c.batch));
    for (auto& v : ls) v = double(gen() % static_cast<std::uint64_t>(out));
    tensor_fill_from_f64(b.target, ls);
  }
  return b;
}

inline ModelBuilder mlp_builder(const MlpCase& c) {
  return [c](Device& d) { return make_mlp(c.spec, d, c.dtype, c.seed); };
}
inline OptimizerBuilder sgd_builder(double lr = 0.05) {
  return [lr](std::vector<NamedParameter> p) {
    SgdOptions o;
    o.lr = lr;
    o.momentum = 0.9;
    return make_sgd(std::move(p), o);
  };
}

inline std::vector<std::vector<double>> grads_of(Sequential& m) {
  std::vector<std::vector<double>> out;
  for (auto& p : m.named_parameters()) out.push_back(tensor_to_f64_vector(p.param->grad));
  return out;
}
inline std::vector<std::vector<double>> values_of(Sequential& m) {
  std::vector<std::vector<double>> out;
  for (auto& p : m.named_parameters()) out.push_back(tensor_to_f64_vector(p.param->value));
  return out;
}

// The single-device gradient of the loss over rows [begin, begin + count) of the
// batch, computed with the layers and the loss directly: the reference.
inline std::vector<std::vector<double>> reference_grads(Backend& backend, const MlpCase& c, const Batch& b,
                                                        std::int64_t begin, std::int64_t count,
                                                        std::optional<double> divisor = std::nullopt) {
  Device& d = backend.device(0);
  Sequential m = make_mlp(c.spec, d, c.dtype, c.seed);
  m.zero_grad();
  const Tensor x = copy_to(backend, b.x.slice_rows(begin, count), d, MemoryCategory::inputs);
  const Tensor t = copy_to(backend, b.target.slice_rows(begin, count), d, MemoryCategory::inputs);
  const Tensor y = m.forward(x);
  LossResult l = loss_forward_backward(c.loss, Reduction::mean, y, t, divisor);
  m.backward(l.grad);
  return grads_of(m);
}

// Sum over samples of ||g_i||, per tensor: the magnitudes a gradient is summed from
// (g_i is sample i's term of the loss, with the divisor `divisor_of(i)`). Summation
// roundoff is bounded by eps * sum |terms|, not by the size of what is left after
// cancellation, so errors are measured against this scale.
inline std::vector<double> summand_scale(Backend& backend, const MlpCase& c, const Batch& b,
                                         const std::function<double(std::int64_t)>& divisor_of) {
  Device& d = backend.device(0);
  Sequential m = make_mlp(c.spec, d, c.dtype, c.seed);
  std::vector<double> scale;
  for (std::int64_t i = 0; i < c.batch; ++i) {
    m.zero_grad();
    const Tensor x = copy_to(backend, b.x.slice_rows(i, 1), d, MemoryCategory::inputs);
    const Tensor t = copy_to(backend, b.target.slice_rows(i, 1), d, MemoryCategory::inputs);
    LossResult l = loss_forward_backward(c.loss, Reduction::mean, m.forward(x), t, divisor_of(i));
    m.backward(l.grad);
    const auto g = grads_of(m);
    scale.resize(g.size(), 0.0);
    for (size_t k = 0; k < g.size(); ++k) {
      double n = 0;
      for (double v : g[k]) n += v * v;
      scale[k] += std::sqrt(n);
    }
  }
  return scale;
}

// The full batch's mean-loss divisor: elements for MSE, samples for CE (PyTorch's).
inline double mean_divisor(const MlpCase& c, std::int64_t samples) {
  return c.loss == LossKind::mse ? double(samples * c.spec.widths.back()) : double(samples);
}
inline std::vector<double> full_batch_scale(Backend& backend, const MlpCase& c, const Batch& b) {
  return summand_scale(backend, c, b, [&](std::int64_t) { return mean_divisor(c, c.batch); });
}

// How far gradients a are from the reference b, relative to `scale` (summand_scale):
//  * global: ||a - b|| / ||scale|| over all tensors together; the issue's
//    tolerances (f64 1e-12, f32 1e-5) apply to it;
//  * per tensor: ||a_t - b_t|| / max(scale_t, 1e-2 ||scale||), allowed 100x the
//    tolerance, so a bug confined to one small tensor (a bias) is still caught. The
//    floor covers tensors under a LayerNorm of width 1 or 2, whose backward cancels
//    terms of order one within each sample.
// Without cancellation scale_t = ||b_t|| and this is the plain relative error; with
// it, f32 sums over a batch legitimately differ by more than 1e-5 of what is left
// (seen: 2.3e-5 on mlp:47-25-3-1 with LayerNorm). Planted bugs move whole tensors by O(1).
struct GradError {
  double global = 0;
  double per_tensor = 0;
};

inline GradError gradient_error(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b,
                                const std::vector<double>& scale) {
  if (a.size() != b.size() || scale.size() != b.size()) return {INFINITY, INFINITY};
  double total = 0, total_diff = 0;
  std::vector<double> diffs;
  for (size_t t = 0; t < a.size(); ++t) {
    if (a[t].size() != b[t].size()) return {INFINITY, INFINITY};
    double diff = 0;
    for (size_t i = 0; i < a[t].size(); ++i) diff += (a[t][i] - b[t][i]) * (a[t][i] - b[t][i]);
    diffs.push_back(diff);
    total += scale[t] * scale[t];
    total_diff += diff;
  }
  GradError e;
  if (total_diff == 0) return e;
  e.global = total == 0 ? INFINITY : std::sqrt(total_diff / total);
  const double floor = 1e-2 * std::sqrt(total);
  for (size_t t = 0; t < diffs.size(); ++t) {
    if (diffs[t] == 0) continue;
    const double s = std::max(scale[t], floor);
    e.per_tensor = std::max(e.per_tensor, s == 0 ? INFINITY : std::sqrt(diffs[t]) / s);
  }
  return e;
}

// Parameters after training: each tensor's own norm is its scale.
inline std::vector<double> norms_of(const std::vector<std::vector<double>>& b) {
  std::vector<double> out;
  for (const auto& t : b) {
    double n = 0;
    for (double v : t) n += v * v;
    out.push_back(std::sqrt(n));
  }
  return out;
}

inline double tolerance(DType t) { return t == DType::f64 ? 1e-12 : 1e-5; }

inline bool within_tolerance(const GradError& e, DType t) {
  return e.global <= tolerance(t) && e.per_tensor <= 100 * tolerance(t);
}

inline std::ostream& operator<<(std::ostream& os, const GradError& e) {
  return os << "relative error " << e.global << " (worst tensor " << e.per_tensor << ")";
}

// Per tensor: "|a-b| / |b|" with both norms, for the failure log.
inline std::string error_report(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  std::ostringstream os;
  for (size_t t = 0; t < a.size() && t < b.size(); ++t) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a[t].size() && i < b[t].size(); ++i) {
      diff += (a[t][i] - b[t][i]) * (a[t][i] - b[t][i]);
      norm += b[t][i] * b[t][i];
    }
    os << "tensor " << t << ": |a-b| " << std::sqrt(diff) << " |b| " << std::sqrt(norm) << "\n";
  }
  return os.str();
}

}  // namespace dpt::verify
