#include "engine/host/host_backend.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

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

HostBackend::HostBackend(int device_count) : ThreadedBackend(/*inline_single_worker=*/true) {
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

std::vector<std::unique_ptr<Communicator>> HostBackend::make_communicators(const std::vector<int>& devices) {
  for (int d : devices) (void)device(d);  // validates the indices
  return make_host_ring_communicators(static_cast<int>(devices.size()));
}

}  // namespace dpt
