// Sequential and make_mlp: PyTorch's parameter names and layer order, nn.Linear's
// initialisation distribution, the MLP spec parser's errors, the backward hook
// order DDP relies on, and the memory categories the twin reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/host/host_backend.hpp"
#include "engine/nn/layers.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/optim/optim.hpp"

namespace dpt {
namespace {

struct NameShape {
  std::string name;
  Shape shape;
  bool operator==(const NameShape&) const = default;
};

std::vector<NameShape> names_and_shapes(Sequential& m) {
  std::vector<NameShape> out;
  for (auto& p : m.named_parameters()) out.push_back({p.name, p.param->value.shape()});
  return out;
}

std::vector<std::string> layer_types(Sequential& m) {
  std::vector<std::string> out;
  for (size_t i = 0; i < m.size(); ++i) out.push_back(m.layer(i).type_name());
  return out;
}

MlpSpec spec_of(const std::string& s, Activation a = Activation::relu, bool ln = false) {
  MlpSpec spec = parse_mlp_spec(s);
  spec.activation = a;
  spec.layernorm = ln;
  return spec;
}

TEST(Mlp, ParameterNamesFollowNnSequentialIndices) {
  HostDevice dev(0, DeviceKind::host_worker);
  Sequential m = make_mlp(spec_of("mlp:4-8-8-2"), dev, DType::f32, 1);
  EXPECT_EQ(layer_types(m), (std::vector<std::string>{"Linear", "ReLU", "Linear", "ReLU", "Linear"}));
  const std::vector<NameShape> expected{{"0.weight", {8, 4}}, {"0.bias", {8}}, {"2.weight", {8, 8}},
                                        {"2.bias", {8}},      {"4.weight", {2, 8}}, {"4.bias", {2}}};
  EXPECT_EQ(names_and_shapes(m), expected);
  EXPECT_EQ(m.parameter_count(), 4 * 8 + 8 + 8 * 8 + 8 + 8 * 2 + 2);
  EXPECT_EQ(m.output_shape({5, 4}), (Shape{5, 2}));
}

TEST(Mlp, LayerNormSitsBetweenLinearAndActivation) {
  HostDevice dev(0, DeviceKind::host_worker);
  Sequential m = make_mlp(spec_of("mlp:4-8-2", Activation::gelu, true), dev, DType::f64, 1);
  EXPECT_EQ(layer_types(m), (std::vector<std::string>{"Linear", "LayerNorm", "GELU", "Linear"}));
  const std::vector<NameShape> expected{
      {"0.weight", {8, 4}}, {"0.bias", {8}}, {"1.weight", {8}}, {"1.bias", {8}}, {"3.weight", {2, 8}}, {"3.bias", {2}}};
  EXPECT_EQ(names_and_shapes(m), expected);
  // nn.LayerNorm starts as the identity affine map: weight 1, bias 0.
  auto params = m.named_parameters();
  EXPECT_EQ(tensor_to_f64_vector(params[2].param->value), std::vector<double>(8, 1.0));
  EXPECT_EQ(tensor_to_f64_vector(params[3].param->value), std::vector<double>(8, 0.0));
}

// Kolmogorov-Smirnov distance between the sample and U(-bound, bound).
double ks_distance_to_uniform(std::vector<double> v, double bound) {
  std::sort(v.begin(), v.end());
  double d = 0;
  const double n = static_cast<double>(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double cdf = (v[i] + bound) / (2 * bound);
    d = std::max({d, std::abs(cdf - static_cast<double>(i) / n), std::abs(cdf - static_cast<double>(i + 1) / n)});
  }
  return d;
}

TEST(Mlp, InitialisationIsUniformInPlusMinusOneOverSqrtFanIn) {
  HostDevice dev(0, DeviceKind::host_worker);
  Sequential m = make_mlp(spec_of("mlp:256-512-64"), dev, DType::f64, 7);
  auto params = m.named_parameters();
  // kaiming_uniform(a=sqrt(5)) and nn.Linear's bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  const std::vector<double> fan_in{256, 256, 512, 512};
  for (size_t i = 0; i < params.size(); ++i) {
    const double bound = 1.0 / std::sqrt(fan_in[i]);
    const auto v = tensor_to_f64_vector(params[i].param->value);
    double max_abs = 0;
    for (double x : v) max_abs = std::max(max_abs, std::abs(x));
    EXPECT_LT(max_abs, bound) << params[i].name;
    if (v.size() >= 1000) {
      // The whole interval is used, and the sample follows the uniform law: the KS
      // distance stays below its 1 % critical value 1.63/sqrt(n).
      EXPECT_GT(max_abs, 0.99 * bound) << params[i].name;
      EXPECT_LT(ks_distance_to_uniform(v, bound), 1.63 / std::sqrt(static_cast<double>(v.size())))
          << params[i].name;
    }
  }
}

TEST(Mlp, SameSeedSameWeightsOtherSeedOtherWeights) {
  HostDevice dev(0, DeviceKind::host_worker);
  auto values = [&](std::uint64_t seed, DType t) {
    Sequential m = make_mlp(spec_of("mlp:6-5-3"), dev, t, seed);
    std::vector<double> all;
    for (auto& p : m.named_parameters()) {
      auto v = tensor_to_f64_vector(p.param->value);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  EXPECT_EQ(values(3, DType::f64), values(3, DType::f64));
  EXPECT_NE(values(3, DType::f64), values(4, DType::f64));
  // f32 weights are the same draws rounded to float.
  auto d = values(3, DType::f64), f = values(3, DType::f32);
  for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(f[i], static_cast<double>(static_cast<float>(d[i])));
}

TEST(MlpSpec, ParsesWidths) {
  EXPECT_EQ(parse_mlp_spec("mlp:4-16-2").widths, (std::vector<std::int64_t>{4, 16, 2}));
  EXPECT_EQ(parse_mlp_spec("mlp:1024-4096-4096-1024").widths, (std::vector<std::int64_t>{1024, 4096, 4096, 1024}));
}

TEST(MlpSpec, BadSpecsAreRejectedNamingTheSpec) {
  for (const std::string bad : {"", "mlp:", "mlp:4", "mlp:4-0", "mlp:4-x", "cnn:4-2", "mlp:4--2", "mlp:4-2-",
                                "mlp:-4-2", "mlp:4-2.5", "MLP:4-2", "mlp:4 -2"}) {
    try {
      parse_mlp_spec(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'" + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(Sequential, GradReadyHookRunsInReverseLayerOrderOncePerParameter) {
  HostDevice dev(0, DeviceKind::host_worker);
  Sequential m = make_mlp(spec_of("mlp:3-4-4-2", Activation::relu, true), dev, DType::f64, 1);
  // named_parameters: 0.weight 0.bias 1.weight 1.bias 4.weight 4.bias 5.weight 5.bias 7.weight 7.bias
  Tensor x = Tensor::zeros(dev, {2, 3}, DType::f64);
  Tensor dy = Tensor::zeros(dev, {2, 2}, DType::f64);
  m.forward(x);
  std::vector<size_t> order;
  m.backward(dy, [&](size_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<size_t>{8, 9, 6, 7, 4, 5, 2, 3, 0, 1}));
}

TEST(Sequential, ReplicaHasSameStructureOnTheOtherDeviceWithZeroGradients) {
  HostDevice a(0, DeviceKind::host_worker), b(1, DeviceKind::host_worker);
  Sequential m = make_mlp(spec_of("mlp:3-4-2", Activation::gelu, true), a, DType::f32, 1);
  Sequential r = m.replicate_on(b);
  EXPECT_EQ(names_and_shapes(r), names_and_shapes(m));
  EXPECT_EQ(layer_types(r), layer_types(m));
  EXPECT_EQ(&r.device(), &b);
  for (auto& p : r.named_parameters()) {
    EXPECT_EQ(&p.param->value.device(), &b);
    for (double g : tensor_to_f64_vector(p.param->grad)) EXPECT_EQ(g, 0.0) << p.name;
  }
}

TEST(Sequential, AllocationsAreCountedInTheirMemoryCategories) {
  HostDevice dev(0, DeviceKind::host_worker);
  Sequential m = make_mlp(spec_of("mlp:4-8-2"), dev, DType::f32, 1);
  const Bytes param_bytes = (4 * 8 + 8 + 8 * 2 + 2) * 4;
  auto at = [&](MemoryCategory c) { return dev.memory().breakdown_at_peak()[static_cast<int>(c)]; };
  EXPECT_EQ(at(MemoryCategory::parameters), param_bytes);
  EXPECT_EQ(at(MemoryCategory::gradients), param_bytes);
  EXPECT_EQ(at(MemoryCategory::activations), 0);
  SgdOptions o;
  o.momentum = 0.9;
  auto opt = make_sgd(m.named_parameters(), o);
  EXPECT_EQ(at(MemoryCategory::optimizer_state), 0);  // lazily, as PyTorch
  Tensor x = Tensor::zeros(dev, {3, 4}, DType::f32, MemoryCategory::inputs);
  Tensor y = Tensor::zeros(dev, {3, 2}, DType::f32, MemoryCategory::inputs);
  m.backward(loss_forward_backward(LossKind::mse, Reduction::mean, m.forward(x), y).grad);
  // The peak is reached during backward, with the saved activations still alive:
  // outputs of Linear, ReLU, Linear (3x8, 3x8, 3x2) and the loss gradient (3x2),
  // plus gradients flowing back (3x8 at most two at once).
  EXPECT_GT(at(MemoryCategory::activations), 0);
  m.clear_saved();
  dev.memory().reset_peak();  // the peak is now what is live, so the step's state sets the next one
  opt->step();
  EXPECT_EQ(at(MemoryCategory::optimizer_state), param_bytes);
  EXPECT_EQ(dev.memory().live_bytes(), 3 * param_bytes + (3 * 4 + 3 * 2) * 4);
}

}  // namespace
}  // namespace dpt
