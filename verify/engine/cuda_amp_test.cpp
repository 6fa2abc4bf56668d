// AMP on GPUs (ctest label `gpu`; without a GPU each test is reported as skipped
// with the CUDA runtime's reason): cublasGemmEx with bf16/f16 inputs and f32
// accumulation against the host's emulation, the rounding kernel against the host's
// rounding, and bf16-amp / f16-amp training steps against the host's f32 step.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "engine/cuda/cuda_backend.hpp"
#include "engine/cuda/cuda_check.hpp"
#include "engine/host/host_backend.hpp"
#include "verify/support/amp_cases.hpp"
#include "verify/support/rc_cases.hpp"
#include "verify/support/strategy_fixtures.hpp"

using namespace dpt;

#define DPT_REQUIRE_GPU()                                                                          \
  do {                                                                                             \
    std::string why_;                                                                              \
    if (cuda_device_count(&why_) < 1) GTEST_SKIP() << "needs 1 CUDA device(s), found 0 (" << why_ << ")"; \
  } while (0)

namespace {

std::vector<float> random_floats(size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(gen);
  return v;
}

Tensor on_gpu(CudaBackend& cuda, const std::vector<float>& v, const Shape& s) {
  Tensor h = Tensor::empty(cuda.host_memory(), s, DType::f32, MemoryCategory::workspace);
  std::copy(v.begin(), v.end(), h.data_as<float>());
  return copy_to(cuda, h, cuda.device(0), MemoryCategory::workspace);
}

std::vector<float> from_gpu(CudaBackend& cuda, const Tensor& t) {
  const Tensor h = copy_to(cuda, t, cuda.host_memory(), MemoryCategory::workspace);
  return std::vector<float>(h.data_as<float>(), h.data_as<float>() + h.numel());
}

// Invariant: the GPU's and the host's autocast GEMM multiply the same rounded
// inputs exactly (a product of two bf16 or f16 values is exact in f32) and differ
// only in the order of the f32 sums, so |C_gpu - C_host| <= 2 gamma_k sum_l |a_il b_lj|
// with gamma_k = k u32 / (1 - k u32), u32 = 2^-24, elementwise.
TEST(CudaAmp, GemmExWithLowInputsMatchesTheHostEmulationToF32Summation) {
  DPT_REQUIRE_GPU();
  CudaBackend cuda;
  Device& gpu = cuda.device(0);
  const std::int64_t m = 37, n = 29, k = 301;
  for (DType low : {DType::bf16, DType::f16}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        const auto a = random_floats(static_cast<size_t>(m * k), 1), b = random_floats(static_cast<size_t>(k * n), 2);
        std::vector<float> c(static_cast<size_t>(m * n), 0.0f);
        host_kernels().gemm_autocast(low, ta, tb, m, n, k, 1.0, a.data(), b.data(), 0.0, c.data());
        Tensor ga = on_gpu(cuda, a, {static_cast<std::int64_t>(a.size())});
        Tensor gb = on_gpu(cuda, b, {static_cast<std::int64_t>(b.size())});
        Tensor gc = on_gpu(cuda, c, {m, n});
        gpu.submit({"gemm_autocast", OpKind::compute}, [&] {
          gpu.kernels().gemm_autocast(low, ta, tb, m, n, k, 1.0, ga.data_as<float>(), gb.data_as<float>(), 0.0,
                                      gc.data_as<float>());
        });
        const auto got = from_gpu(cuda, gc);
        const double u32 = std::ldexp(1.0, -24), gamma = k * u32 / (1 - k * u32);
        const LowFormat f = low_format(low);
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double abs_sum = 0;
            for (std::int64_t l = 0; l < k; ++l) {
              const float av = ta ? a[static_cast<size_t>(l * m + i)] : a[static_cast<size_t>(i * k + l)];
              const float bv = tb ? b[static_cast<size_t>(j * k + l)] : b[static_cast<size_t>(l * n + j)];
              abs_sum += std::fabs(round_to_format(av, f) * round_to_format(bv, f));
            }
            const size_t at = static_cast<size_t>(i * n + j);
            ASSERT_LE(std::fabs(got[at] - c[at]), 2 * gamma * abs_sum)
                << dtype_name(low) << " ta=" << ta << " tb=" << tb << " C[" << i << "," << j << "]";
          }
      }
    }
  }
}

// Invariant: the GPU's rounding to bf16/f16 is the host's, bit for bit, on normal,
// subnormal, tie, overflowing and non-finite values.
TEST(CudaAmp, RoundingKernelIsTheHostsRounding) {
  DPT_REQUIRE_GPU();
  CudaBackend cuda;
  Device& gpu = cuda.device(0);
  std::vector<float> v = random_floats(4096, 3, 4.0f);
  for (float x : {0.0f, -0.0f, 1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -9), 65519.0f, 65520.0f,
                  std::ldexp(1.0f, -20), std::ldexp(1.0f, -126), 3.4e38f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()})
    v.push_back(x);
  for (DType low : {DType::bf16, DType::f16}) {
    Tensor g = on_gpu(cuda, v, {static_cast<std::int64_t>(v.size())});
    gpu.submit({"round", OpKind::memory}, [&] { gpu.kernels().round_to(low, g.numel(), g.data_as<float>()); });
    const auto got = from_gpu(cuda, g);
    std::vector<float> want = v;
    host_kernels().round_to(low, static_cast<Elements>(want.size()), want.data());
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << dtype_name(low) << " " << v[i];
        continue;
      }
      ASSERT_EQ(got[i], want[i]) << dtype_name(low) << " rounding " << v[i];
    }
  }
}

// Invariant: one bf16-amp (f16-amp with its GradScaler) step on the GPU gives
// gradients within amp_tolerance(low, depth, kappa) of the host's f32 step (the bound and
// its derivation are in verify/support/amp_cases.hpp; the host's emulation meets the
// same bound in autocast_test).
TEST(CudaAmp, AmpStepGradientsAreWithinTheRoundingToleranceOfTheHostF32Step) {
  DPT_REQUIRE_GPU();
  CudaBackend cuda;
  for (DType low : {DType::bf16, DType::f16}) {
    DPT_EXPECT_PROPERTY(std::string(dtype_name(low)) + "-amp on CUDA near host f32", 30, [&] {
      const verify::MlpCase c = dpt::test::gen_amp_case();
      HostBackend host(1);
      const verify::Batch b = dpt::test::make_batch(host, c);
      const auto f32 = dpt::test::amp_step_grads(host, c, b, std::nullopt);
      const verify::Batch gb = dpt::test::make_batch(cuda, c);
      const auto amp = dpt::test::amp_step_grads(cuda, c, gb, low);
      const dpt::test::GradError e = dpt::test::gradient_error(amp, f32, dpt::test::full_batch_scale(host, c, b));
      const double tol =
          dpt::test::amp_tolerance(low, c.spec.widths.size() - 1, dpt::test::mse_cancellation(host, c, b));
      RC_LOG() << dpt::test::describe(c) << " " << dtype_name(low) << "-amp on CUDA: " << e << " tolerance " << tol
               << "\n";
      RC_ASSERT(e.global <= tol);
    });
  }
}

}  // namespace
