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
  const CommHook hook = options_.comm_hook.kind;
  if (hook == CommHook::powersgd && !params_.empty() && params_.front().param->value.device().computes())
    throw std::invalid_argument("comm hook powersgd is cost-only: it runs in the twin's shape-only mode, not on a "
                                "device that computes");
  if (hook != CommHook::none && options_.gradient_as_bucket_view)
    throw std::invalid_argument(fmt::format("comm hook {} with gradient_as_bucket_view is not supported",
                                            comm_hook_name(options_.comm_hook)));
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
    if (!first.device().computes()) allocate_hook_buffers(rt, b);
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
  // Divided by the world size on its way into the bucket (c10d multiplies by 1/N),
  // unless a comm hook is registered: then the hook divides.
  const bool hook_divides = options_.comm_hook.kind != CommHook::none;
  const double factor =
      fault_active(Fault::ddp_skip_divide) || hook_divides ? 1.0 : 1.0 / comm_.size();  // planted fault: no divide
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
    if (!skipped) launch_bucket(next_bucket_);
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
  for (size_t b = 0; b < runtime_.size(); ++b)
    if (runtime_[b].work) finish_bucket(b);
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

namespace {

// A kernel with a cost and no numerics (the shape-only mode's hooks).
void charge(Device& d, const char* name, OpKind kind, double flops, Bytes read, Bytes written) {
  OpCost c{name, kind, flops, read, written};
  if (kind == OpKind::compute) c.op_class = OpClass::matmul;
  d.submit(c, [] {});
}

}  // namespace

namespace {
// Whether a compress hook casts this bucket: not when it is in the hook's dtype already.
// Planted fault: it casts (and holds a half copy) all the same.
bool hook_casts(const Tensor& bucket, DType half) {
  return bucket.dtype() != half || fault_active(Fault::comm_hook_recasts_half_buckets);
}
}  // namespace

void Reducer::allocate_hook_buffers(Runtime& rt, size_t b) {
  Device& d = rt.flat.device();
  const CommHookSpec& h = options_.comm_hook;
  if (auto half = comm_hook_wire_dtype(h.kind)) {
    // A bucket already in the hook's dtype (f16 gradients under f16-master with
    // fp16_compress): bucket.buffer().to(float16) returns the bucket itself, no copy.
    if (!hook_casts(rt.flat, *half)) return;
    rt.wire = Tensor::empty(d, {rt.flat.numel()}, *half, MemoryCategory::buckets);
  } else if (h.kind == CommHook::powersgd) {
    std::vector<Shape> shapes;
    for (size_t i : layout_[b].indices) shapes.push_back(params_[i].param->value.shape());
    rt.powersgd = powersgd_plan(shapes, h.powersgd_rank);
    const DType t = rt.flat.dtype();
    // PowerSGDState keeps P, Q (warm start) and the error (error feedback) per bucket.
    rt.p = Tensor::empty(d, {rt.powersgd.p_elements}, t, MemoryCategory::buckets);
    rt.q = Tensor::empty(d, {rt.powersgd.q_elements}, t, MemoryCategory::buckets);
    rt.error = Tensor::empty(d, {rt.flat.numel()}, t, MemoryCategory::buckets);
    rt.uncompressed = Tensor::empty(d, {rt.powersgd.uncompressed_elements}, t, MemoryCategory::buckets);
  }
}

