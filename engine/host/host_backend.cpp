#include "engine/host/host_backend.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <thread>

#include <fmt/format.h>

#include "engine/core/kernels.hpp"
#include "engine/host/host_communicator.hpp"
#include "engine/host/host_gemm.hpp"

namespace dpt {

Tensor copy_to(Backend& backend, const Tensor& src, Device& device, MemoryCategory category) {
  Tensor dst = Tensor::empty(device, src.shape(), src.dtype(), category);
  backend.copy(src, dst);
  return dst;
}

HostBackend::HostBackend(int device_count) {
  if (device_count < 1)
    throw std::invalid_argument(fmt::format("host backend: --devices must be at least 1, got {}", device_count));
  // Loads the GEMM libraries (one BLAS thread per worker: parallelism comes from
  // the devices, as on GPUs) before any worker thread exists.
  (void)host_gemm_info();
  for (int i = 0; i < device_count; ++i) devices_.push_back(std::make_unique<HostDevice>(i, DeviceKind::host_worker));
}

Device& HostBackend::device(int index) {
  if (index < 0 || index >= device_count())
    throw std::out_of_range(fmt::format("host backend has devices 0..{}, asked for {}", device_count() - 1, index));
  return *devices_[static_cast<size_t>(index)];
}

void HostBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.dtype() != dst.dtype() || src.numel() != dst.numel())
    throw std::invalid_argument(fmt::format("copy {} {} -> {} {}: dtype or size differ", dtype_name(src.dtype()),
                                            shape_to_string(src.shape()), dtype_name(dst.dtype()),
                                            shape_to_string(dst.shape())));
  if (src.size_bytes() > 0 && src.data() != dst.data()) std::memcpy(dst.data(), src.data(), static_cast<size_t>(src.size_bytes()));
}

void HostBackend::parallel_for(int n, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  auto run = [&](int i) {
    try {
      fn(i);
    } catch (...) {
      errors[static_cast<size_t>(i)] = std::current_exception();
    }
  };
  if (n == 1) {
    run(0);
  } else {
    std::vector<std::thread> workers;
    workers.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) workers.emplace_back(run, i);
    for (auto& w : workers) w.join();
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

std::vector<std::unique_ptr<Communicator>> HostBackend::make_communicators(const std::vector<int>& devices) {
  for (int d : devices) (void)device(d);  // validates the indices
  return make_host_ring_communicators(static_cast<int>(devices.size()));
}

namespace {
class StdMutex : public BackendMutex {
 public:
  void lock() override { mu_.lock(); }
  void unlock() override { mu_.unlock(); }

 private:
  std::mutex mu_;
};
}  // namespace

std::unique_ptr<BackendMutex> HostBackend::make_mutex() { return std::make_unique<StdMutex>(); }

Seconds HostBackend::now() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

}  // namespace dpt
