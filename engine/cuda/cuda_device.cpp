#include "engine/cuda/cuda_device.hpp"

#include <fmt/format.h>

#include "engine/cuda/cublas_api.hpp"
#include "engine/cuda/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"

namespace dpt {

CudaDevice::CudaDevice(int index, const CudaDeviceOptions& options)
    : index_(index), options_(options), allocator_(index), timeline_(index) {
  CudaDeviceGuard guard(index);
  cudaDeviceProp prop{};
  DPT_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  device_name_ = prop.name;
  total_bytes_ = static_cast<Bytes>(prop.totalGlobalMem);
  // A non-blocking stream: it does not serialise with the legacy default stream
  // that libraries or other threads may use.
  DPT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  const CublasApi& blas = cublas_api();
  DPT_CUBLAS_CHECK(blas.create(&cublas_));
  DPT_CUBLAS_CHECK(blas.set_stream(cublas_, stream_));
  // Pedantic math keeps cuBLAS off reduced-precision paths unless TF32 was asked for;
  // f32 GEMMs name their compute type explicitly as well (cuda_kernels.cu).
  DPT_CUBLAS_CHECK(blas.set_math_mode(cublas_, options.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
  kernels_ = make_cuda_kernels(CudaKernelConfig{stream_, cublas_, &allocator_, options.allow_tf32});
}

CudaDevice::~CudaDevice() {
  // Work still queued may use cached blocks; let it finish before they are freed.
  if (stream_) (void)cudaStreamSynchronize(stream_);
  kernels_.reset();
  if (cublas_) (void)cublas_api().destroy(cublas_);  // loaded: the constructor made the handle
  if (stream_) (void)cudaStreamDestroy(stream_);
}

std::string CudaDevice::name() const { return fmt::format("cuda:{}", index_); }

void CudaDevice::submit(const OpCost& cost, const std::function<void()>& fn) {
  CudaDeviceGuard guard(index_);
  if (options_.record_timeline && timeline_.started()) {
    const int h = timeline_.begin(stream_, cost, 0, false);
    fn();
    timeline_.end(h, stream_);
  } else {
    fn();
  }
}

void CudaDevice::synchronize() {
  CudaDeviceGuard guard(index_);
  DPT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace dpt
