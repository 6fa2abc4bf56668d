// CudaDevice: one GPU as a dptwin Device. Memory comes from a caching allocator;
// kernels are enqueued on the device's compute stream (Thrust and cuBLAS); an
// optional timeline records CUDA events around every op.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "engine/core/device.hpp"
#include "engine/cuda/caching_allocator.hpp"
#include "engine/cuda/cuda_raii.hpp"
#include "engine/cuda/cuda_timeline.hpp"

namespace dpt {

struct CudaDeviceOptions {
  bool allow_tf32 = false;  // f32 GEMM on TF32 tensor cores; off so host and CUDA gradients agree to 1e-5
  bool record_timeline = false;  // CUDA events around every op (for the step report and trace)
};

class CudaDevice : public Device {
 public:
  CudaDevice(int index, const CudaDeviceOptions& options);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  int index() const override { return index_; }
  DeviceKind kind() const override { return DeviceKind::cuda; }
  bool host_readable() const override { return false; }
  std::string name() const override;
  // Makes this device current and calls fn, which enqueues its kernels on the
  // compute stream; with a timeline, CUDA events bracket the op.
  void submit(const OpCost& cost, const std::function<void()>& fn) override;
  void synchronize() override;
  Kernels& kernels() override { return *kernels_; }
  std::optional<Bytes> capacity_bytes() const override { return total_bytes_; }

  cudaStream_t stream() const { return stream_; }
  CachingAllocator& allocator() { return allocator_; }
  CudaTimeline& timeline() { return timeline_; }
  bool records_timeline() const { return options_.record_timeline; }
  void set_record_timeline(bool on) { options_.record_timeline = on; }
  const std::string& device_name() const { return device_name_; }  // e.g. "NVIDIA H100 80GB HBM3"

 protected:
  void* raw_allocate(Bytes n) override { return allocator_.allocate(n); }
  void raw_free(void* p, Bytes n) override { allocator_.deallocate(p, n); }

 private:
  int index_;
  CudaDeviceOptions options_;
  // The allocator is declared before the kernels so it outlives Thrust's temporaries.
  CachingAllocator allocator_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<Kernels> kernels_;
  CudaTimeline timeline_;
  Bytes total_bytes_ = 0;
  std::string device_name_;
};

}  // namespace dpt
