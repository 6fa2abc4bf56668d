// Host kernels: the shared Thrust source compiled for Thrust's CPP system, GEMM
// through OpenBLAS's CBLAS interface.
#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_CPP
#include <cblas.h>

#include <cstring>

#include <thrust/system/cpp/execution_policy.h>

#include "engine/core/kernels_impl.hpp"

namespace dpt {
namespace {

struct CppPolicy {
  auto operator()() const { return thrust::cpp::par; }
  // Column reductions walk 64 columns of each row at a time (see ColumnBlock).
  static constexpr std::int64_t column_block = 64;
};

struct OpenBlas {
  template <typename T>
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, const T* b,
            T beta, T* c) const {
    if (m == 0 || n == 0) return;
    if (k == 0) {  // BLAS may not touch C when k == 0; PyTorch's result is beta * C
      for (std::int64_t i = 0; i < m * n; ++i) c[i] = beta == T(0) ? T(0) : beta * c[i];
      return;
    }
    const auto lda = static_cast<blasint>(ta ? m : k), ldb = static_cast<blasint>(tb ? k : n),
               ldc = static_cast<blasint>(n);
    const auto op_a = ta ? CblasTrans : CblasNoTrans, op_b = tb ? CblasTrans : CblasNoTrans;
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, op_a, op_b, static_cast<blasint>(m), static_cast<blasint>(n),
                  static_cast<blasint>(k), alpha, a, lda, b, ldb, beta, c, ldc);
    else
      cblas_dgemm(CblasRowMajor, op_a, op_b, static_cast<blasint>(m), static_cast<blasint>(n),
                  static_cast<blasint>(k), alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void copy(Bytes n, const void* src, void* dst) const {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n));
  }
};

}  // namespace

Kernels& host_kernels() {
  static impl::ThrustKernels<CppPolicy, OpenBlas> kernels{CppPolicy{}, OpenBlas{}};
  return kernels;
}

}  // namespace dpt
