// Shared pieces of the strategy properties (strategies_test, ddp_test): random MLP
// cases, data, the single-device reference computed directly with the layers and
// the loss (not through any strategy), and the relative-error measure.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "engine/host/host_backend.hpp"
#include "engine/loss.hpp"
#include "engine/model.hpp"
#include "engine/optim.hpp"
#include "engine/strategy.hpp"

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

// ||a - b||_2 / ||b||_2 per tensor, the largest over tensors (0/0 counts as 0).
inline double max_relative_error(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  double worst = 0;
  if (a.size() != b.size()) return INFINITY;
  for (size_t t = 0; t < a.size(); ++t) {
    if (a[t].size() != b[t].size()) return INFINITY;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a[t].size(); ++i) {
      diff += (a[t][i] - b[t][i]) * (a[t][i] - b[t][i]);
      norm += b[t][i] * b[t][i];
    }
    if (diff == 0) continue;
    worst = std::max(worst, norm == 0 ? INFINITY : std::sqrt(diff / norm));
  }
  return worst;
}

inline double tolerance(DType t) { return t == DType::f64 ? 1e-12 : 1e-5; }

}  // namespace dpt::verify
