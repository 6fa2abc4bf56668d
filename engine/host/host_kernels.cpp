// Host kernels: the shared Thrust source compiled for Thrust's CPP system, GEMM
// through host_gemm (oneDNN and OpenBLAS, chosen by CPU flags).
#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_CPP

#include <cstring>

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
