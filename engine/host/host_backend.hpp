// The host backend: each "device" is a worker over CPU memory with real numerics
// and wall-clock timing, so everything runs without a GPU.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/core/threaded_backend.hpp"

namespace dpt {

class HostDevice : public Device {
 public:
  HostDevice(int index, DeviceKind kind) : index_(index), kind_(kind) {}
  ~HostDevice() override;
  HostDevice(const HostDevice&) = delete;
  HostDevice& operator=(const HostDevice&) = delete;
  int index() const override { return index_; }
  DeviceKind kind() const override { return kind_; }
  std::string name() const override;
  void submit(const OpCost& cost, const std::function<void()>& fn) override;
  void synchronize() override {}
  Kernels& kernels() override;

 protected:
  void* raw_allocate(Bytes n) override;
  void raw_free(void* p, Bytes n) override;

 private:
  int index_;
  DeviceKind kind_;
  // Freed blocks of 64 KiB and more, kept for reuse by size: a training step frees
  // and re-allocates the same activation sizes every step, and fresh pages from the
  // OS cost a page fault each (about 11,000 per step of the 1024-4096-4096-1024 MLP
  // at batch 256). Logical allocations are still tracked by MemoryTracker.
  std::mutex cache_mu_;
  std::multimap<Bytes, void*> cache_;
  Bytes cached_bytes_ = 0;
};

// Per-device work on OS threads (ThreadedBackend); parallel_for(1, fn) runs fn inline.
class HostBackend : public ThreadedBackend {
 public:
  explicit HostBackend(int device_count);
  std::string name() const override { return "host"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  Device& device(int index) override;
  Device& host_memory() override { return host_; }
  void copy(const Tensor& src, Tensor& dst) override;
  std::vector<std::unique_ptr<Communicator>> make_communicators(const std::vector<int>& devices) override;
  Seconds now() override { return steady_clock_s(); }

 private:
  HostDevice host_{-1, DeviceKind::cpu_host};
  std::vector<std::unique_ptr<HostDevice>> devices_;
};

}  // namespace dpt
