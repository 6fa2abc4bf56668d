#include <cstdlib>
#include <new>

#include <fmt/format.h>

#include "../kernels.hpp"
#include "host_backend.hpp"

namespace dpt {

std::string HostDevice::name() const {
  return index_ < 0 ? std::string("cpu") : fmt::format("host:{}", index_);
}

void HostDevice::submit(const OpCost&, const std::function<void()>& fn) { fn(); }

Kernels& HostDevice::kernels() { return host_kernels(); }

void* HostDevice::raw_allocate(Bytes n) {
  if (n == 0) return nullptr;
  // 64-byte alignment for vector loads; round the size up as aligned_alloc requires.
  const auto rounded = static_cast<size_t>((n + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}

void HostDevice::raw_free(void* p, Bytes) { std::free(p); }

}  // namespace dpt
