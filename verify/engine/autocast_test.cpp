// Autocast on the host (bf16-amp, f16-amp emulated in f32 containers): Linear's
// outputs and input gradients are values of the low type, and one step's gradients
// stay within the stated rounding tolerance of the f32 step's.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cmath>

#include "engine/core/fault_injection.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/nn/layers.hpp"
#include "verify/support/amp_cases.hpp"
#include "verify/support/rc_cases.hpp"
#include "verify/support/strategy_fixtures.hpp"

namespace dpt {
namespace {

using namespace dpt::test;

bool all_in_low_type(const Tensor& t, DType low) {
  const float* v = t.data_as<float>();
  for (Elements i = 0; i < t.numel(); ++i)
    if (round_to_format(static_cast<double>(v[i]), low_format(low)) != static_cast<double>(v[i])) return false;
  return true;
}

// Invariant: an autocast Linear returns y and dx that are bf16 (f16) values, as
// autocast returns bf16 (f16) tensors; its weight gradient stays f32.
void outputs_are_low_type_values() {
  const DType low = *rc::gen::element(DType::bf16, DType::f16);
  const auto in = *rc::gen::inRange<std::int64_t>(1, 33), out = *rc::gen::inRange<std::int64_t>(1, 33);
  const auto batch = *rc::gen::inRange<std::int64_t>(1, 9);
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1000);
  HostBackend backend(1);
  Device& d = backend.device(0);
  Generator gen(seed);
  Linear lin(d, in, out, DType::f32, gen);
  lin.set_autocast(low);
  Tensor x = Tensor::empty(d, {batch, in}, DType::f32, MemoryCategory::inputs);
  Tensor dy = Tensor::empty(d, {batch, out}, DType::f32, MemoryCategory::activations);
  for (Elements i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = static_cast<float>(gen.uniform(-1, 1));
  for (Elements i = 0; i < dy.numel(); ++i) dy.data_as<float>()[i] = static_cast<float>(gen.uniform(-1, 1));
  const Tensor y = lin.forward(x);
  const Tensor dx = lin.backward(dy, true);
  RC_LOG() << dtype_name(low) << " Linear(" << in << ", " << out << ") batch " << batch << " seed " << seed << "\n";
  RC_ASSERT(all_in_low_type(y, low));
  RC_ASSERT(all_in_low_type(dx, low));
}

TEST(Autocast, LinearOutputsAndInputGradientsAreLowTypeValues) {
  DPT_EXPECT_PROPERTY("autocast Linear returns bf16/f16 values", 100, [] { outputs_are_low_type_values(); });
}

TEST(Autocast, PlantedUnroundedOutputIsCaught) {
  const ScopedFault planted(Fault::autocast_output_unrounded);
  DPT_EXPECT_COUNTEREXAMPLE("autocast output left in f32", 50, [] { outputs_are_low_type_values(); });
}

// Autocast casts linear's bias to the low type too, before it meets the f32 accumulation.
// Worked by hand for bf16 (8 significant bits; spacing 2^-7 just above 1): x = 1, W = 1 and
// b = 2^-8 (1 + 2^-9). The bias's bf16 cast is 2^-8, so 1 + 2^-8 is the midpoint between 1
// and 1 + 2^-7 and rounds to even: y = 1. The f32 bias lies above the midpoint: y = 1 + 2^-7.
TEST(Autocast, LinearAddsTheBiasAutocastCast) {
  auto y_of = [] {
    HostBackend backend(1);
    Device& d = backend.device(0);
    Generator gen(1);
    Linear lin(d, 1, 1, DType::f32, gen);
    lin.set_autocast(DType::bf16);
    lin.weight().value.data_as<float>()[0] = 1.0f;
    lin.bias().value.data_as<float>()[0] = static_cast<float>(std::ldexp(1.0, -8) * (1 + std::ldexp(1.0, -9)));
    Tensor x = Tensor::empty(d, {1, 1}, DType::f32, MemoryCategory::inputs);
    x.data_as<float>()[0] = 1.0f;
    return static_cast<double>(lin.forward(x).data_as<float>()[0]);
  };
  EXPECT_EQ(y_of(), 1.0);
  const ScopedFault planted(Fault::autocast_bias_unrounded);
  EXPECT_EQ(y_of(), 1.0 + std::ldexp(1.0, -7));  // the planted f32 bias is caught
}

// Invariant: one step's gradients under bf16-amp and f16-amp (with its GradScaler)
// are within amp_tolerance(low, depth, kappa) of the f32 step's (amp_cases.hpp states the
// bound), relative to the sum of |per-sample terms|.
void amp_gradients_near_f32(DType low) {
  const verify::MlpCase c = gen_amp_case();
  HostBackend backend(1);
  const verify::Batch b = make_batch(backend, c);
  const auto f32 = amp_step_grads(backend, c, b, std::nullopt);
  const auto amp = amp_step_grads(backend, c, b, low);
  const GradError e = gradient_error(amp, f32, full_batch_scale(backend, c, b));
  const double tol = amp_tolerance(low, c.spec.widths.size() - 1, mse_cancellation(backend, c, b));
  RC_LOG() << describe(c) << " " << dtype_name(low) << "-amp: " << e << " tolerance " << tol << "\n"
           << error_report(amp, f32);
  RC_ASSERT(e.global <= tol);
}

TEST(Autocast, Bf16AmpGradientsAreWithinTheRoundingToleranceOfF32) {
  DPT_EXPECT_PROPERTY("bf16-amp gradients near f32", 100, [] { amp_gradients_near_f32(DType::bf16); });
}

TEST(Autocast, F16AmpGradientsAreWithinTheRoundingToleranceOfF32) {
  DPT_EXPECT_PROPERTY("f16-amp gradients near f32", 100, [] { amp_gradients_near_f32(DType::f16); });
}

TEST(Autocast, RejectsNonF32WeightsAndNonHalfTypes) {
  HostBackend backend(1);
  Generator gen(1);
  Linear f64(backend.device(0), 2, 2, DType::f64, gen);
  EXPECT_THROW(f64.set_autocast(DType::bf16), std::invalid_argument);
  Linear f32(backend.device(0), 2, 2, DType::f32, gen);
  EXPECT_THROW(f32.set_autocast(DType::f64), std::invalid_argument);
  EXPECT_NO_THROW(f32.set_autocast(std::nullopt));
}

}  // namespace
}  // namespace dpt
