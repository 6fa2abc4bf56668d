// DDP's Reducer (as c10d's reducer.cpp): gradients are copied into flat buckets,
// divided by the world size on the way in, and each bucket is all-reduced as soon
// as all its gradients are ready, in bucket order, while backward goes on (the
// communicator runs collectives on its own worker). After the first synchronised
// iteration the buckets are rebuilt once, in the order gradients became ready.
#pragma once
#include <cstddef>
#include <optional>
#include <vector>

#include "engine/core/communicator.hpp"
#include "engine/nn/model.hpp"
#include "engine/parallel/ddp/bucket_assignment.hpp"
#include "engine/parallel/ddp/comm_hook.hpp"

namespace dpt {

struct ReducerOptions {
  Bytes bucket_cap_bytes = 25 * kMiB;          // bucket_cap_mb (25, PyTorch's default)
  Bytes first_bucket_bytes = kDdpFirstBucketBytes;  // dist._DEFAULT_FIRST_BUCKET_BYTES
  // PyTorch 1.13 with find_unused_parameters=False: the first iteration uses a single
  // bucket (limit SIZE_MAX); false: construction already uses {1 MiB, cap} over the
  // registration order, reversed (as with find_unused_parameters=True).
  bool single_bucket_first_iteration = true;
  bool gradient_as_bucket_view = false;  // parameters' .grad become views into the buckets
  Seconds timeout_s = 300.0;             // per all-reduce
  // register_comm_hook: the compress hooks with real numerics where the device
  // computes, as casts and half-precision all-reduces in the twin's shape-only mode;
  // PowerSGD in the shape-only mode only (its costs, not its numerics).
  CommHookSpec comm_hook;
};

class Reducer {
 public:
  // `params` in registration order, all on this rank's device.
  Reducer(std::vector<NamedParameter> params, Communicator& comm, ReducerOptions options);
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Before each backward. sync=false is no_sync(): gradients accumulate locally and
  // nothing is reduced until the next synchronised backward.
  void prepare_for_backward(bool sync);
  // The hook Sequential::backward calls when parameter `index`'s gradient is final.
  void mark_ready(size_t index);
  // After backward: waits for every bucket's all-reduce and writes the averaged
  // gradients to the parameters (a no-op for bucket views); rebuilds the buckets
  // once after the first synchronised iteration. Throws CollectiveError from a
  // failed all-reduce, std::logic_error if a parameter's gradient never came.
  void finalize();

  const std::vector<Bucket>& buckets() const { return layout_; }
  bool rebuilt() const { return rebuilt_; }
  // Parameter indices in the order their gradients became ready in the first
  // synchronised iteration (what the rebuild used).
  const std::vector<size_t>& ready_order() const { return ready_order_; }

 private:
  void build(const std::vector<Bucket>& layout);
  void launch_ready_buckets();
  void launch_bucket(size_t b);
  void finish_bucket(size_t b);

  struct Slot {
    size_t bucket = 0;
    Elements offset = 0;  // elements from the start of the bucket
  };
  struct Runtime {
    Tensor flat;          // MemoryCategory::buckets on this rank's device
    size_t pending = 0;   // gradients not yet ready in this iteration
    WorkPtr work;
    // Comm hooks in the shape-only mode: the half-precision copy all-reduced by a
    // compress hook; PowerSGD's uncompressed part, P, Q and error-feedback buffers.
    Tensor wire, uncompressed, p, q, error;
    PowerSgdPlan powersgd;
  };
  void allocate_hook_buffers(Runtime& rt, size_t b);

  std::vector<NamedParameter> params_;
  Communicator& comm_;
  ReducerOptions options_;
  std::vector<Bucket> layout_;
  std::vector<Slot> slots_;  // per parameter
  std::vector<Runtime> runtime_;
  std::vector<bool> ready_;
  size_t next_bucket_ = 0;
  bool sync_ = true;
  bool rebuilt_ = false;
  std::vector<size_t> ready_order_;
};

}  // namespace dpt
