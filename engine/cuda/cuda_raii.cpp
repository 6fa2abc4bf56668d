#include "engine/cuda/cuda_raii.hpp"

#include "engine/cuda/cuda_check.hpp"

namespace dpt {

CudaDeviceGuard::CudaDeviceGuard(int device) {
  int current = 0;
  DPT_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) {
    DPT_CUDA_CHECK(cudaSetDevice(device));
    previous_ = current;
  }
}

CudaDeviceGuard::~CudaDeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

CudaEvent::CudaEvent(bool timing) {
  DPT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
  if (event_) (void)cudaEventDestroy(event_);
}

void CudaEvent::record(cudaStream_t s) { DPT_CUDA_CHECK(cudaEventRecord(event_, s)); }

void cuda_stream_wait(cudaStream_t waiter, cudaStream_t producer, CudaEvent& scratch) {
  if (waiter == producer) return;
  scratch.record(producer);
  DPT_CUDA_CHECK(cudaStreamWaitEvent(waiter, scratch.get(), 0));
}

}  // namespace dpt
