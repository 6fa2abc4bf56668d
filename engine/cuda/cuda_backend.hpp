// CudaBackend: the GPUs of this process as a dptwin Backend. Copies use
// cudaMemcpyPeerAsync where peer access is enabled and stage through pinned host
// memory where it is not; parallel_for runs one OS thread per GPU; communicators
// are NCCL.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/core/threaded_backend.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/cuda/caching_allocator.hpp"
#include "engine/cuda/cuda_device.hpp"
#include "engine/core/timed_interval.hpp"

namespace dpt {

struct CudaBackendOptions {
  std::optional<int> device_count;  // use the first N GPUs; all visible GPUs when absent
  CudaDeviceOptions device;          // per-device options (TF32, timeline)
  Bytes staging_chunk_bytes = 64 * kMiB;  // pinned staging buffer for copies without peer access
  // host_memory() in page-locked memory: host-device copies at full PCIe rate, but
  // each allocation costs a cudaMallocHost (slow); the benchmarks turn it on.
  bool pinned_host_memory = false;
};

class CudaBackend : public ThreadedBackend {
 public:
  // Throws std::invalid_argument when no GPU is present (with the runtime's reason)
  // or when more GPUs are asked for than are visible.
  explicit CudaBackend(const CudaBackendOptions& options = {});
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  Device& device(int index) override { return cuda_device(index); }
  CudaDevice& cuda_device(int index);
  Device& host_memory() override { return *host_; }
  void copy(const Tensor& src, Tensor& dst) override;
  std::vector<std::unique_ptr<Communicator>> make_communicators(const std::vector<int>& devices) override;
  // Waits for every device, then reads the steady clock: a time after all work
  // enqueued so far has finished.
  Seconds now() override;

  // Measured timing: start_timelines() records CUDA events around every op from now
  // on (all devices); collect_timelines() waits for the devices and returns the
  // intervals since the start, each device's origin taken at the same host instant
  // (after a synchronisation), so cross-device offsets are within microseconds.
  void start_timelines();
  MeasuredStep collect_timelines(Seconds step_time_s);

  // Whether device `from` reads and writes `to`'s memory directly (peer access enabled).
  bool peer_access(int from, int to) const;

 protected:
  void on_worker_start(int i) override;

 private:
  void copy_device_to_device(CudaDevice& s, CudaDevice& d, const void* src, void* dst, Bytes n);
  std::unique_ptr<HostDevice> host_;
  std::vector<std::unique_ptr<CudaDevice>> devices_;
  std::vector<std::vector<bool>> peer_;  // peer_[i][j]: i can access j
  Bytes staging_chunk_bytes_;
  std::mutex staging_mu_;
  PinnedBuffer staging_;  // allocated on the first staged copy
};

// Library versions for reports: "CUDA runtime 13.0", "driver 13.0", "NCCL 2.28.9", "cuBLAS 13.1.0".
struct CudaVersions {
  std::string runtime, driver, nccl, cublas;
};
CudaVersions cuda_versions();

}  // namespace dpt