void Reducer::launch_bucket(size_t b) {
  Runtime& rt = runtime_[b];
  const CommHookSpec& h = options_.comm_hook;
  const AllReduceOptions sum{ReduceOp::sum, options_.timeout_s};
  const int world = fault_active(Fault::comm_hook_skip_divide) ? 1 : comm_.size();  // planted fault: no divide
  Device& d = rt.flat.device();
  if (h.kind == CommHook::none) {
    rt.work = comm_.all_reduce(rt.flat, sum);
  } else if (auto half = comm_hook_wire_dtype(h.kind); half && d.computes()) {
    comm_hook_compress_in_place(rt.flat, *half, world);
    rt.work = comm_.all_reduce(rt.flat, sum);
  } else if (half && !hook_casts(rt.flat, *half)) {
    // The hook's .div_(world_size) in place on the bucket, all-reduced as it is; its
    // copy_ back is a copy onto itself, which PyTorch skips.
    charge(d, "half_compress", OpKind::memory, static_cast<double>(rt.flat.numel()), rt.flat.size_bytes(),
           rt.flat.size_bytes());
    rt.work = comm_.all_reduce(rt.flat, sum);
  } else if (half) {
    charge(d, "half_compress", OpKind::memory, static_cast<double>(rt.flat.numel()), rt.flat.size_bytes(),
           rt.wire.size_bytes());
    rt.work = comm_.all_reduce(rt.wire, sum);
  } else {
    // PowerSGD's first half: error feedback (add, clone), Q orthogonalised (warm
    // start), P = M Q; the uncompressed part and P all-reduced, in that order.
    const PowerSgdPlan& plan = rt.powersgd;
    const Bytes bucket = rt.flat.size_bytes();
    charge(d, "powersgd_error_feedback", OpKind::memory, static_cast<double>(rt.flat.numel()), 2 * bucket, 2 * bucket);
    charge(d, "powersgd_orthogonalize_q", OpKind::compute, plan.orthogonalize_flops / 2, rt.q.size_bytes(),
           rt.q.size_bytes());
    charge(d, "powersgd_p_matmul", OpKind::compute, plan.matmul_flops / 3, bucket + rt.q.size_bytes(), rt.p.size_bytes());
    charge(d, "powersgd_cat_uncompressed", OpKind::memory, 0, rt.uncompressed.size_bytes(), rt.uncompressed.size_bytes());
    WorkPtr uncompressed = rt.uncompressed.numel() > 0 ? comm_.all_reduce(rt.uncompressed, sum) : nullptr;
    rt.work = rt.p.numel() > 0 ? comm_.all_reduce(rt.p, sum) : uncompressed;
  }
}

void Reducer::finish_bucket(size_t b) {
  Runtime& rt = runtime_[b];
  rt.work->wait();
  const CommHookSpec& h = options_.comm_hook;
  Device& d = rt.flat.device();
  if (h.kind == CommHook::none) return;
  if (auto half = comm_hook_wire_dtype(h.kind); half && d.computes()) {
    comm_hook_decompress_in_place(rt.flat, *half);
  } else if (half && !hook_casts(rt.flat, *half)) {
    return;  // the all-reduce ran on the bucket itself
  } else if (half) {
    charge(d, "half_decompress", OpKind::memory, static_cast<double>(rt.flat.numel()), rt.wire.size_bytes(),
           rt.flat.size_bytes());
  } else {
    // PowerSGD's second half, after P's all-reduce (run here, after backward: the twin
    // issues the Q phase when the step waits for its buckets): orthogonalise P,
    // Q = M^T P, all-reduce Q, M = P Q^T / world size, the new error.
    const PowerSgdPlan& plan = rt.powersgd;
    const Bytes bucket = rt.flat.size_bytes();
    charge(d, "powersgd_orthogonalize_p", OpKind::compute, plan.orthogonalize_flops / 2, rt.p.size_bytes(),
           rt.p.size_bytes());
    charge(d, "powersgd_q_matmul", OpKind::compute, plan.matmul_flops / 3, bucket + rt.p.size_bytes(), rt.q.size_bytes());
    if (rt.q.numel() > 0) comm_.all_reduce(rt.q, {ReduceOp::sum, options_.timeout_s})->wait();
    charge(d, "powersgd_decompress", OpKind::compute, plan.matmul_flops / 3, rt.p.size_bytes() + rt.q.size_bytes(), bucket);
    charge(d, "powersgd_new_error", OpKind::memory, static_cast<double>(rt.flat.numel()), 2 * bucket, bucket);
  }
}

}  // namespace dpt
