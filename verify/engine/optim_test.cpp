// SGD and AdamW against reference implementations written here, line by line
// from PyTorch 1.13's torch/optim/sgd.py (_single_tensor_sgd) and adamw.py
// (_single_tensor_adamw), over several steps with changing gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "engine/host/host_backend.hpp"
#include "engine/nn/layers.hpp"
#include "engine/optim/optim.hpp"

namespace dpt {
namespace {

// One parameter tensor with a settable gradient, wrapped as a NamedParameter.
struct Param {
  Parameter p;
  Param(Device& d, const std::vector<double>& v)
      : p(make_parameter(d, "w", {static_cast<std::int64_t>(v.size())}, DType::f64)) {
    tensor_fill_from_f64(p.value, v);
  }
};

// Gradients of a few steps: distinct signs and sizes so every term matters.
std::vector<std::vector<double>> grads() {
  return {{0.5, -1.25, 2.0, 0.0}, {-0.75, 0.25, 1.5, 3.0}, {1.0, 1.0, -2.5, -0.5}, {0.125, -0.5, 0.0, 4.0}};
}
const std::vector<double> kStart{1.0, -2.0, 0.5, 3.0};

std::vector<double> run(Device& d, const std::function<std::unique_ptr<Optimizer>(std::vector<NamedParameter>)>& make) {
  Param w(d, kStart);
  auto opt = make({{"w", &w.p}});
  for (auto& g : grads()) {
    tensor_fill_from_f64(w.p.grad, g);
    opt->step();
  }
  return tensor_to_f64_vector(w.p.value);
}

std::vector<double> reference_sgd(const SgdOptions& o) {
  std::vector<double> p = kStart, buf(p.size());
  bool first = true;
  for (auto g : grads()) {
    for (size_t i = 0; i < p.size(); ++i) {
      double d_p = g[i];
      if (o.weight_decay != 0) d_p = d_p + o.weight_decay * p[i];          // d_p.add(param, alpha=wd)
      if (o.momentum != 0) {
        buf[i] = first ? d_p : buf[i] * o.momentum + (1 - o.dampening) * d_p;  // clone / mul_.add_
        d_p = o.nesterov ? d_p + o.momentum * buf[i] : buf[i];
      }
      p[i] = p[i] - o.lr * d_p;                                              // param.add_(d_p, alpha=-lr)
    }
    first = false;
  }
  return p;
}

std::vector<double> reference_adamw(const AdamWOptions& o) {
  std::vector<double> p = kStart, m(p.size()), v(p.size());
  int step = 0;
  for (auto g : grads()) {
    ++step;
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - o.lr * o.weight_decay;                        // param.mul_(1 - lr * weight_decay)
      m[i] = m[i] * o.beta1 + (1 - o.beta1) * g[i];             // exp_avg.mul_(beta1).add_(grad, alpha=1-beta1)
      v[i] = v[i] * o.beta2 + (1 - o.beta2) * g[i] * g[i];      // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1-beta2)
      const double bc1 = 1 - std::pow(o.beta1, step), bc2 = 1 - std::pow(o.beta2, step);
      const double denom = std::sqrt(v[i]) / std::sqrt(bc2) + o.eps;
      p[i] -= o.lr / bc1 * m[i] / denom;                        // param.addcdiv_(exp_avg, denom, value=-step_size)
    }
  }
  return p;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-14 * (1 + std::abs(want[i]))) << i;
}

TEST(Sgd, MatchesPyTorchFormulaForEachOptionCombination) {
  HostDevice d(0, DeviceKind::host_worker);
  for (double momentum : {0.0, 0.9})
    for (double dampening : {0.0, 0.3})
      for (double wd : {0.0, 0.01})
        for (bool nesterov : {false, true}) {
          if (nesterov && (momentum == 0 || dampening != 0)) continue;  // rejected, as in PyTorch
          SgdOptions o{0.1, momentum, dampening, wd, nesterov};
          SCOPED_TRACE(::testing::Message() << "momentum " << momentum << " dampening " << dampening << " wd " << wd
                                            << " nesterov " << nesterov);
          expect_close(run(d, [&](auto ps) { return make_sgd(std::move(ps), o); }), reference_sgd(o));
        }
}

TEST(Sgd, RejectsWhatPyTorchRejects) {
  HostDevice d(0, DeviceKind::host_worker);
  Param w(d, kStart);
  EXPECT_THROW(make_sgd({{"w", &w.p}}, SgdOptions{-0.1, 0, 0, 0, false}), std::invalid_argument);
  EXPECT_THROW(make_sgd({{"w", &w.p}}, SgdOptions{0.1, -0.5, 0, 0, false}), std::invalid_argument);
  EXPECT_THROW(make_sgd({{"w", &w.p}}, SgdOptions{0.1, 0, 0, -1, false}), std::invalid_argument);
  EXPECT_THROW(make_sgd({{"w", &w.p}}, SgdOptions{0.1, 0, 0, 0, true}), std::invalid_argument);
  EXPECT_THROW(make_sgd({{"w", &w.p}}, SgdOptions{0.1, 0.9, 0.1, 0, true}), std::invalid_argument);
}

TEST(AdamW, MatchesPyTorchFormula) {
  HostDevice d(0, DeviceKind::host_worker);
  for (double wd : {0.0, 0.01, 0.1}) {
    AdamWOptions o;
    o.lr = 0.05;
    o.weight_decay = wd;
    SCOPED_TRACE(::testing::Message() << "weight_decay " << wd);
    expect_close(run(d, [&](auto ps) { return make_adamw(std::move(ps), o); }), reference_adamw(o));
  }
}

TEST(AdamW, DefaultsArePyTorchs) {
  const AdamWOptions o;
  EXPECT_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.beta1, 0.9);
  EXPECT_EQ(o.beta2, 0.999);
  EXPECT_EQ(o.eps, 1e-8);
  EXPECT_EQ(o.weight_decay, 0.01);
}

TEST(AdamW, RejectsWhatPyTorchRejects) {
  HostDevice d(0, DeviceKind::host_worker);
  Param w(d, kStart);
  AdamWOptions bad_beta;
  bad_beta.beta2 = 1.0;
  EXPECT_THROW(make_adamw({{"w", &w.p}}, bad_beta), std::invalid_argument);
  AdamWOptions bad_lr;
  bad_lr.lr = -1;
  EXPECT_THROW(make_adamw({{"w", &w.p}}, bad_lr), std::invalid_argument);
}

}  // namespace
}  // namespace dpt
