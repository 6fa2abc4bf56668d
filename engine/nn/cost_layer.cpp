#include "engine/nn/cost_layer.hpp"

#include <algorithm>
#include <stdexcept>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "engine/core/kernels.hpp"
#include "engine/core/op_scope.hpp"

namespace dpt {

namespace {

bool type_has(const std::string& type, std::string_view part) { return type.find(part) != std::string::npos; }

// The kernel names of a layer's forward and backward, which state its op class for the
// twin's per-class efficiencies (sim_op_class reads the prefix): conv and gemm from
// layer_op_class (the class precision needs); among the other layers, norms, embedding
// lookups and attention-only modules by their type, everything else (activations,
// pooling, dropout) elementwise.
std::pair<const char*, const char*> kernel_names(const LayerDescription& d, OpClass c) {
  if (c == OpClass::conv) return {"conv_fwd", "conv_bwd"};
  if (c == OpClass::matmul) {
    const bool attention_only = type_has(d.type, "Attention") && !type_has(d.type, "Block") && !type_has(d.type, "Layer");
    return attention_only ? std::pair{"attention_fwd", "attention_bwd"} : std::pair{"gemm_fwd", "gemm_bwd"};
  }
  if (type_has(d.type, "Norm")) return {"norm_fwd", "norm_bwd"};
  if (type_has(d.type, "Embedding")) return {"embedding_fwd", "embedding_bwd"};
  return {"elementwise_fwd", "elementwise_bwd"};
}

// Whether a GEMM or convolution layer also holds norms or activations (Conv2d+BatchNorm2d+
// ReLU, a Bottleneck, a transformer block): on a GPU those are kernels of their own that
// stream the activations through memory, not work hidden under the GEMM's FLOPs.
bool has_memory_bound_parts(const LayerDescription& d, OpClass c) {
  if (c == OpClass::other) return false;
  if (d.memory_bound_forward_elements_per_sample) return true;  // counted by the model library
  for (std::string_view part : {"Norm", "ReLU", "GELU", "SiLU", "Tanh", "Softmax", "Bottleneck", "Block", "Layer"})
    if (type_has(d.type, part)) return true;
  return false;
}

// Charges a layer's memory-bound parts as their own kernel. With the model library's
// per-kernel count it moves exactly those elements (read and written split evenly): its
// autocast-f32 share (memory_bound_*_f32_elements_per_sample) x `f32_element_bytes`, the
// rest x `element_bytes`; without one, `passes` x the saved activation bytes: forward each
// part reads its input and writes its output (2 passes), backward reads the saved input and
// the output gradient and writes the input gradient (3 passes).
void charge_memory_bound_parts(Device& device, const LayerDescription& d, bool forward, Bytes saved_bytes,
                               std::int64_t batch, Bytes element_bytes, Bytes f32_element_bytes) {
  // Class `norm` where norms move most of the traffic (a norm layer; a Bottleneck, whose
  // BatchNorms outweigh its ReLUs and add); a transformer block's or layer's traffic is
  // mostly softmax, mask, dropout, GELU and adds over its LayerNorms (about 9 % of a BERT
  // eager layer's), so `elementwise` (an outside-user review read GPT-2's 58 % "norm").
  const bool norm = type_has(d.type, "Norm") || type_has(d.type, "Bottleneck");
  const char* name = norm ? (forward ? "norm_fwd" : "norm_bwd") : (forward ? "elementwise_fwd" : "elementwise_bwd");
  const auto& counted = forward ? d.memory_bound_forward_elements_per_sample : d.memory_bound_backward_elements_per_sample;
  // Planted fault: the counted traffic ignored for the saved-activation estimate.
  if (counted && !fault_active(Fault::memory_bound_traffic_ignored)) {
    const auto& f32_part =
        forward ? d.memory_bound_forward_f32_elements_per_sample : d.memory_bound_backward_f32_elements_per_sample;
    const Elements f32 = f32_part.value_or(0);
    // Planted fault: the autocast-f32 share moved at the low type's size.
    const Bytes f32_bytes = fault_active(Fault::autocast_f32_traffic_low) ? element_bytes : f32_element_bytes;
    const Bytes moved = ((*counted - f32) * element_bytes + f32 * f32_bytes) * batch;
    kernel_charge(device, OpCost{name, OpKind::memory, 0.0, moved - moved / 2, moved / 2, OpClass::other});
    return;
  }
  const Bytes read = forward ? saved_bytes : 2 * saved_bytes;
  kernel_charge(device, OpCost{name, OpKind::memory, 0.0, read, saved_bytes, OpClass::other});
}

// The layer's batched matmuls between activations as kernels of their own (attention's QK^T
// and scores x V, cuBLAS batched GEMMs), each with its FLOPs and the activations it reads and
// writes in `element_bytes`: forward C[m, n] = A[m, k] B[k, n] reads A and B, writes C;
// backward dA = dC B^T and dB = A^T dC each read dC and one operand and write one gradient,
// each 2mnk FLOPs. Returns the FLOPs charged, which the layer's own kernel no longer runs.
double charge_bmms(Device& device, const LayerDescription& d, bool forward, std::int64_t batch, Bytes element_bytes,
                   OpClass op_class) {
  double charged = 0;
  for (const auto& b : d.bmms) {
    const double products = static_cast<double>(b.count) * static_cast<double>(batch);
    const double flops = 2.0 * products * static_cast<double>(b.m) * static_cast<double>(b.n) * static_cast<double>(b.k);
    // In double: the loader bounds each product's tensors per sample, not times the batch.
    const auto elements = [&](std::int64_t rows, std::int64_t cols) {
      const double bytes = products * static_cast<double>(rows) * static_cast<double>(cols) *
                           static_cast<double>(element_bytes);
      return static_cast<Bytes>(std::min(bytes, 1e18));
    };
    if (forward) {
      kernel_charge(device, OpCost{"attention_bmm_fwd", OpKind::compute, flops, elements(b.m, b.k) + elements(b.k, b.n),
                                   elements(b.m, b.n), op_class});
      charged += flops;
      continue;
    }
    kernel_charge(device, OpCost{"attention_bmm_bwd", OpKind::compute, flops, elements(b.m, b.n) + elements(b.k, b.n),
                                 elements(b.m, b.k), op_class});
    kernel_charge(device, OpCost{"attention_bmm_bwd", OpKind::compute, flops, elements(b.m, b.k) + elements(b.m, b.n),
                                 elements(b.k, b.n), op_class});
    charged += 2 * flops;
  }
  return charged;
}

// The layer's fused attention kernel (LayerDescription::sdpa), forward or backward, in
// `element_bytes` (its log-sum-exp in f32): forward reads q, k and v and writes the output and
// the log-sum-exp, 4 x query_len x key_len x head_dim FLOPs per head (half of it causal);
// backward reads q, k, v, the output, its gradient and the log-sum-exp, writes the gradients of
// q, k and v, and recomputes the scores: 2.5x the forward's FLOPs. Returns the FLOPs the
// layer's description counts for this attention (4 x query_len x key_len x head_dim per head,
// twice that backward), which the layer's own kernel no longer runs; 0 without one.
double charge_sdpa(Device& device, const LayerDescription& d, bool forward, std::int64_t batch, Bytes element_bytes,
                   OpClass op_class) {
  if (!d.sdpa) return 0;
  const SdpaDescription& a = *d.sdpa;
  const double heads = static_cast<double>(a.heads) * static_cast<double>(batch);
  const double q = static_cast<double>(a.query_len), k = static_cast<double>(a.key_len),
               hd = static_cast<double>(a.head_dim);
  const double counted = 4.0 * heads * q * k * hd;
  // Planted fault: the causal kernel charged the masked blocks too.
  const double kernel = a.causal && !fault_active(Fault::sdpa_causal_blocks_charged) ? counted / 2 : counted;
  const auto bytes = [&](double elements, double each) { return static_cast<Bytes>(std::min(elements * each, 1e18)); };
  const double eb = static_cast<double>(element_bytes);
  const Bytes q_bytes = bytes(heads * q * hd, eb), kv_bytes = bytes(heads * k * hd, eb), lse = bytes(heads * q, 4.0);
  if (forward) {
    kernel_charge(device, OpCost{"sdpa_fwd", OpKind::compute, kernel, q_bytes + 2 * kv_bytes, q_bytes + lse, op_class});
    return counted;
  }
  // Planted fault: the backward pass charged as two matmuls per product, without recomputing the scores.
  const double backward = fault_active(Fault::sdpa_backward_no_recompute) ? 2.0 * kernel : 2.5 * kernel;
  kernel_charge(device, OpCost{"sdpa_bwd", OpKind::compute, backward, 3 * q_bytes + 2 * kv_bytes + lse,
                               q_bytes + 2 * kv_bytes, op_class});
  return 2 * counted;
}

}  // namespace

std::pair<const char*, const char*> cost_layer_kernel_names(const LayerDescription& d) {
  return kernel_names(d, layer_op_class(d));
}

CostLayer::CostLayer(LayerDescription desc, std::int64_t input_features, Device& device, DType dtype,
                     std::optional<Precision> precision, MemoryFormat memory_format)
    : desc_(std::move(desc)), input_features_(input_features), device_(&device), dtype_(dtype),
      precision_(precision ? *precision : precision_of_dtype(dtype == DType::f64 ? DType::f64 : DType::f32)),
      memory_format_(memory_format), op_class_(layer_op_class(desc_)) {
  if (!dtype_is_floating(dtype) && !dtype_is_half(dtype))
    throw std::invalid_argument(fmt::format("cost-only layer {}: dtype {} is not a floating type", desc_.name,
                                            dtype_name(dtype)));
  if (dtype_is_half(dtype) && device.computes())
    throw std::invalid_argument(fmt::format("cost-only layer {}: dtype {} is storage-only; a computing device needs "
                                            "f32 or f64",
                                            desc_.name, dtype_name(dtype)));
  if (desc_.sdpa && precision_ == Precision::f64)
    throw std::invalid_argument(fmt::format("layer {}: fused attention (sdpa) in f64 is not what PyTorch runs: "
                                            "scaled_dot_product_attention takes its math backend there, eager "
                                            "attention's s x s tensors and all; give the model eager attention "
                                            "(hf:...:attn=eager, or a transformer: spec without attn=sdpa)",
                                            desc_.name));
  if (input_features_ <= 0 || desc_.output_features <= 0)
    throw std::invalid_argument(fmt::format("cost-only layer {}: input features {} and output features {} must be "
                                            "positive",
                                            desc_.name, input_features_, desc_.output_features));
  params_.reserve(desc_.parameters.size());
  for (const auto& p : desc_.parameters) {
    const bool zero = device.computes();
    if (!p.requires_grad) {
      // Frozen: a value and no gradient, invisible to the optimizer and to DDP's buckets.
      frozen_.push_back(zero ? Tensor::zeros(device, p.shape, dtype, MemoryCategory::parameters)
                             : Tensor::empty(device, p.shape, dtype, MemoryCategory::parameters));
      continue;
    }
    Parameter param;
    param.name = p.name;
    param.value = zero ? Tensor::zeros(device, p.shape, dtype, MemoryCategory::parameters)
                       : Tensor::empty(device, p.shape, dtype, MemoryCategory::parameters);
    param.grad = zero ? Tensor::zeros(device, p.shape, dtype, MemoryCategory::gradients)
                      : Tensor::empty(device, p.shape, dtype, MemoryCategory::gradients);
    params_.push_back(std::move(param));
  }
}

void CostLayer::split_into_convs(OpCost& cost) const {
  if (op_class_ != OpClass::conv || desc_.convs.empty()) return;
  double flops = 0, io = 0;
  for (const auto& c : desc_.convs) {
    flops += c.flops_per_sample;
    io += static_cast<double>(c.io_elements_per_sample);
  }
  if (!(flops > 0) || !(io > 0)) return;
  const double bytes = static_cast<double>(cost.bytes_read + cost.bytes_written);
  for (const auto& c : desc_.convs)
    cost.parts.push_back(
        {cost.flops * c.flops_per_sample / flops, bytes * static_cast<double>(c.io_elements_per_sample) / io});
}

Bytes CostLayer::conv_io_bytes(std::int64_t batch, Bytes element_bytes) const {
  if (op_class_ != OpClass::conv || !desc_.conv_io_elements_per_sample) return 0;
  return *desc_.conv_io_elements_per_sample * batch * element_bytes;
}

// Each cast reads an element in one type and writes it in the other: its counted activation
// casts (forward, or their gradients backward) x batch, and for a GEMM or convolution layer
// its weights' (autocast casts each weight once per forward; backward casts the low-precision
// copy's gradient back to f32). Autocast is the precisions whose matmul and class-other
// element sizes differ (bf16-amp, f16-amp).
void CostLayer::charge_autocast_casts(bool forward, std::int64_t batch) {
  if (desc_.measured_forward_s_per_sample || desc_.measured_backward_s_per_sample) return;  // in the measured times
  const Bytes low = dtype_size_bytes(precision_activation_dtype(precision_, OpClass::matmul));
  const Bytes high = f32_element_bytes();
  // Planted fault: the casts cost nothing.
  if (low == high || fault_active(Fault::autocast_casts_free)) return;
  const auto& counted =
      forward ? desc_.autocast_forward_cast_elements_per_sample : desc_.autocast_backward_cast_elements_per_sample;
  Elements elements = counted.value_or(0) * batch;
  if (op_class_ != OpClass::other) {
    for (const auto& p : params_) elements += p.value.numel();
    if (forward)
      for (const auto& t : frozen_) elements += t.numel();  // frozen weights are cast too, but get no gradient
  }
  const Bytes moved = elements * (low + high);
  if (moved == 0) return;
  kernel_charge(*device_, OpCost{forward ? "autocast_cast_fwd" : "autocast_cast_bwd", OpKind::memory, 0.0,
                                 moved - moved / 2, moved / 2, OpClass::other});
}

Bytes CostLayer::f32_element_bytes() const {
  return dtype_size_bytes(precision_activation_dtype(precision_, OpClass::other));
}

Bytes CostLayer::parameter_bytes() const {
  Bytes n = 0;
  for (const auto& p : params_) n += p.value.size_bytes();
  for (const auto& t : frozen_) n += t.size_bytes();
  return n;
}

std::vector<Parameter*> CostLayer::parameters() {
  std::vector<Parameter*> out;
  out.reserve(params_.size());
  for (auto& p : params_) out.push_back(&p);
  return out;
}

Tensor CostLayer::make_tensor(std::int64_t rows, std::int64_t features, MemoryCategory category) const {
  // Zeroing costs a fill kernel; only a computing device needs defined values, and
  // the twin's shape-only mode must not be charged for work the real layer never does.
  return device_->computes() ? Tensor::zeros(*device_, {rows, features}, dtype_, category)
                             : Tensor::empty(*device_, {rows, features}, dtype_, category);
}

void CostLayer::check_input(const Shape& input, const char* what) const {
  if (input.size() != 2 || input[1] != input_features_)
    throw std::invalid_argument(fmt::format("cost-only layer {} ({}): {} has shape {}, expected [batch, {}]",
                                            desc_.name, desc_.type, what, shape_to_string(input), input_features_));
}

Tensor CostLayer::forward(const Tensor& x) {
  check_input(x.shape(), "input");
  if (&x.device() != device_)
    throw std::invalid_argument(fmt::format("cost-only layer {}: input on {}, layer on {}", desc_.name,
                                            x.device().name(), device_->name()));
  const std::int64_t batch = x.dim(0);
  const DType saved_dtype = precision_activation_dtype(precision_, op_class_);
  // Planted fault: half-precision saved activations sized as f64.
  const bool half_as_f64 = fault_active(Fault::cost_half_activations_as_f64) && dtype_is_half(saved_dtype);
  const Bytes elt = half_as_f64 ? 8 : dtype_size_bytes(saved_dtype);
  const Bytes param_bytes = parameter_bytes();
  const Bytes saved_bytes = desc_.activation_elements_per_sample * batch * elt;
  saved_ = device_->allocate(saved_bytes, MemoryCategory::activations);
  saved_batch_ = batch;
  Tensor y = make_tensor(batch, desc_.output_features, MemoryCategory::activations);
  // A measured layer's time covers all of its kernels; otherwise its norms and activations
  // stream the saved activations in a kernel of their own.
  const bool split = has_memory_bound_parts(desc_, op_class_) && !desc_.measured_forward_s_per_sample;
  OpCost cost{kernel_names(desc_, op_class_).first, OpKind::compute, desc_.forward_flops_per_sample * static_cast<double>(batch),
              x.size_bytes() + param_bytes, y.size_bytes() + (split ? 0 : saved_bytes), op_class_};
  if (const Bytes io = conv_io_bytes(batch, elt); io > 0) {
    // The convolutions read their inputs and write their outputs (split evenly).
    cost.bytes_read = param_bytes + io - io / 2;
    cost.bytes_written = io / 2;
  }
  split_into_convs(cost);
  for (const auto& g : desc_.gemms) cost.gemms.push_back(GemmShape{g.rows_per_sample * batch, g.n, g.k});
  cost.channels_last = op_class_ == OpClass::conv && memory_format_ == MemoryFormat::channels_last;
  if (desc_.measured_forward_s_per_sample)
    cost.measured_s = *desc_.measured_forward_s_per_sample * static_cast<double>(batch);
  const ScopedOp scope(desc_.name.c_str(), desc_.type.c_str(), "forward");
  charge_autocast_casts(true, batch);
  // Planted fault: the batched matmuls left inside the layer's one roofline.
  if (!desc_.measured_forward_s_per_sample && !fault_active(Fault::attention_bmms_in_layer_roofline))
    cost.flops = std::max(0.0, cost.flops - charge_bmms(*device_, desc_, true, batch, elt, op_class_));
  if (!desc_.measured_forward_s_per_sample)
    cost.flops = std::max(0.0, cost.flops - charge_sdpa(*device_, desc_, true, batch, elt, op_class_));
  kernel_charge(*device_, cost);
  if (split) charge_memory_bound_parts(*device_, desc_, true, saved_bytes, batch, elt, f32_element_bytes());
  return y;
}

Tensor CostLayer::backward(const Tensor& dy, bool need_input_grad) {
  if (!saved_batch_)
    throw std::logic_error(fmt::format("cost-only layer {}: backward without a saved forward", desc_.name));
  const std::int64_t batch = *saved_batch_;
  if (dy.ndim() != 2 || dy.dim(0) != batch || dy.dim(1) != desc_.output_features)
    throw std::invalid_argument(fmt::format("cost-only layer {}: output gradient has shape {}, expected [{}, {}]",
                                            desc_.name, shape_to_string(dy.shape()), batch, desc_.output_features));
  const Bytes param_bytes = parameter_bytes();
  Bytes grad_bytes = 0;
  for (const auto& p : params_) grad_bytes += p.grad.size_bytes();
  Tensor dx;
  if (need_input_grad) dx = make_tensor(batch, input_features_, MemoryCategory::activations);
  // Backward is two GEMM-shaped passes (input gradient and weight gradient), each
  // as costly as the forward: 2x forward FLOPs, the convention of Kaplan et al. 2020.
  OpCost cost{kernel_names(desc_, op_class_).second, OpKind::compute, 2.0 * desc_.forward_flops_per_sample * static_cast<double>(batch),
              dy.size_bytes() + saved_->size_bytes() + param_bytes, (dx.defined() ? dx.size_bytes() : 0) + grad_bytes,
              op_class_};
  const Bytes elt = dtype_size_bytes(precision_activation_dtype(precision_, op_class_));
  if (const Bytes io = conv_io_bytes(batch, elt); io > 0) {
    // Backward data reads the output gradient and writes the input gradient; backward filter
    // reads the input and the output gradient: half as much again read as in forward.
    cost.bytes_read = param_bytes + io + io / 2;
    cost.bytes_written = grad_bytes + io - io / 2;
  }
  split_into_convs(cost);
  // The input gradient's GEMMs have the forward's rows and swap n and k. The weight
  // gradient's ([k, n] outputs, the batch's rows as inner dimension) are not listed: with
  // few output tiles and a long inner dimension cuBLAS splits k across the SMs (split-K),
  // so they are not wave-quantized like the row-major products.
  for (const auto& g : desc_.gemms) cost.gemms.push_back(GemmShape{g.rows_per_sample * batch, g.k, g.n});
  cost.channels_last = op_class_ == OpClass::conv && memory_format_ == MemoryFormat::channels_last;
  if (desc_.measured_backward_s_per_sample)
    cost.measured_s = *desc_.measured_backward_s_per_sample * static_cast<double>(batch);
  const ScopedOp scope(desc_.name.c_str(), desc_.type.c_str(), "backward");
  if (has_memory_bound_parts(desc_, op_class_) && !desc_.measured_backward_s_per_sample)
    charge_memory_bound_parts(*device_, desc_, false, saved_->size_bytes(), batch, elt, f32_element_bytes());
  if (!desc_.measured_backward_s_per_sample && !fault_active(Fault::attention_bmms_in_layer_roofline))
    cost.flops = std::max(0.0, cost.flops - charge_bmms(*device_, desc_, false, batch, elt, op_class_));
  if (!desc_.measured_backward_s_per_sample)
    cost.flops = std::max(0.0, cost.flops - charge_sdpa(*device_, desc_, false, batch, elt, op_class_));
  kernel_charge(*device_, cost);
  charge_autocast_casts(false, batch);
  clear_saved();
  return dx;
}

std::unique_ptr<Layer> CostLayer::replicate_on(Device& device) const {
  return std::make_unique<CostLayer>(desc_, input_features_, device, dtype_, precision_, memory_format_);
}

void CostLayer::clear_saved() {
  saved_.reset();
  saved_batch_.reset();
}

Shape CostLayer::output_shape(const Shape& input) const {
  check_input(input, "input");
  return {input[0], desc_.output_features};
}

}  // namespace dpt
