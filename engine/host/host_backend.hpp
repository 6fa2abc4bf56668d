// The host backend: each "device" is a worker over CPU memory with real numerics
// and wall-clock timing, so everything runs without a GPU.
#pragma once
#include <memory>
#include <vector>

#include "../backend.hpp"

namespace dpt {

class HostDevice : public Device {
 public:
  HostDevice(int index, DeviceKind kind) : index_(index), kind_(kind) {}
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
};

class HostBackend : public Backend {
 public:
  explicit HostBackend(int device_count);
  std::string name() const override { return "host"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  Device& device(int index) override;
  Device& host_memory() override { return host_; }
  void copy(const Tensor& src, Tensor& dst) override;
  void parallel_for(int n, const std::function<void(int)>& fn) override;
  std::vector<std::unique_ptr<Communicator>> make_communicators(const std::vector<int>& devices) override;
  std::unique_ptr<BackendMutex> make_mutex() override;
  Seconds now() override;

 private:
  HostDevice host_{-1, DeviceKind::cpu_host};
  std::vector<std::unique_ptr<HostDevice>> devices_;
};

}  // namespace dpt
