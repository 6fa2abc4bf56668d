// Small RAII holders for CUDA runtime objects; none can be copied, so a handle is
// never destroyed twice.
#pragma once
#include <cuda_runtime_api.h>

namespace dpt {

// Makes `device` current for the calling thread and restores the previous one on
// scope exit, so code reached from any thread acts on the right GPU.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device);
  ~CudaDeviceGuard();
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// A CUDA event; without timing it is the cheap kind used only for ordering streams.
class CudaEvent {
 public:
  explicit CudaEvent(bool timing = false);
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t s);

 private:
  cudaEvent_t event_ = nullptr;
};

// Makes `waiter` wait for all work enqueued so far on `producer` (no host blocking).
void cuda_stream_wait(cudaStream_t waiter, cudaStream_t producer, CudaEvent& scratch);

}  // namespace dpt
