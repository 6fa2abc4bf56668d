#include "engine/parallel/dp/replicate.hpp"

#include "engine/core/fault_injection.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace dpt {
namespace {

// The layout of one coalesced group: total elements and each tensor's offset.
Elements group_numel(const std::vector<const Tensor*>& tensors, const std::vector<size_t>& group) {
  Elements n = 0;
  for (size_t i : group) n += tensors[i]->numel();
  return n;
}

// torch's _flatten_dense_tensors (torch/csrc/utils/tensor_flatten.h): one torch.cat of
// the group into `flat`, a CatArrayBatchedCopy launch per kCatInputsPerLaunch inputs
// (aten/src/ATen/native/cuda/Shape.cu, CAT_ARRAY_BATCH_SIZE 128). A group of one tensor
// is not copied at all (its flat buffer is a view of it): callers handle that case.
constexpr size_t kCatInputsPerLaunch = 128;

void copy_group(Device& d, const std::vector<Tensor*>& tensors, const std::vector<size_t>& group, size_t first,
                size_t last, Tensor& flat, Elements at) {
  Bytes bytes = 0;
  for (size_t k = first; k < last; ++k) bytes += tensors[group[k]]->size_bytes();
  d.submit({"cat", OpKind::memory, 0, bytes, bytes}, [&] {
    Elements offset = at;
    for (size_t k = first; k < last; ++k) {
      const Tensor& t = *tensors[group[k]];
      Tensor dst = flat.slice_rows(offset, t.numel());
      d.kernels().copy(t.size_bytes(), t.data(), dst.data());
      offset += t.numel();
    }
  });
}

void flatten_into(const std::vector<Tensor*>& tensors, const std::vector<size_t>& group, Tensor& flat) {
  if (fault_active(Fault::dp_flatten_per_tensor)) {  // planted fault: a copy kernel per tensor
    Elements at = 0;
    for (size_t i : group) {
      Tensor dst = flat.slice_rows(at, tensors[i]->numel());
      kernel_copy(*tensors[i], dst);
      at += tensors[i]->numel();
    }
    return;
  }
  Elements at = 0;
  for (size_t first = 0; first < group.size(); first += kCatInputsPerLaunch) {
    const size_t last = std::min(group.size(), first + kCatInputsPerLaunch);
    copy_group(flat.device(), tensors, group, first, last, flat, at);
    for (size_t k = first; k < last; ++k) at += tensors[group[k]]->numel();
  }
}

// The group's tensors on their own device as one flat buffer: a view of a lone tensor
// (flatten_dense_tensors returns t.view(-1)), otherwise a new buffer filled by cat.
Tensor flat_of(const std::vector<Tensor*>& tensors, const std::vector<size_t>& group, Elements n) {
  const Tensor& first = *tensors[group[0]];
  if (group.size() == 1 && !fault_active(Fault::dp_flatten_per_tensor)) return first.reshape({n});
  Tensor flat = Tensor::empty(first.device(), {n}, first.dtype(), MemoryCategory::buckets);
  flatten_into(tensors, group, flat);
  return flat;
}

// unflatten_dense_tensors: the flat buffer's slices become the tensors (views, no kernel),
// as broadcast_coalesced hands them to the replicas.
void view_from(const Tensor& flat, const std::vector<size_t>& group, const std::vector<Tensor*>& tensors) {
  Elements at = 0;
  for (size_t i : group) {
    Tensor& t = *tensors[i];
    if (fault_active(Fault::dp_flatten_per_tensor)) {  // planted fault: a copy kernel per tensor
      kernel_copy(flat.slice_rows(at, t.numel()), t);
    } else {
      t = flat.slice_rows(at, t.numel()).reshape(t.shape());
    }
    at += t.numel();
  }
}

void unflatten_from(const Tensor& flat, const std::vector<size_t>& group, const std::vector<Tensor*>& tensors) {
  Elements at = 0;
  for (size_t i : group) {
    kernel_copy(flat.slice_rows(at, tensors[i]->numel()), *tensors[i]);
    at += tensors[i]->numel();
  }
}

std::vector<Tensor*> values_of(Sequential& m) {
  std::vector<Tensor*> out;
  for (auto& p : m.named_parameters()) out.push_back(&p.param->value);
  return out;
}
std::vector<Tensor*> grads_of(Sequential& m) {
  std::vector<Tensor*> out;
  for (auto& p : m.named_parameters()) out.push_back(&p.param->grad);
  return out;
}
std::vector<const Tensor*> as_const(const std::vector<Tensor*>& v) { return {v.begin(), v.end()}; }

}  // namespace

