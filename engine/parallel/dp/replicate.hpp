// DataParallel step 2, replicate (torch/nn/parallel/replicate.py): every step the
// primary's parameters are broadcast to the other used devices in coalesced
// buffers (torch's broadcast_coalesced, 10 MiB buffers). Its backward,
// ReduceAddCoalesced, sums the replicas' gradients onto the primary.
#pragma once
#include <cstddef>
#include <vector>

#include "engine/core/backend.hpp"
#include "engine/nn/model.hpp"

namespace dpt {

// torch's buffer for broadcast_coalesced and reduce_add_coalesced.
constexpr Bytes kDataParallelCoalesceBytes = 10 * kMiB;

// Groups tensor indices into coalesced buffers as torch's _take_tensors does: in
// order, per dtype, a group closes when the next tensor would push it past `limit`
// (a tensor larger than `limit` is alone in its group).
std::vector<std::vector<size_t>> coalesce_groups(const std::vector<const Tensor*>& tensors, Bytes limit);

// Replicas of `primary` on devices[1..] with the primary's parameter values (the
// replica on devices[0] is the primary itself: torch's broadcast returns the source
// tensors for the source device). The replicas' parameters are views of the buffers
// they received. Their gradients are zero on a device that computes; a shape-only
// device is charged no fill (PyTorch's replicas have no .grad to zero).
std::vector<Sequential> replicate(Backend& backend, Sequential& primary, const std::vector<int>& devices,
                                  Bytes coalesce_bytes = kDataParallelCoalesceBytes);

// ReduceAddCoalesced: primary.grad += sum of the replicas' gradients, summed in
// replica order onto the primary ((g0 + g1) + g2 ..., as torch's reduce_add without
// NCCL), through coalesced buffers (MemoryCategory::buckets).
void reduce_add_coalesced(Backend& backend, Sequential& primary, const std::vector<Sequential*>& replicas,
                          Bytes coalesce_bytes = kDataParallelCoalesceBytes);

}  // namespace dpt
