#include "engine/cuda/caching_allocator.hpp"

#include <fmt/format.h>

#include "engine/core/device.hpp"
#include "engine/cuda/cuda_check.hpp"
#include "engine/cuda/cuda_raii.hpp"

namespace dpt {

Bytes CachingAllocator::rounded_size(Bytes n) {
  constexpr Bytes kSmall = 512, kLarge = 2 * kMiB;
  if (n <= kMiB) return (n + kSmall - 1) / kSmall * kSmall;
  return (n + kLarge - 1) / kLarge * kLarge;
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  // Destructors must not throw: a failure here (driver already gone at exit) only leaks.
  try {
    release_cached_locked();
  } catch (...) {
  }
}

void* CachingAllocator::allocate(Bytes n) {
  if (n <= 0) return nullptr;
  const Bytes size = rounded_size(n);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    return p;
  }
  CudaDeviceGuard guard(device_);
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, static_cast<size_t>(size));
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    release_cached_locked();  // fragmentation across size classes: give everything back and retry
    e = cudaMalloc(&p, static_cast<size_t>(size));
  }
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    throw OutOfMemory(fmt::format("out of memory on cuda:{}: cudaMalloc of {:.3f} GiB failed with {:.3f} GiB "
                                  "reserved by dptwin, {:.3f} GiB free of {:.3f} GiB on the device",
                                  device_, static_cast<double>(size) / kGiB, static_cast<double>(reserved_) / kGiB,
                                  static_cast<double>(free_b) / kGiB, static_cast<double>(total_b) / kGiB));
  }
  DPT_CUDA_CHECK(e);
  reserved_ += size;
  return p;
}

void CachingAllocator::deallocate(void* p, Bytes n) {
  if (!p) return;
  const Bytes size = rounded_size(n);
  std::lock_guard<std::mutex> lock(mu_);
  free_[size].push_back(p);
  cached_ += size;
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  if (cached_ == 0) return;
  CudaDeviceGuard guard(device_);
  // cudaFree waits for the device; work that used these blocks has been enqueued
  // before they were freed, so it completes first.
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) {
      DPT_CUDA_CHECK(cudaFree(p));
      reserved_ -= size;
    }
    blocks.clear();
  }
  free_.clear();
  cached_ = 0;
}

Bytes CachingAllocator::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}

Bytes CachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    alloc_ = o.alloc_; p_ = o.p_; n_ = o.n_;
    o.p_ = nullptr; o.n_ = 0;
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (p_ && alloc_) alloc_->deallocate(p_, n_);
  p_ = nullptr;
  n_ = 0;
}

PinnedBuffer::PinnedBuffer(Bytes n) : n_(n) {
  if (n > 0) DPT_CUDA_CHECK(cudaMallocHost(&p_, static_cast<size_t>(n)));
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) (void)cudaFreeHost(p_);
    p_ = o.p_; n_ = o.n_;
    o.p_ = nullptr; o.n_ = 0;
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (p_) (void)cudaFreeHost(p_);
}

}  // namespace dpt
