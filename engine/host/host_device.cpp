#include <cstdlib>
#include <new>

#include <fmt/format.h>

#include "engine/core/kernels.hpp"
#include "engine/host/host_backend.hpp"

namespace dpt {

std::string HostDevice::name() const {
  return index_ < 0 ? std::string("cpu") : fmt::format("host:{}", index_);
}

void HostDevice::submit(const OpCost&, const std::function<void()>& fn) { fn(); }

Kernels& HostDevice::kernels() { return host_kernels(); }

namespace {
constexpr Bytes kCacheMinBytes = 64 * kKiB;  // smaller blocks: malloc's own bins recycle them well
constexpr Bytes kCacheMaxBytes = 4 * kGiB;   // beyond this, freed blocks go back to the OS
}  // namespace

HostDevice::~HostDevice() {
  for (auto& [size, p] : cache_) std::free(p);
}

void* HostDevice::raw_allocate(Bytes n) {
  if (n == 0) return nullptr;
  // 64-byte alignment for vector loads; round the size up as aligned_alloc requires.
  const auto rounded = (n + 63) / 64 * 64;
  if (rounded >= kCacheMinBytes) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (auto it = cache_.find(rounded); it != cache_.end()) {
      void* p = it->second;
      cache_.erase(it);
      cached_bytes_ -= rounded;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, static_cast<size_t>(rounded));
  if (!p) throw std::bad_alloc();
  return p;
}

void HostDevice::raw_free(void* p, Bytes n) {
  if (!p) return;
  const auto rounded = (n + 63) / 64 * 64;
  if (rounded >= kCacheMinBytes) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cached_bytes_ + rounded <= kCacheMaxBytes) {
      cache_.emplace(rounded, p);
      cached_bytes_ += rounded;
      return;
    }
  }
  std::free(p);
}

}  // namespace dpt
