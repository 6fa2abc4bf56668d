// Host kernels: the shared Thrust source compiled for Thrust's CPP system, GEMM
// through host_gemm (oneDNN and OpenBLAS, chosen by CPU flags).
#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_CPP

#include <cstring>
#include <vector>

#include <thrust/system/cpp/execution_policy.h>

#include "engine/core/kernels_impl.hpp"
#include "engine/host/host_gemm.hpp"

namespace dpt {
namespace {

struct CppPolicy {
  auto operator()() const { return thrust::cpp::par; }
  // Column reductions walk 64 columns of each row at a time (see ColumnBlock).
  static constexpr std::int64_t column_block = 64;
};

// GEMM through the dispatch of host_gemm.hpp (oneDNN f32, OpenBLAS f64 with a
// core chosen from the CPU's flags).
struct HostBlas {
  template <typename T>
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, const T* b,
            T beta, T* c) const {
    host_gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  // Autocast's GEMM emulated: op(A) and op(B) rounded to the low type into f32
  // copies, then the f32 GEMM. A product of two bf16 (8-bit) or f16 (11-bit)
  // significands is exact in f32's 24 bits, so only the f32 summation rounds, as on
  // tensor cores (whose summation order differs).
  void gemm_autocast(DType low, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                     const float* a, const float* b, float beta, float* c) const {
    const LowFormat f = low_format(low);
    auto rounded = [f](const float* x, std::int64_t count) {
      std::vector<float> out(static_cast<size_t>(count));
      for (std::int64_t i = 0; i < count; ++i)
        out[static_cast<size_t>(i)] = static_cast<float>(round_to_format(static_cast<double>(x[i]), f));
      return out;
    };
    const std::vector<float> a_low = rounded(a, m * k), b_low = rounded(b, k * n);
    host_gemm(ta, tb, m, n, k, alpha, a_low.data(), b_low.data(), beta, c);
  }
  void copy(Bytes n, const void* src, void* dst) const {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n));
  }
};

}  // namespace

Kernels& host_kernels() {
  static impl::ThrustKernels<CppPolicy, HostBlas> kernels{CppPolicy{}, HostBlas{}};
  return kernels;
}

}  // namespace dpt