std::vector<std::vector<size_t>> coalesce_groups(const std::vector<const Tensor*>& tensors, Bytes limit) {
  std::vector<std::vector<size_t>> done;
  std::map<DType, std::pair<std::vector<size_t>, Bytes>> open;  // per dtype: indices, bytes
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto& [group, bytes] = open[tensors[i]->dtype()];
    const Bytes size = tensors[i]->size_bytes();
    if (bytes + size > limit && bytes > 0) {
      done.push_back(std::move(group));
      group.clear();
      bytes = 0;
    }
    group.push_back(i);
    bytes += size;
  }
  for (auto& [dtype, g] : open)
    if (!g.first.empty()) done.push_back(std::move(g.first));
  return done;
}

std::vector<Sequential> replicate(Backend& backend, Sequential& primary, const std::vector<int>& devices,
                                  Bytes coalesce_bytes) {
  std::vector<Sequential> replicas;
  for (size_t r = 1; r < devices.size(); ++r) replicas.push_back(primary.replicate_on(backend.device(devices[r])));
  if (replicas.empty()) return replicas;
  const std::vector<Tensor*> src = values_of(primary);
  std::vector<std::vector<Tensor*>> dst;
  for (auto& r : replicas) dst.push_back(values_of(r));
  for (const auto& group : coalesce_groups(as_const(src), coalesce_bytes)) {
    const Elements n = group_numel(as_const(src), group);
    const DType dtype = src[group[0]]->dtype();
    // broadcast_coalesced: the group flattened once on the primary, the flat buffer
    // sent to each replica (one stream out of the primary per replica), whose
    // parameters are then views of the buffer it received.
    const Tensor flat = flat_of(src, group, n);
    backend.parallel_for(static_cast<int>(replicas.size()), [&](int r) {
      Tensor mine = Tensor::empty(replicas[static_cast<size_t>(r)].device(), {n}, dtype, MemoryCategory::parameters);
      backend.copy(flat, mine);
      view_from(mine, group, dst[static_cast<size_t>(r)]);
    });
  }
  // A replica's parameters are not leaves in PyTorch: their gradients are backward's
  // fresh outputs, never zero-filled. The engine accumulates into .grad, so a device
  // that computes needs zeros; a shape-only one is not charged for fills PyTorch skips.
  for (auto& r : replicas)
    if (r.device().computes() || fault_active(Fault::dp_replica_grads_filled)) r.zero_grad();  // planted fault
  return replicas;
}

void reduce_add_coalesced(Backend& backend, Sequential& primary, const std::vector<Sequential*>& replicas,
                          Bytes coalesce_bytes) {
  const bool skip_last_replica = fault_active(Fault::dp_reduce_skips_last_replica);  // planted fault
  const size_t used = skip_last_replica && !replicas.empty() ? replicas.size() - 1 : replicas.size();
  if (used == 0) return;
  const std::vector<Tensor*> into = grads_of(primary);
  std::vector<std::vector<Tensor*>> from;
  for (Sequential* r : replicas) from.push_back(grads_of(*r));
  for (const auto& group : coalesce_groups(as_const(into), coalesce_bytes)) {
    const Elements n = group_numel(as_const(into), group);
    const DType dtype = into[group[0]]->dtype();
    // comm.reduce_add_coalesced: each device flattens its gradients of the group (one
    // cat, none for a lone tensor) and the flat buffers are summed onto the primary
    // (N-1 streams into the primary device).
    std::vector<Tensor> staged(used);
    backend.parallel_for(static_cast<int>(used), [&](int r) {
      const Tensor local = flat_of(from[static_cast<size_t>(r)], group, n);
      staged[static_cast<size_t>(r)] = copy_to(backend, local, primary.device(), MemoryCategory::buckets);
    });
    // The sum in a new buffer (reduce_add's result), then each slice accumulated into
    // the primary's .grad: one kernel per tensor, as autograd's AccumulateGrad.
    Tensor sum = flat_of(into, group, n);
    if (group.size() == 1 && !fault_active(Fault::dp_flatten_per_tensor)) {
      Tensor fresh = Tensor::empty(primary.device(), {n}, dtype, MemoryCategory::buckets);
      kernel_copy(sum, fresh);  // a lone tensor's flat buffer is the gradient itself
      sum = fresh;
    }
    for (const Tensor& s : staged) kernel_axpy(1.0, s, sum);
    unflatten_from(sum, group, into);
  }
}

}  // namespace dpt
