#include "engine/cuda/cuda_check.hpp"

#include <fmt/format.h>

namespace dpt {

void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line) {
  throw CudaError(fmt::format("{}:{}: CUDA error {} ({}): {} in {}", file, line, static_cast<int>(e),
                              cudaGetErrorName(e), cudaGetErrorString(e), expr));
}

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

void throw_cublas_error(cublasStatus_t s, const char* expr, const char* file, int line) {
  throw CudaError(fmt::format("{}:{}: cuBLAS error {} ({}) in {}", file, line, static_cast<int>(s),
                              cublas_status_name(s), expr));
}

void throw_nccl_error(ncclResult_t r, const char* expr, const char* file, int line) {
  // ncclGetLastError(nullptr) holds the detail of the last failure on this thread.
  const char* detail = ncclGetLastError(nullptr);
  throw CudaError(fmt::format("{}:{}: NCCL error {} ({}){}{} in {}", file, line, static_cast<int>(r),
                              ncclGetErrorString(r), detail && *detail ? ": " : "", detail ? detail : "", expr));
}

int cuda_device_count(std::string* why_none) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why_none)
      *why_none = fmt::format("cudaGetDeviceCount returned error {} ({}): {}{}", static_cast<int>(e),
                              cudaGetErrorName(e), cudaGetErrorString(e),
                              // Also what a machine without the NVIDIA driver answers.
                              e == cudaErrorInsufficientDriver ? " (or no NVIDIA driver is loaded on this machine)" : "");
    return 0;
  }
  if (count == 0 && why_none) *why_none = "cudaGetDeviceCount found 0 CUDA devices";
  return count;
}

}  // namespace dpt
