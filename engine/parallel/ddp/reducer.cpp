#include "engine/parallel/ddp/reducer.hpp"

#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "engine/core/kernels.hpp"

namespace dpt {

namespace {
// bucket = grad x factor as ONE kernel, as c10d's copy_grad_to_bucket runs at::mul_out:
// the division by the world size is fused into the copy, not a copy plus a scale kernel.
// Planted fault ddp_unfused_divide: the two-kernel form (copy, then scale in place).
void copy_scaled_into_bucket(const Tensor& grad, Tensor& bucket_view, double factor) {
  if (fault_active(Fault::ddp_unfused_divide)) {
    kernel_copy(grad, bucket_view);
    kernel_scale(bucket_view, factor);
    return;
  }
  if (grad.numel() != bucket_view.numel() || grad.dtype() != bucket_view.dtype())
    throw std::logic_error("Reducer: gradient and bucket slot differ in size or dtype");
  Device& d = bucket_view.device();
  d.submit({"mul_out", OpKind::memory, static_cast<double>(grad.numel()), grad.size_bytes(), bucket_view.size_bytes()},
           [&] {
             d.kernels().copy(grad.size_bytes(), grad.data(), bucket_view.data());
             d.kernels().scale(bucket_view.dtype(), bucket_view.numel(), factor, bucket_view.data());
           });
}
}  // namespace

Reducer::Reducer(std::vector<NamedParameter> params, Communicator& comm, ReducerOptions options)
    : params_(std::move(params)), comm_(comm), options_(options) {
  std::vector<BucketTensor> in_registration_order;
  for (size_t i = 0; i < params_.size(); ++i)
    in_registration_order.push_back({i, params_[i].param->value.size_bytes(), params_[i].param->value.dtype()});
  const std::vector<Bytes> limits = options_.single_bucket_first_iteration
                                        ? std::vector<Bytes>{std::numeric_limits<Bytes>::max()}
                                        : std::vector<Bytes>{options_.first_bucket_bytes, options_.bucket_cap_bytes};
  std::vector<Bucket> layout = compute_bucket_assignment_by_size(in_registration_order, limits, true);
  // DDP reverses the list: the last layers' gradients are ready first.
  build(std::vector<Bucket>(layout.rbegin(), layout.rend()));
}

void Reducer::build(const std::vector<Bucket>& layout) {
  layout_ = layout;
  slots_.assign(params_.size(), Slot{});
  runtime_.clear();
  for (size_t b = 0; b < layout_.size(); ++b) {
    Elements n = 0;
    for (size_t i : layout_[b].indices) {
      slots_[i] = Slot{b, n};
      n += params_[i].param->value.numel();
    }
    const Tensor& first = params_[layout_[b].indices.at(0)].param->value;
    Runtime rt;
    rt.flat = Tensor::zeros(first.device(), {n}, first.dtype(), MemoryCategory::buckets);
    runtime_.push_back(std::move(rt));
    if (options_.gradient_as_bucket_view) {
      // The gradient keeps its value and from now on lives in the bucket.
      for (size_t i : layout_[b].indices) {
        Parameter& p = *params_[i].param;
        Tensor view = runtime_[b].flat.slice_rows(slots_[i].offset, p.value.numel()).reshape(p.value.shape());
        if (p.grad.defined()) kernel_copy(p.grad, view);
        p.grad = view;
      }
    }
  }
}

void Reducer::prepare_for_backward(bool sync) {
  sync_ = sync;
  next_bucket_ = 0;
  ready_.assign(params_.size(), false);
  for (size_t b = 0; b < runtime_.size(); ++b) {
    runtime_[b].pending = layout_[b].indices.size();
    runtime_[b].work.reset();
  }
}

void Reducer::mark_ready(size_t index) {
  if (!sync_) return;  // no_sync: the gradient stays in .grad and keeps accumulating
  if (index >= params_.size() || ready_[index])
    throw std::logic_error(fmt::format("Reducer: gradient of parameter {} marked ready twice or unknown", index));
  ready_[index] = true;
  if (!rebuilt_) ready_order_.push_back(index);
  Parameter& p = *params_[index].param;
  const Slot& s = slots_[index];
  Runtime& rt = runtime_[s.bucket];
  // Divided by the world size on its way into the bucket (c10d multiplies by 1/N).
  const double factor = fault_active(Fault::ddp_skip_divide) ? 1.0 : 1.0 / comm_.size();  // planted fault: no divide
  if (options_.gradient_as_bucket_view) {
    kernel_scale(p.grad, factor);
  } else {
    Tensor view = rt.flat.slice_rows(s.offset, p.value.numel());
    copy_scaled_into_bucket(p.grad, view, factor);
  }
  --rt.pending;
  launch_ready_buckets();
}

void Reducer::launch_ready_buckets() {
  // Buckets start in order: a ready bucket waits for the ones before it.
  while (next_bucket_ < runtime_.size() && runtime_[next_bucket_].pending == 0) {
    const bool skipped = fault_active(Fault::ddp_skip_last_bucket) && next_bucket_ + 1 == runtime_.size();  // planted
    if (!skipped) runtime_[next_bucket_].work = comm_.all_reduce(runtime_[next_bucket_].flat, {ReduceOp::sum, options_.timeout_s});
    ++next_bucket_;
  }
}

void Reducer::finalize() {
  if (!sync_) return;
  if (next_bucket_ != runtime_.size()) {
    for (size_t i = 0; i < params_.size(); ++i)
      if (!ready_[i])
        throw std::logic_error(fmt::format("Reducer: the gradient of {} never became ready in backward "
                                           "(unused parameters are not supported)", params_[i].name));
  }
  for (Runtime& rt : runtime_)
    if (rt.work) rt.work->wait();
  if (!options_.gradient_as_bucket_view) {
    for (size_t i = 0; i < params_.size(); ++i) {
      Parameter& p = *params_[i].param;
      kernel_copy(runtime_[slots_[i].bucket].flat.slice_rows(slots_[i].offset, p.value.numel()), p.grad);
    }
  }
  if (!rebuilt_) {
    // Once, after the first synchronised iteration: buckets in gradient-ready order,
    // first bucket 1 MiB, then bucket_cap_mb.
    std::vector<BucketTensor> in_ready_order;
    for (size_t i : ready_order_)
      in_ready_order.push_back({i, params_[i].param->value.size_bytes(), params_[i].param->value.dtype()});
    build(compute_bucket_assignment_by_size(in_ready_order, {options_.first_bucket_bytes, options_.bucket_cap_bytes}, false));
    rebuilt_ = true;
  }
}

}  // namespace dpt
