// CostLayer: a layer from the model library that computes nothing but costs what
// the real layer costs. Forward charges the layer's forward FLOPs x batch through
// kernel_charge and allocates its saved activations (MemoryCategory::activations);
// backward charges twice the forward FLOPs (one GEMM for the input gradient, one
// for the weight gradient) and frees them. Parameters and gradients are real
// allocations of the library's shapes, so the memory model, DataParallel's
// replicate and DDP's buckets see exactly the tensors the real model has. A
// frozen parameter (requires_grad false in a profile) is a value without a
// gradient and is not among parameters(): the optimizer and DDP's buckets skip it,
// as PyTorch's do (DataParallel's replicate then skips it too, where PyTorch
// broadcasts it). A profiled layer's measured times, when present, are charged
// instead of its FLOPs and bytes (OpCost::measured_s).
//
// Under a training precision the layer's kernels carry its op class (matmul, conv
// or other, from layer_op_class) so the device charges them at that compute type's
// peak, and its saved activations take precision_activation_dtype's bytes. A
// convolution layer of a channels_last model marks its conv kernels so (OpCost::channels_last).
//
// In the twin's shape-only mode the tensors carry shapes and no data; on a device
// that computes, the data is allocated and zeroed, so a cost-only model also runs
// (as zeros) on the host backend.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/nn/layer.hpp"
#include "engine/nn/model_library.hpp"

namespace dpt {

// The names of a layer's forward and backward kernels, whose prefix states the op class
// the twin's roofline charges them as (gemm_, conv_, attention_, norm_, ...).
std::pair<const char*, const char*> cost_layer_kernel_names(const LayerDescription& d);

class CostLayer final : public Layer {
 public:
  // `input_features` is the flattened per-sample size of the layer's input (the
  // previous layer's output_features, or the model's input_features).
  // `precision` defaults to the dtype's (f32 or f64); the parameters' dtype is `dtype`.
  // `memory_format`: the model's (model.to(memory_format=...)); channels_last marks its
  // convolutions' kernels (OpCost::channels_last), which then pay no layout transposes.
  CostLayer(LayerDescription desc, std::int64_t input_features, Device& device, DType dtype,
            std::optional<Precision> precision = std::nullopt,
            MemoryFormat memory_format = MemoryFormat::contiguous);

  std::string type_name() const override { return desc_.type; }
  std::vector<Parameter*> parameters() override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy, bool need_input_grad) override;
  std::unique_ptr<Layer> replicate_on(Device& device) const override;
  void clear_saved() override;
  Shape output_shape(const Shape& input) const override;

  const LayerDescription& description() const { return desc_; }

 private:
  // Allocates [rows, features] in `category`, zeroed when the device computes
  // (so downstream numeric code reads defined values).
  Tensor make_tensor(std::int64_t rows, std::int64_t features, MemoryCategory category) const;
  void check_input(const Shape& input, const char* what) const;
  Bytes parameter_bytes() const;  // trainable and frozen values, read by forward and backward
  // Element size of the tensors autocast keeps in f32 (its fp32 list's): the precision's
  // dtype for class-other ops (f32 under AMP, bf16 in pure bf16, f64 in f64).
  Bytes f32_element_bytes() const;
  // Under bf16/f16 autocast, charges the layer's casts between f32 and the low type (its
  // counted activation casts and its weights') as one kernel; nothing in other precisions.
  void charge_autocast_casts(bool forward, std::int64_t batch);
  // What the layer's convolutions read and write (conv_io_elements_per_sample); 0 when unknown.
  Bytes conv_io_bytes(std::int64_t batch, Bytes element_bytes) const;
  // Splits a convolution layer's kernel into its convolutions (LayerDescription::convs):
  // each takes the op's FLOPs in proportion to its own and the op's bytes in proportion to
  // its inputs plus outputs, so the parts sum to the op. No convs listed: unchanged.
  void split_into_convs(OpCost& cost) const;

  LayerDescription desc_;
  std::int64_t input_features_;
  Device* device_;
  DType dtype_;
  Precision precision_;
  MemoryFormat memory_format_;
  OpClass op_class_;
  std::vector<Parameter> params_;  // trainable: value and gradient
  std::vector<Tensor> frozen_;     // requires_grad false: value only, not in parameters()
  // What forward saved for backward: the activation bytes and the batch size.
  std::shared_ptr<Storage> saved_;
  std::optional<std::int64_t> saved_batch_;
};

}  // namespace dpt
