// Random MLP training cases and the reference they are checked against (see mlp_cases.hpp).
#include "scenarios/verify/mlp_cases.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "engine/nn/init.hpp"
#include "engine/optim/optim.hpp"

namespace dpt::verify {

std::string describe(const MlpCase& c) {
  std::ostringstream os;
  os << "mlp:";
  for (size_t i = 0; i < c.spec.widths.size(); ++i) os << (i ? "-" : "") << c.spec.widths[i];
  os << (c.spec.activation == Activation::gelu ? " gelu" : " relu") << (c.spec.layernorm ? " +LN" : "")
     << (c.dtype == DType::f64 ? " f64" : " f32") << (c.loss == LossKind::mse ? " mse" : " ce") << " batch " << c.batch
     << " devices " << c.devices << " seed " << c.seed;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const MlpCase& c) { return os << describe(c); }

rc::Gen<MlpCase> gen_mlp_case(const MlpCaseBounds& bounds) {
  return rc::gen::exec([bounds] {
    MlpCase c;
    const int depth = *rc::gen::inRange(1, bounds.max_depth + 1);
    c.loss = *rc::gen::element(LossKind::mse, LossKind::cross_entropy);
    for (int i = 0; i <= depth; ++i) c.spec.widths.push_back(*rc::gen::inRange<std::int64_t>(1, bounds.max_width + 1));
    if (c.loss == LossKind::cross_entropy) c.spec.widths.back() = std::max<std::int64_t>(c.spec.widths.back(), 2);
    c.spec.activation = *rc::gen::element(Activation::relu, Activation::gelu);
    c.spec.layernorm = *rc::gen::arbitrary<bool>();
    c.dtype = bounds.dtypes.size() == 1 ? bounds.dtypes.front() : *rc::gen::elementOf(bounds.dtypes);
    if (c.spec.layernorm && c.dtype == DType::f32)
      for (size_t i = 1; i + 1 < c.spec.widths.size(); ++i) c.spec.widths[i] = std::max<std::int64_t>(c.spec.widths[i], 4);
    c.batch = *rc::gen::inRange<std::int64_t>(1, bounds.max_batch + 1);
    c.devices = *rc::gen::inRange(1, bounds.max_devices + 1);
    c.seed = *rc::gen::inRange<std::uint64_t>(0, 1u << 30);
    return c;
  });
}

Batch make_batch(Backend& backend, const MlpCase& c, std::uint64_t salt) {
  Generator gen(c.seed * 7919 + 17 + salt);
  const std::int64_t in = c.spec.widths.front(), out = c.spec.widths.back();
  Batch b;
  b.x = Tensor::empty(backend.host_memory(), {c.batch, in}, c.dtype, MemoryCategory::inputs);
  std::vector<double> xs(static_cast<size_t>(c.batch * in));
  for (auto& v : xs) v = gen.uniform(-1, 1);
  tensor_fill_from_f64(b.x, xs);
  if (c.loss == LossKind::mse) {
    b.target = Tensor::empty(backend.host_memory(), {c.batch, out}, c.dtype, MemoryCategory::inputs);
    std::vector<double> ts(static_cast<size_t>(c.batch * out));
    for (auto& v : ts) v = gen.uniform(-1, 1);
    tensor_fill_from_f64(b.target, ts);
  } else {
    b.target = Tensor::empty(backend.host_memory(), {c.batch}, DType::i64, MemoryCategory::inputs);
    std::vector<double> ls(static_cast<size_t>(c.batch));
    for (auto& v : ls) v = static_cast<double>(gen.randint(out));
    tensor_fill_from_f64(b.target, ls);
  }
  return b;
}

ModelBuilder mlp_builder(const MlpCase& c) {
  return [c](Device& d) { return make_mlp(c.spec, d, c.dtype, c.seed); };
}

ModelBuilder mlp_builder(Backend& backend, const MlpCase& c) {
  return [&backend, c](Device& d) { return make_mlp(c.spec, backend, d, c.dtype, c.seed); };
}

OptimizerBuilder sgd_builder(double lr, double momentum) {
  return [lr, momentum](std::vector<NamedParameter> p) {
    SgdOptions o;
    o.lr = lr;
    o.momentum = momentum;
    return make_sgd(std::move(p), o);
  };
}

std::vector<double> read_values(Backend& backend, const Tensor& t) {
  if (t.device().host_readable() && t.device().computes()) return tensor_to_f64_vector(t);
  return tensor_to_f64_vector(copy_to(backend, t, backend.host_memory(), MemoryCategory::workspace));
}

std::vector<std::vector<double>> grads_of(Backend& backend, Sequential& m) {
  std::vector<std::vector<double>> out;
  for (auto& p : m.named_parameters()) out.push_back(read_values(backend, p.param->grad));
  return out;
}

std::vector<std::vector<double>> reference_grads(Backend& backend, const MlpCase& c, const Batch& b,
                                                 std::int64_t begin, std::optional<std::int64_t> count,
                                                 std::optional<double> divisor) {
  Device& d = backend.device(0);
  Sequential m = make_mlp(c.spec, d, c.dtype, c.seed);
  m.zero_grad();
  const std::int64_t rows = count.value_or(c.batch - begin);
  const Tensor x = copy_to(backend, b.x.slice_rows(begin, rows), d, MemoryCategory::inputs);
  const Tensor t = copy_to(backend, b.target.slice_rows(begin, rows), d, MemoryCategory::inputs);
  const Tensor y = m.forward(x);
  const LossResult l = loss_forward_backward(c.loss, Reduction::mean, y, t, divisor);
  m.backward(l.grad);
  return grads_of(backend, m);
}

std::vector<double> summand_scale(Backend& backend, const MlpCase& c, const Batch& b,
                                  const std::function<double(std::int64_t)>& divisor_of) {
  Device& d = backend.device(0);
  Sequential m = make_mlp(c.spec, d, c.dtype, c.seed);
  std::vector<double> scale;
  for (std::int64_t i = 0; i < c.batch; ++i) {
    m.zero_grad();
    const Tensor x = copy_to(backend, b.x.slice_rows(i, 1), d, MemoryCategory::inputs);
    const Tensor t = copy_to(backend, b.target.slice_rows(i, 1), d, MemoryCategory::inputs);
    const LossResult l = loss_forward_backward(c.loss, Reduction::mean, m.forward(x), t, divisor_of(i));
    m.backward(l.grad);
    const auto g = grads_of(backend, m);
    scale.resize(g.size(), 0.0);
    for (size_t k = 0; k < g.size(); ++k) {
      double n = 0;
      for (double v : g[k]) n += v * v;
      scale[k] += std::sqrt(n);
    }
  }
  return scale;
}

double mean_divisor(const MlpCase& c, std::int64_t samples) {
  return c.loss == LossKind::mse ? static_cast<double>(samples * c.spec.widths.back()) : static_cast<double>(samples);
}

std::vector<double> full_batch_scale(Backend& backend, const MlpCase& c, const Batch& b) {
  return summand_scale(backend, c, b, [&](std::int64_t) { return mean_divisor(c, c.batch); });
}

GradError gradient_error(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b,
                         const std::vector<double>& scale) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (a.size() != b.size() || scale.size() != b.size()) return {inf, inf, -1};
  double total = 0, total_diff = 0;
  std::vector<double> diffs;
  for (size_t t = 0; t < a.size(); ++t) {
    if (a[t].size() != b[t].size()) return {inf, inf, static_cast<int>(t)};
    double diff = 0;
    for (size_t i = 0; i < a[t].size(); ++i) diff += (a[t][i] - b[t][i]) * (a[t][i] - b[t][i]);
    diffs.push_back(diff);
    total += scale[t] * scale[t];
    total_diff += diff;
  }
  GradError e;
  if (total_diff == 0) return e;
  e.global = total == 0 ? inf : std::sqrt(total_diff / total);
  const double floor = 1e-2 * std::sqrt(total);
  for (size_t t = 0; t < diffs.size(); ++t) {
    if (diffs[t] == 0) continue;
    const double s = std::max(scale[t], floor);
    const double err = s == 0 ? inf : std::sqrt(diffs[t]) / s;
    if (err > e.per_tensor) {
      e.per_tensor = err;
      e.worst_tensor = static_cast<int>(t);
    }
  }
  return e;
}

std::ostream& operator<<(std::ostream& os, const GradError& e) {
  return os << "relative error " << e.global << " (worst tensor " << e.per_tensor << ")";
}

double rounding_tolerance(const MlpCase& c) {
  const double u = c.dtype == DType::f64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
  const std::int64_t width = *std::max_element(c.spec.widths.begin(), c.spec.widths.end());
  const auto depth = static_cast<std::int64_t>(c.spec.widths.size()) - 1;
  // Per layer: the forward and the backward inner products (width + 1 terms each), and
  // with LayerNorm its mean and variance forward and their two sums backward (width each).
  const std::int64_t per_layer = 2 * (width + 1) + (c.spec.layernorm ? 4 * width : 0);
  const double n = static_cast<double>(c.batch + c.devices + depth * per_layer);
  return 2 * n * u / (1 - n * u);
}

}  // namespace dpt::verify
