// Check macros for the CUDA runtime, cuBLAS and NCCL: a failing call throws
// dpt::CudaError whose what() carries file:line, the failing expression and the
// library's own error string, so a log line says where and why without a debugger.
#pragma once
#include <stdexcept>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

namespace dpt {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Build the message and throw; out of line so the macros stay small at every call site.
[[noreturn]] void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t s, const char* expr, const char* file, int line);
[[noreturn]] void throw_nccl_error(ncclResult_t r, const char* expr, const char* file, int line);

const char* cublas_status_name(cublasStatus_t s);

// Number of CUDA devices, 0 when there is none or the runtime cannot talk to a driver.
// cudaGetDeviceCount leaves its output untouched on error (error 35 without a driver),
// so the count starts at 0 and any error means "no device"; `why_none` receives the
// runtime's reason when the count is 0.
int cuda_device_count(std::string* why_none = nullptr);

}  // namespace dpt

#define DPT_CUDA_CHECK(expr)                                                       \
  do {                                                                             \
    const cudaError_t dpt_cuda_err_ = (expr);                                      \
    if (dpt_cuda_err_ != cudaSuccess) {                                            \
      (void)cudaGetLastError(); /* reset the last-error state for later checks */ \
      ::dpt::throw_cuda_error(dpt_cuda_err_, #expr, __FILE__, __LINE__);           \
    }                                                                              \
  } while (0)

#define DPT_CUBLAS_CHECK(expr)                                                     \
  do {                                                                             \
    const cublasStatus_t dpt_cublas_st_ = (expr);                                  \
    if (dpt_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::dpt::throw_cublas_error(dpt_cublas_st_, #expr, __FILE__, __LINE__);        \
  } while (0)

#define DPT_NCCL_CHECK(expr)                                                       \
  do {                                                                             \
    const ncclResult_t dpt_nccl_res_ = (expr);                                     \
    if (dpt_nccl_res_ != ncclSuccess && dpt_nccl_res_ != ncclInProgress)           \
      ::dpt::throw_nccl_error(dpt_nccl_res_, #expr, __FILE__, __LINE__);           \
  } while (0)
