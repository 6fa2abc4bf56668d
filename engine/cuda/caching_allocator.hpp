// A caching allocator over cudaMalloc for one device. cudaMalloc and cudaFree are
// slow and cudaFree synchronises the whole device, so freed blocks are kept in
// per-size free lists and handed out again; the cache is released (and the
// allocation retried) only when cudaMalloc reports out of memory.
//
// Reuse is ordered on the device's compute stream: a block freed after work was
// enqueued on that stream is only handed to work enqueued later on the same stream.
// Collectives on the communication stream are waited for by the host before their
// tensors can be released (NcclWork::wait), so they never see a reused block.
#pragma once
#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "engine/core/units.hpp"

namespace dpt {

class CachingAllocator {
 public:
  explicit CachingAllocator(int device) : device_(device) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least n bytes on this allocator's device (nullptr for n == 0).
  // Throws dpt::OutOfMemory naming the device and the sizes when even an emptied
  // cache cannot satisfy the request.
  void* allocate(Bytes n);
  void deallocate(void* p, Bytes n);
  // Returns every cached (free) block to the driver.
  void release_cached();

  Bytes reserved_bytes() const;  // held from the driver: in use plus cached
  Bytes cached_bytes() const;    // free blocks waiting for reuse

  // The size class a request of n bytes is served from: multiples of 512 B up to
  // 1 MiB, multiples of 2 MiB above, so a freed block fits requests of similar size.
  static Bytes rounded_size(Bytes n);

 private:
  void release_cached_locked();
  int device_;
  mutable std::mutex mu_;
  std::map<Bytes, std::vector<void*>> free_;  // size class -> free blocks
  Bytes reserved_ = 0, cached_ = 0;
};

// RAII device memory that cannot be copied (an accidental copy would double-free);
// it can be moved. Used for scratch buffers outside the Tensor/Storage machinery.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(CachingAllocator& alloc, Bytes n) : alloc_(&alloc), p_(alloc.allocate(n)), n_(n) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : alloc_(o.alloc_), p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  void* data() const { return p_; }
  Bytes size_bytes() const { return n_; }
  void reset();

 private:
  CachingAllocator* alloc_ = nullptr;
  void* p_ = nullptr;
  Bytes n_ = 0;
};

// RAII page-locked host memory (cudaMallocHost): staging for copies between
// devices without peer access, and the host side of bandwidth measurements.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(Bytes n);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  void* data() const { return p_; }
  Bytes size_bytes() const { return n_; }

 private:
  void* p_ = nullptr;
  Bytes n_ = 0;
};

}  // namespace dpt
