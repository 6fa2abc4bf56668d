// DDP's gradient buckets as a pure function, as c10d's
// compute_bucket_assignment_by_size (torch/csrc/distributed/c10d/reducer.cpp).
//
// Tensors are visited in the given order and appended to the open bucket of their
// dtype; a bucket closes as soon as its size reaches the current limit, and the
// limit then advances to the next entry of `limits` (the last one repeats). So every
// bucket's size minus its last tensor is below its limit: a cap is exceeded only by
// the tensor that closes a bucket, and a tensor larger than the cap closes the
// bucket it lands in. Open buckets are closed at the end.
//
// PyTorch 1.13 uses it twice:
//  * at construction, over the parameters in registration order, and then reverses
//    the bucket list (so the last layers' gradients, ready first, go first). With
//    find_unused_parameters=False (the default) the limits are {SIZE_MAX}: the first
//    iteration has one bucket holding everything;
//  * once, after the first iteration, over the parameters in the order their
//    gradients became ready, with limits {1 MiB, bucket_cap_mb} and no sort.
#pragma once
#include <cstddef>
#include <vector>

#include "engine/core/dtype.hpp"
#include "engine/core/units.hpp"

namespace dpt {

constexpr Bytes kDdpFirstBucketBytes = 1 * kMiB;  // dist._DEFAULT_FIRST_BUCKET_BYTES

struct BucketTensor {
  size_t index;  // the parameter's index in registration order
  Bytes size_bytes;
  DType dtype;
};

struct Bucket {
  std::vector<size_t> indices;  // parameter indices, in the order they were assigned
  Bytes size_bytes = 0;
  Bytes limit_bytes = 0;        // the limit that was current when the bucket was formed
};

// Buckets for `tensors` visited in the given order. With `sort_by_min_index`
// (construction) buckets are ordered by the smallest position in `tensors` they
// hold, as c10d sorts when no explicit order is given; without it (rebuild) they
// stay in closing order, as c10d keeps the gradient-ready order. Throws std::invalid_argument for
// an empty `limits` or a non-positive limit.
std::vector<Bucket> compute_bucket_assignment_by_size(const std::vector<BucketTensor>& tensors,
                                                      const std::vector<Bytes>& limits, bool sort_by_min_index);

// `bucket_cap_mb` as DDP reads it: int(bucket_cap_mb * 1024 * 1024) bytes (MiB).
Bytes ddp_bucket_cap_bytes(double bucket_cap_mb);

}  // namespace dpt
