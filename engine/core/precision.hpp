// Training precision as PyTorch defines it, and what it decides for the cost model:
// which compute type each op class runs in, which dtype activations are saved in
// for backward, and which dtype parameters, gradients (DDP buckets, bytes on the
// wire) and optimizer state are stored in.
//
//   f32       PyTorch's defaults: cudnn.allow_tf32 = True (convolutions on TF32 on
//             Ampere and later), cuda.matmul.allow_tf32 = False (matmul in f32).
//   tf32      both flags on: matmul and convolutions on TF32.
//   bf16-amp  torch.autocast(dtype=bfloat16): matmul/conv/linear in bf16; softmax,
//   f16-amp   norms and losses in f32 (autocast's fp32 op list); f32 master weights,
//             f32 gradients in DDP's buckets. f16-amp adds GradScaler's unscale and
//             inf-check kernels before each optimizer step.
//   bf16      model.to(bfloat16): weights, gradients and optimizer state in bf16.
//   f16-master  model.half() with f32 master weights: f16 weights, activations and
//             gradients (DDP buckets in f16), f32 master weights, master gradients and
//             optimizer state, dynamic loss scaling (apex amp O2, DeepSpeed "fp16",
//             Megatron-LM --fp16). Each step unscales the f16 gradients into the f32
//             master gradients (one kernel per parameter, with the inf check), steps the
//             optimizer on the masters and copies them back into the f16 weights.
//   f64       everything in f64.
#pragma once
#include <string>
#include <string_view>

#include "engine/core/dtype.hpp"

namespace dpt {

enum class Precision { f32, tf32, bf16_amp, f16_amp, bf16, f16_master, f64 };

// The math a kernel's FLOPs run in; a GPU states one datasheet peak per type.
enum class ComputeType { f32, tf32, bf16, f16, f64 };

// What kind of op a kernel is, as far as precision is concerned: GEMMs and
// convolutions run on tensor cores in the reduced types; everything else
// (norms, softmax, losses, elementwise, embeddings, optimizer) does not.
enum class OpClass { other, matmul, conv };

// "f32", "tf32", "bf16-amp", "f16-amp", "bf16", "f16-master", "f64".
std::string_view precision_name(Precision p);
// Parses the names above; throws std::invalid_argument naming the value and the choices.
Precision precision_from_name(std::string_view name);
std::string_view compute_type_label(ComputeType t);

// The precision a plain --dtype run means: f32 -> f32 (PyTorch defaults), f64 -> f64.
// Throws std::invalid_argument for any other dtype.
Precision precision_of_dtype(DType t);

// Dtype of parameters and gradients (hence DDP buckets and bytes on the wire): bf16 for
// pure bf16, f16 for f16-master, f64 for f64, f32 otherwise (AMP keeps f32 weights and
// f32 gradients). The optimizer state takes it too, except under f16-master
// (precision_uses_master_weights: f32 state on f32 master copies).
DType precision_parameter_dtype(Precision p);

// Dtype of what an op of class `c` saves for backward: under autocast the
// matmul/conv inputs are saved as their low-precision casts; ops on autocast's
// fp32 list (class other) save f32.
DType precision_activation_dtype(Precision p, OpClass c);

// Compute type of an op of class `c`. `gpu_has_tf32`: the GPU has TF32 tensor
// cores (compute capability >= 8.0, i.e. a tf32 datasheet peak); without them
// PyTorch's TF32 flags have no effect and the op runs in f32. Ops of class other
// run on CUDA cores at the f32 rate in every precision but f64 (pure bf16 included:
// those kernels are memory-bound and no datasheet states a non-tensor bf16 rate).
ComputeType precision_compute_type(Precision p, OpClass c, bool gpu_has_tf32);

// Whether the precision runs GradScaler (f16-amp).
bool precision_uses_grad_scaler(Precision p);

// Whether the optimizer steps f32 master copies of low-precision weights, with dynamic
// loss scaling (f16-master).
bool precision_uses_master_weights(Precision p);

// One line for reports: the precision and what it means for the ops.
std::string precision_description(Precision p);

// The memory format of a model's 4-D activations and weights, as PyTorch names it:
// contiguous (NCHW, every model's default) or channels_last (NHWC, after
// model.to(memory_format=torch.channels_last) and the same on the inputs). cuDNN's
// Tensor Core convolutions (TF32, BF16, F16) run NHWC; on NCHW tensors each such
// convolution transposes what it reads and writes (NVIDIA's Convolutional Layers User's
// Guide, "Tensor Layouts In Memory"); on channels_last ones it does not. It changes no
// FLOP and no other op's traffic in the twin.
enum class MemoryFormat { contiguous, channels_last };

// "contiguous", "channels_last".
std::string_view memory_format_name(MemoryFormat f);
// Parses the names above; throws std::invalid_argument naming the value and the choices.
MemoryFormat memory_format_from_name(std::string_view name);

}  // namespace dpt
