// GradScaler (torch.cuda.amp.GradScaler) on the host: the skip-and-backoff rule on
// an inf/NaN gradient, the growth rule, and that a finite step with a power-of-two
// scale is exactly the wrapped optimizer's step on the unscaled gradients.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "engine/core/fault_injection.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/optim/grad_scaler.hpp"
#include "verify/support/rc_cases.hpp"
#include "verify/support/strategy_fixtures.hpp"

namespace dpt {
namespace {

using namespace dpt::test;

// A model whose gradients are `scale` times a fixed pattern, the pattern chosen so
// that its values times any power of two in [2^-20, 2^20] stay exact in f32.
Sequential model_with_grads(Device& d, double scale) {
  Sequential m = make_mlp(parse_mlp_spec("mlp:3-4-2"), d, DType::f32, 1);
  int i = 0;
  for (auto& p : m.named_parameters()) {
    float* g = p.param->grad.data_as<float>();
    for (Elements e = 0; e < p.param->grad.numel(); ++e) g[e] = static_cast<float>(scale * ((i++ % 7) - 3) / 8.0);
  }
  return m;
}

GradScaler scaler_over(Sequential& m, GradScalerOptions o = {}) {
  return GradScaler(make_sgd(m.named_parameters(), SgdOptions{0.1}), m.named_parameters(), o);
}

// Invariant: one inf or NaN anywhere in the gradients skips the step (every
// parameter unchanged, bit for bit), halves the scale and resets the growth tracker.
bool inf_step_is_skipped() {
  HostBackend backend(1);
  Sequential m = model_with_grads(backend.device(0), 65536.0);
  GradScaler s = scaler_over(m);
  s.step();  // one finite step first, so the tracker has something to reset
  RC_ASSERT(s.growth_tracker() == 1);
  auto params = m.named_parameters();
  const size_t t = *rc::gen::inRange<size_t>(0, params.size());
  Tensor& g = params[t].param->grad;
  const auto at = *rc::gen::inRange<Elements>(0, g.numel());
  const double bad = *rc::gen::element(std::numeric_limits<double>::infinity(),
                                       -std::numeric_limits<double>::infinity(),
                                       std::numeric_limits<double>::quiet_NaN());
  g.data_as<float>()[at] = static_cast<float>(bad);
  RC_LOG() << "tensor " << params[t].name << " element " << at << " = " << bad << "\n";
  const auto before = values_of(m);
  s.step();
  RC_ASSERT(s.last_step_skipped());
  RC_ASSERT(values_of(m) == before);
  RC_ASSERT(s.scale() == 32768.0);
  RC_ASSERT(s.growth_tracker() == 0);
  RC_ASSERT(s.skipped_steps() == 1);
  return true;
}

TEST(GradScaler, AnInfOrNanGradientSkipsTheStepAndHalvesTheScale) {
  DPT_EXPECT_PROPERTY("inf/NaN gradient: step skipped, scale halved", 50, [] { inf_step_is_skipped(); });
}

TEST(GradScaler, PlantedStepOnInfIsCaught) {
  const ScopedFault planted(Fault::grad_scaler_steps_on_inf);
  DPT_EXPECT_COUNTEREXAMPLE("GradScaler steps on inf", 20, [] { inf_step_is_skipped(); });
}

// Invariant: with finite gradients S g (S a power of two) the scaler's step is
// plain SGD's step on g, bit for bit: unscaling by 1/S is exact.
TEST(GradScaler, AFiniteStepIsTheInnerStepOnTheUnscaledGradients) {
  HostBackend backend(1);
  Sequential scaled = model_with_grads(backend.device(0), 65536.0);
  Sequential plain = model_with_grads(backend.device(0), 1.0);
  GradScaler s = scaler_over(scaled);
  auto sgd = make_sgd(plain.named_parameters(), SgdOptions{0.1});
  s.step();
  sgd->step();
  EXPECT_FALSE(s.last_step_skipped());
  EXPECT_EQ(values_of(scaled), values_of(plain));
  EXPECT_EQ(grads_of(scaled), grads_of(plain));  // .grad holds the unscaled gradient after step, as in torch
  EXPECT_EQ(s.loss_scale(), 65536.0);
}

// torch's _amp_update_scale_: growth_interval finite steps in a row multiply the
// scale by growth_factor; an overflow in between restarts the count.
TEST(GradScaler, TheScaleGrowsAfterGrowthIntervalFiniteStepsInARow) {
  HostBackend backend(1);
  GradScalerOptions o;
  o.init_scale = 1024;
  o.growth_interval = 3;
  Sequential m = model_with_grads(backend.device(0), 0.0);
  GradScaler s = scaler_over(m, o);
  s.step();
  s.step();
  EXPECT_EQ(s.scale(), 1024.0);
  s.step();
  EXPECT_EQ(s.scale(), 2048.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  s.step();
  m.named_parameters()[0].param->grad.data_as<float>()[0] = std::numeric_limits<float>::infinity();
  s.step();
  EXPECT_EQ(s.scale(), 1024.0);
  m.zero_grad();
  s.step();
  s.step();
  EXPECT_EQ(s.scale(), 1024.0);  // two finite steps since the overflow: not yet
  s.step();
  EXPECT_EQ(s.scale(), 2048.0);
}

TEST(GradScaler, DefaultsArePyTorchsAndBadOptionsAreRejectedByName) {
  const GradScalerOptions d;
  EXPECT_EQ(d.init_scale, 65536.0);
  EXPECT_EQ(d.growth_factor, 2.0);
  EXPECT_EQ(d.backoff_factor, 0.5);
  EXPECT_EQ(d.growth_interval, 2000);
  HostBackend backend(1);
  Sequential m = model_with_grads(backend.device(0), 1.0);
  GradScalerOptions bad;
  bad.backoff_factor = 1.5;
  try {
    scaler_over(m, bad);
    FAIL() << "backoff_factor 1.5 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("backoff_factor"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dpt
