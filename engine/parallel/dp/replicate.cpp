#include "engine/parallel/dp/replicate.hpp"

#include "engine/core/fault_injection.hpp"

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

// Copies each tensor of the group into consecutive slices of flat (same device).
void flatten_into(const std::vector<Tensor*>& tensors, const std::vector<size_t>& group, Tensor& flat) {
  Elements at = 0;
  for (size_t i : group) {
    Tensor dst = flat.slice_rows(at, tensors[i]->numel());
    kernel_copy(*tensors[i], dst);
    at += tensors[i]->numel();
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
    Tensor flat = Tensor::empty(primary.device(), {n}, dtype, MemoryCategory::buckets);
    flatten_into(src, group, flat);
    // One stream out of the primary per replica, concurrently, as NCCL's broadcast.
    backend.parallel_for(static_cast<int>(replicas.size()), [&](int r) {
      Tensor mine = Tensor::empty(replicas[static_cast<size_t>(r)].device(), {n}, dtype, MemoryCategory::buckets);
      backend.copy(flat, mine);
      unflatten_from(mine, group, dst[static_cast<size_t>(r)]);
    });
  }
  for (auto& r : replicas) r.zero_grad();
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
    // Each replica flattens its gradients on its own device and the flat buffer is
    // copied to the primary: N-1 streams into the primary device.
    std::vector<Tensor> staged(used);
    backend.parallel_for(static_cast<int>(used), [&](int r) {
      Sequential& rep = *replicas[static_cast<size_t>(r)];
      Tensor local = Tensor::empty(rep.device(), {n}, dtype, MemoryCategory::buckets);
      flatten_into(from[static_cast<size_t>(r)], group, local);
      staged[static_cast<size_t>(r)] = copy_to(backend, local, primary.device(), MemoryCategory::buckets);
    });
    Tensor sum = Tensor::empty(primary.device(), {n}, dtype, MemoryCategory::buckets);
    flatten_into(into, group, sum);
    for (const Tensor& s : staged) kernel_axpy(1.0, s, sum);
    unflatten_from(sum, group, into);
  }
}

}  // namespace dpt
