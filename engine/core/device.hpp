// Device: where tensors live and kernels run. The strategies see only this
// interface; the host, CUDA and SimGrid backends implement it.
//
// Every kernel is submitted with its cost (flops, bytes read and written), so
// the twin can charge simulated time for exactly the work the engine does, and
// the real backends can record a trace of the same ops.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/core/precision.hpp"
#include "engine/core/units.hpp"

namespace dpt {

class Kernels;

// What an allocation holds; the memory model reports peak and breakdown per category.
enum class MemoryCategory {
  parameters,       // model weights (and replicas' weights)
  gradients,        // parameter gradients
  optimizer_state,  // momentum buffers, Adam moments
  activations,      // saved forward activations and their gradients
  buckets,          // DDP gradient buckets, DataParallel coalescing buffers
  gathered_outputs, // DataParallel outputs gathered on the output device
  inputs,           // input batches and labels
  workspace,        // temporaries
  count_
};
constexpr int kMemoryCategoryCount = static_cast<int>(MemoryCategory::count_);
const char* memory_category_name(MemoryCategory c);

// Per-device live and peak bytes, overall and by category. Thread-safe.
class MemoryTracker {
 public:
  void on_allocate(Bytes n, MemoryCategory c);
  void on_free(Bytes n, MemoryCategory c);
  Bytes live_bytes() const;
  Bytes peak_bytes() const;
  // Live bytes by category at the moment the overall peak was reached.
  std::array<Bytes, kMemoryCategoryCount> breakdown_at_peak() const;
  void reset_peak();

 private:
  mutable std::mutex mu_;
  Bytes live_ = 0, peak_ = 0;
  std::array<Bytes, kMemoryCategoryCount> live_by_{}, at_peak_{};
};

// What a kernel costs, stated by the caller of every kernel.
enum class OpKind { compute, memory, copy, collective, host };
// One matrix product inside a kernel: output [m, n], inner dimension k (elements).
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};
// One kernel's share of an op that runs several (a layer's convolutions): its FLOPs and
// the bytes it reads plus writes.
struct RooflinePart {
  double flops = 0;
  double bytes = 0;
};
struct OpCost {
  const char* name = "";    // e.g. "gemm", "relu_fwd"
  OpKind kind = OpKind::compute;
  double flops = 0;         // floating-point operations
  Bytes bytes_read = 0;
  Bytes bytes_written = 0;
  // Which compute type the flops run in follows from this and the precision (the
  // twin's devices look it up); other: the tensors' dtype, as every host kernel.
  OpClass op_class = OpClass::other;
  // The op's duration as measured on this device kind (a profiled layer): the
  // twin charges it instead of its FLOPs and bytes; real devices ignore it.
  std::optional<Seconds> measured_s;
  // The matrix products among `flops` whose output tiles the twin spreads over the SMs
  // in waves (each 2mnk FLOPs); the rest of `flops` runs at the class's fraction.
  std::vector<GemmShape> gemms;
  // A convolution on channels_last (NHWC) tensors (MemoryFormat): in a Tensor Core type
  // cuDNN then needs no NCHW<->NHWC transposes, which the twin otherwise charges.
  bool channels_last = false;
  // The op's kernels when it is several of them (a layer's convolutions), each with its own
  // FLOPs and bytes, summing to `flops` and the bytes above: the twin takes each kernel's
  // roofline (a 1x1 convolution can be memory-bound where the 3x3 beside it is not).
  // Empty: one kernel.
  std::vector<RooflinePart> parts;
  // The kernel launches the op stands for, each paying the host's dispatch and the GPU's
  // launch latency in the twin: 1 for one kernel; a PyTorch optimizer implementation's own
  // (engine/optim/optim.hpp OptimizerImpl: a for-loop's several kernels per parameter, or
  // foreach's multi-tensor launches over all parameters, charged on one parameter's op and
  // 0 on the others, whose bytes then run within those launches). Real devices ignore it.
  int launches = 1;
};

class Device;

// Owning storage of one allocation; returns its bytes to its device on destruction.
// data() is null in shape-only mode (the twin predicting models it does not compute).
class Storage {
 public:
  Storage(Device* device, void* data, Bytes size, MemoryCategory category)
      : device_(device), data_(data), size_(size), category_(category) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  Bytes size_bytes() const { return size_; }
  Device& device() const { return *device_; }
  MemoryCategory category() const { return category_; }

 private:
  Device* device_;
  void* data_;
  Bytes size_;
  MemoryCategory category_;
};

enum class DeviceKind { cpu_host, host_worker, cuda, sim };

class Device {
 public:
  virtual ~Device() = default;
  // Index among the backend's devices (the "cuda:i" number); -1 for host memory.
  virtual int index() const = 0;
  virtual DeviceKind kind() const = 0;
  virtual std::string name() const = 0;  // e.g. "host:0", "cuda:1", "sim:gpu3"
  // False in the twin's shape-only mode: tensors carry shapes, kernels are charged, not run.
  virtual bool computes() const { return true; }
  // Whether the CPU reads and writes this device's memory directly (host memory, host
  // workers, the twin's devices; not GPU memory, which needs a Backend::copy).
  virtual bool host_readable() const { return true; }

  // Allocates n bytes; the returned storage frees itself. Throws dpt::OutOfMemory
  // (naming the device and the breakdown) when the device's capacity is exceeded.
  std::shared_ptr<Storage> allocate(Bytes n, MemoryCategory c);

  // Runs one kernel: `fn` performs it with this device's Kernels (it is skipped when
  // computes() is false); `cost` is what it costs. Host runs fn now; CUDA enqueues
  // on the current stream; the twin charges simulated time and runs fn if numeric.
  virtual void submit(const OpCost& cost, const std::function<void()>& fn) = 0;
  // Waits until all work submitted to this device has finished.
  virtual void synchronize() = 0;
  // Kernels that run on this device's memory.
  virtual Kernels& kernels() = 0;

  MemoryTracker& memory() { return memory_; }
  // Capacity in bytes, if the device has a limit that dptwin enforces.
  virtual std::optional<Bytes> capacity_bytes() const { return std::nullopt; }

 protected:
  virtual void* raw_allocate(Bytes n) = 0;  // may return nullptr for n == 0 or shape-only
  virtual void raw_free(void* p, Bytes n) = 0;
  friend class Storage;

 private:
  MemoryTracker memory_;
};

// Thrown when an allocation exceeds a device's capacity; what() names the device,
// the request and the live breakdown by category.
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace dpt
