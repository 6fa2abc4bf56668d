// The one .cu file of the CUDA backend: the shared Thrust kernels on a CUDA stream
// and the cuBLAS GEMM. Only the Thrust headers kernels_impl.hpp needs are included,
// to keep nvcc's time down (two architectures, sm_80 and sm_90).
#include <cstdint>
#include <limits>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <thrust/system/cuda/execution_policy.h>

#include "engine/core/kernels_impl.hpp"
#include "engine/cuda/cublas_api.hpp"
#include "engine/cuda/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"

namespace dpt {
namespace {

// Thrust's temporary storage (reductions) from the device's caching allocator, so a
// loss evaluation does not pay a synchronising cudaMalloc/cudaFree pair.
struct ThrustTempAllocator {
  using value_type = char;
  CachingAllocator* alloc;
  char* allocate(std::ptrdiff_t n) { return static_cast<char*>(alloc->allocate(static_cast<Bytes>(n))); }
  void deallocate(char* p, size_t n) { alloc->deallocate(p, static_cast<Bytes>(n)); }
};

// par_nosync: element-wise kernels are only enqueued; reductions still wait for
// their result, which they must return to the host.
struct CudaPolicy {
  cudaStream_t stream;
  mutable ThrustTempAllocator temp;
  auto operator()() const { return thrust::cuda::par_nosync(temp).on(stream); }
};

template <typename T> struct ScaleOrZero {  // C = beta * C, exactly 0 when beta == 0 (C may hold NaN)
  T* c; T beta;
  DPT_HD void operator()(std::int64_t i) const { c[i] = beta == T(0) ? T(0) : beta * c[i]; }
};

// f32 to bf16 or f16 with round to nearest even: autocast's cast of a GEMM input.
struct ToBf16 {
  const float* x; __nv_bfloat16* y;
  __host__ __device__ void operator()(std::int64_t i) const { y[i] = __float2bfloat16_rn(x[i]); }
};
struct ToF16 {
  const float* x; __half* y;
  __host__ __device__ void operator()(std::int64_t i) const { y[i] = __float2half_rn(x[i]); }
};

int checked_int(std::int64_t v, const char* what) {
  if (v > std::numeric_limits<int>::max())
    throw std::invalid_argument("cuBLAS GEMM: " + std::string(what) + " = " + std::to_string(v) +
                                " exceeds the 32-bit limit of the cuBLAS interface");
  return static_cast<int>(v);
}

struct CublasBlas {
  cublasHandle_t handle;
  cudaStream_t stream;
  bool allow_tf32;
  CachingAllocator* allocator;  // the autocast GEMM's 16-bit input copies

  // Row-major C[M,N] = alpha op(A) op(B) + beta C. cuBLAS is column-major, and a
  // row-major matrix read column-major is its transpose, so compute
  // C^T[N,M] = op(B)^T op(A)^T: swap the operands and M with N; the leading
  // dimensions are the row-major row lengths unchanged.
  template <typename T>
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, const T* b,
            T beta, T* c) const {
    if (m == 0 || n == 0) return;
    if (k == 0) {  // PyTorch's result is beta * C; do not rely on BLAS touching C when k == 0
      thrust::for_each(thrust::cuda::par_nosync.on(stream), thrust::counting_iterator<std::int64_t>(0),
                       thrust::counting_iterator<std::int64_t>(m * n), ScaleOrZero<T>{c, beta});
      return;
    }
    const int mi = checked_int(m, "M"), ni = checked_int(n, "N"), ki = checked_int(k, "K");
    const int lda = ta ? mi : ki, ldb = tb ? ki : ni, ldc = ni;
    const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if constexpr (std::is_same_v<T, float>) {
      // Explicit compute type: plain FP32 unless TF32 was asked for, whatever the handle's math mode.
      const cublasComputeType_t compute = allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      DPT_CUBLAS_CHECK(cublas_api().gemm_ex(handle, op_b, op_a, ni, mi, ki, &alpha, b, CUDA_R_32F, ldb, a,
                                            CUDA_R_32F, lda, &beta, c, CUDA_R_32F, ldc, compute,
                                            CUBLAS_GEMM_DEFAULT));
    } else {
      DPT_CUBLAS_CHECK(cublas_api().dgemm(handle, op_b, op_a, ni, mi, ki, &alpha, b, ldb, a, lda, &beta, c, ldc));
    }
  }
  // Autocast's GEMM: A and B cast to 16-bit copies (caching-allocator blocks, reused
  // only by later work on this stream), then cublasGemmEx with 16-bit inputs, an f32 C and
  // CUBLAS_COMPUTE_32F: products summed in f32, as torch.autocast's matmul runs.
  void gemm_autocast(DType low, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                     const float* a, const float* b, float beta, float* c) const {
    if (m == 0 || n == 0) return;
    if (k == 0) {
      gemm<float>(ta, tb, m, n, k, alpha, a, b, beta, c);  // beta * C, no inputs read
      return;
    }
    const int mi = checked_int(m, "M"), ni = checked_int(n, "N"), ki = checked_int(k, "K");
    const int lda = ta ? mi : ki, ldb = tb ? ki : ni, ldc = ni;
    const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (low != DType::bf16 && low != DType::f16)
      throw std::invalid_argument("cuBLAS autocast GEMM: bf16 or f16 inputs, got " + std::string(dtype_name(low)));
    const DeviceBuffer a_low(*allocator, m * k * 2), b_low(*allocator, k * n * 2);
    const auto policy = thrust::cuda::par_nosync.on(stream);
    const thrust::counting_iterator<std::int64_t> zero(0);
    const cudaDataType_t type = low == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    if (low == DType::bf16) {
      thrust::for_each(policy, zero, zero + m * k, ToBf16{a, static_cast<__nv_bfloat16*>(a_low.data())});
      thrust::for_each(policy, zero, zero + k * n, ToBf16{b, static_cast<__nv_bfloat16*>(b_low.data())});
    } else {
      thrust::for_each(policy, zero, zero + m * k, ToF16{a, static_cast<__half*>(a_low.data())});
      thrust::for_each(policy, zero, zero + k * n, ToF16{b, static_cast<__half*>(b_low.data())});
    }
    DPT_CUBLAS_CHECK(cublas_api().gemm_ex(handle, op_b, op_a, ni, mi, ki, &alpha, b_low.data(), type, ldb,
                                          a_low.data(), type, lda, &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
  }
  void copy(Bytes n, const void* src, void* dst) const {
    if (n > 0 && src != dst)
      DPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n), cudaMemcpyDeviceToDevice, stream));
  }
};

}  // namespace

std::unique_ptr<Kernels> make_cuda_kernels(const CudaKernelConfig& config) {
  if (!config.stream || !config.cublas || !config.allocator)
    throw std::invalid_argument("make_cuda_kernels: stream, cuBLAS handle and allocator are required");
  using K = impl::ThrustKernels<CudaPolicy, CublasBlas>;
  return std::make_unique<K>(CudaPolicy{config.stream, ThrustTempAllocator{config.allocator}},
                             CublasBlas{config.cublas, config.stream, config.allow_tf32, config.allocator});
}

}  // namespace dpt
