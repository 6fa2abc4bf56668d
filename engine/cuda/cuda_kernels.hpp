// The CUDA kernels: the shared Thrust source (kernels_impl.hpp) instantiated for
// Thrust's CUDA system on one stream, with GEMM through cuBLAS. Built from the one
// .cu file of the backend (cuda_kernels.cu) so nvcc compiles Thrust once.
#pragma once
#include <memory>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "engine/core/kernels.hpp"
#include "engine/cuda/caching_allocator.hpp"

namespace dpt {

struct CudaKernelConfig {
  cudaStream_t stream = nullptr;        // every kernel and GEMM is enqueued here
  cublasHandle_t cublas = nullptr;      // bound to `stream` by the caller
  CachingAllocator* allocator = nullptr;  // Thrust's temporary storage (reductions)
  bool allow_tf32 = false;              // f32 GEMM on TF32 tensor cores: faster, ~1e-3 relative error
};

// Kernels for one device; the caller keeps `cublas`, `stream` and `allocator` alive.
std::unique_ptr<Kernels> make_cuda_kernels(const CudaKernelConfig& config);

}  // namespace dpt
