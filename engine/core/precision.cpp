#include "engine/core/precision.hpp"

#include <stdexcept>

namespace dpt {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::f32: return "f32";
    case Precision::tf32: return "tf32";
    case Precision::bf16_amp: return "bf16-amp";
    case Precision::f16_amp: return "f16-amp";
    case Precision::bf16: return "bf16";
    case Precision::f16_master: return "f16-master";
    case Precision::f64: return "f64";
  }
  return "?";
}

Precision precision_from_name(std::string_view name) {
  for (Precision p : {Precision::f32, Precision::tf32, Precision::bf16_amp, Precision::f16_amp, Precision::bf16,
                      Precision::f16_master, Precision::f64})
    if (name == precision_name(p)) return p;
  throw std::invalid_argument("unknown precision '" + std::string(name) +
                              "' (expected f32, tf32, bf16-amp, f16-amp, bf16, f16-master or f64)");
}

std::string_view compute_type_label(ComputeType t) {
  switch (t) {
    case ComputeType::f32: return "f32";
    case ComputeType::tf32: return "tf32";
    case ComputeType::bf16: return "bf16";
    case ComputeType::f16: return "f16";
    case ComputeType::f64: return "f64";
  }
  return "?";
}

Precision precision_of_dtype(DType t) {
  if (t == DType::f32) return Precision::f32;
  if (t == DType::f64) return Precision::f64;
  throw std::invalid_argument("no training precision for dtype " + std::string(dtype_name(t)) +
                              " (expected f32 or f64; use --precision for bf16 and f16)");
}

DType precision_parameter_dtype(Precision p) {
  if (p == Precision::bf16) return DType::bf16;
  if (p == Precision::f16_master) return DType::f16;
  if (p == Precision::f64) return DType::f64;
  return DType::f32;
}

DType precision_activation_dtype(Precision p, OpClass c) {
  switch (p) {
    case Precision::f64: return DType::f64;
    case Precision::bf16: return DType::bf16;
    case Precision::f16_master: return DType::f16;  // the whole model is f16, norms and softmax too
    case Precision::bf16_amp: return c == OpClass::other ? DType::f32 : DType::bf16;
    case Precision::f16_amp: return c == OpClass::other ? DType::f32 : DType::f16;
    case Precision::f32:
    case Precision::tf32: return DType::f32;  // TF32 is a compute mode: tensors stay f32
  }
  return DType::f32;
}

ComputeType precision_compute_type(Precision p, OpClass c, bool gpu_has_tf32) {
  if (p == Precision::f64) return ComputeType::f64;
  if (c == OpClass::other) return ComputeType::f32;
  switch (p) {
    case Precision::f32:  // cudnn.allow_tf32 defaults to True, matmul.allow_tf32 to False
      return c == OpClass::conv && gpu_has_tf32 ? ComputeType::tf32 : ComputeType::f32;
    case Precision::tf32: return gpu_has_tf32 ? ComputeType::tf32 : ComputeType::f32;
    case Precision::bf16_amp:
    case Precision::bf16: return ComputeType::bf16;
    case Precision::f16_amp:
    case Precision::f16_master: return ComputeType::f16;
    case Precision::f64: return ComputeType::f64;
  }
  return ComputeType::f32;
}

bool precision_uses_grad_scaler(Precision p) { return p == Precision::f16_amp; }

bool precision_uses_master_weights(Precision p) { return p == Precision::f16_master; }

std::string precision_description(Precision p) {
  switch (p) {
    case Precision::f32:
      return "f32 (PyTorch defaults: convolutions on TF32 on Ampere and later, matmul in f32)";
    case Precision::tf32: return "tf32 (matmul and convolutions on TF32 where the GPU has it, tensors in f32)";
    case Precision::bf16_amp:
      return "bf16-amp (autocast: matmul/conv in bf16, norms, softmax and losses in f32; f32 weights and "
             "gradients)";
    case Precision::f16_amp:
      return "f16-amp (autocast: matmul/conv in f16, norms, softmax and losses in f32; f32 weights and "
             "gradients; GradScaler)";
    case Precision::bf16: return "bf16 (weights, gradients and optimizer state in bf16)";
    case Precision::f16_master:
      return "f16-master (model.half() with f32 master weights, as apex amp O2 and DeepSpeed fp16: f16 weights, "
             "activations and gradients; f32 master weights, master gradients and optimizer state; dynamic loss "
             "scaling)";
    case Precision::f64: return "f64";
  }
  return "?";
}

std::string_view memory_format_name(MemoryFormat f) {
  return f == MemoryFormat::channels_last ? "channels_last" : "contiguous";
}

MemoryFormat memory_format_from_name(std::string_view name) {
  for (MemoryFormat f : {MemoryFormat::contiguous, MemoryFormat::channels_last})
    if (name == memory_format_name(f)) return f;
  throw std::invalid_argument("unknown memory format '" + std::string(name) +
                              "' (expected contiguous or channels_last, as torch.memory_format names them)");
}

}  // namespace dpt
