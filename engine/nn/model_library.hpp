// Model descriptions: a model as a per-layer list in registration order, each
// layer with its parameter tensors (names and shapes), forward FLOPs per sample
// and saved-activation elements per sample. The model library
// (scenarios/models/*.yaml) holds ResNet-50, BERT-large, GPT-2 and Llama-2 in this
// form; the MLPs the engine trains numerically are described the same way
// (describe_mlp), so a cost-only model and a numeric one present the strategies
// with the same parameters in the same order.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/dtype.hpp"
#include "engine/core/precision.hpp"
#include "engine/nn/model.hpp"
#include "engine/core/tensor.hpp"

namespace dpt {

// One trainable tensor of a layer: its name local to the layer ("weight",
// "attn.c_attn.bias") and its shape.
struct ParameterDescription {
  std::string name;
  Shape shape;
  bool requires_grad = true;  // false: frozen in the profiled model (counted, as model.parameters() counts it)
};

// One weight GEMM of a layer, per sample: rows_per_sample rows (tokens) times a [k, n] weight.
struct GemmDescription {
  std::int64_t rows_per_sample = 0, n = 0, k = 0;
};

// One batched matrix product between activations, per sample: `count` products of output
// [m, n] over inner dimension k (eager attention's QK^T, count = heads, [s, s] over the head
// size; and its scores x V, [s, head size] over s). It reads and writes activations only,
// the scores an s x s matrix per head, so at a head size of 64 it is memory-bound on Tensor
// Cores: the twin runs each as a kernel of its own with its own roofline (cuBLAS's batched
// GEMM), forward one, backward two (the gradients of both operands).
struct BmmDescription {
  std::int64_t count = 0, m = 0, n = 0, k = 0;
};

// A layer's attention as one fused kernel of torch.nn.functional.scaled_dot_product_attention
// (transformers' attn_implementation "sdpa", the default of its GPT-2, Llama, BERT and ViT
// classes since 4.36-4.48), per sample: `heads` query heads, each attending `query_len`
// queries to `key_len` keys of `head_dim`. On sm80 and later in f16/bf16 PyTorch runs
// FlashAttention-2's kernels, else (f32, an attention mask, older GPUs) the memory-efficient
// ones; both tile the s x s scores through on-chip memory, so no s x s tensor is written,
// read back or saved: forward reads q, k, v and writes the output and one log-sum-exp per
// query and head, the backward pass recomputes the scores. FLOPs follow FlashAttention's own
// benchmark (benchmarks/benchmark_flash_attention.py): forward 4 x query_len x key_len x
// head_dim per head, halved when causal (the kernel skips the masked blocks), backward 2.5x
// forward (five matmuls against two). A layer with `sdpa` has no `bmms`.
struct SdpaDescription {
  std::int64_t heads = 0, query_len = 0, key_len = 0, head_dim = 0;
  bool causal = false;
};

// One convolution of a layer, per sample: its forward FLOPs and the input plus output
// elements it reads and writes.
struct ConvDescription {
  double flops_per_sample = 0;
  Elements io_elements_per_sample = 0;
};

struct LayerDescription {
  std::string name;  // the architecture's module name ("conv1", "layer1.0", "h.11")
  std::string type;  // what it is ("Conv2d+BatchNorm2d+ReLU", "GPT2Block"): the layer's type_name()
  std::vector<ParameterDescription> parameters;  // in the module's registration order
  double forward_flops_per_sample = 0;           // floating-point operations of one sample's forward
  // Elements saved for backward per sample (inputs, pre-activations, masks...).
  // Kept in elements because the dtype is chosen per scenario: bytes = elements x dtype size.
  Elements activation_elements_per_sample = 0;
  std::int64_t output_features = 0;  // flattened per-sample size of the layer's output
  // Times measured by dptwin_profile (ModelDescription::measured), per sample: the
  // file holds them for the measured batch; the twin scales them linearly with batch.
  std::optional<Seconds> measured_forward_s_per_sample;
  std::optional<Seconds> measured_backward_s_per_sample;
  // Elements the layer's memory-bound kernels (norms, activations, softmax, dropout,
  // residual adds, layout copies) read plus write per sample, counted kernel by kernel
  // (scenarios/models/generate.py); unset: its saved activations streamed twice forward
  // and three times backward.
  std::optional<Elements> memory_bound_forward_elements_per_sample;
  std::optional<Elements> memory_bound_backward_elements_per_sample;
  // Input plus output elements of the layer's convolutions per sample: what its conv
  // kernels read and write (and what cuDNN transposes on Tensor Cores).
  std::optional<Elements> conv_io_elements_per_sample;
  // The layer's convolutions one by one (their io elements sum to conv_io_elements_per_sample,
  // their FLOPs are among forward_flops_per_sample): each runs as a kernel of its own, with
  // its own roofline. Empty: the layer's convolutions taken as one kernel.
  std::vector<ConvDescription> convs;
  // The layer's weight GEMMs (Linear layers), whose shapes the twin's wave model needs:
  // output [rows_per_sample x batch, n], inner dimension k. Empty: not stated.
  std::vector<GemmDescription> gemms;
  // The layer's batched matrix products between activations (attention's), whose FLOPs are
  // among forward_flops_per_sample. Empty: none stated (their FLOPs, if any, run inside the
  // layer's one GEMM roofline).
  std::vector<BmmDescription> bmms;
  // The layer's fused attention kernel (SdpaDescription), whose FLOPs as eager attention's
  // matmuls count them (4 x query_len x key_len x head_dim x heads) are among
  // forward_flops_per_sample. None: attention, if any, as `bmms` state it.
  std::optional<SdpaDescription> sdpa;
  // Of the counted memory-bound elements above, those in tensors autocast keeps in f32
  // (torch.autocast's CUDA op reference: outputs of its "autocast to float32" list, LayerNorm,
  // softmax, pow; and of ops that promote to the widest input, such as a residual add of an
  // f16 GEMM output to the f32 residual stream; and those tensors' gradients). Under
  // bf16-amp or f16-amp they move 4 bytes each, the rest the low type's 2; in every other
  // precision all move one element size. Unset: none (a ResNet under autocast: BatchNorm,
  // ReLU and adds run in f16).
  std::optional<Elements> memory_bound_forward_f32_elements_per_sample;
  std::optional<Elements> memory_bound_backward_f32_elements_per_sample;
  // Elements per sample that bf16/f16 autocast casts between f32 and the low type in their
  // own kernels, only under autocast: an f32 activation cast for each GEMM that takes it
  // (autocast caches only leaf tensors' casts), a softmax output cast back; backward, each
  // cast's gradient cast the other way (softmax and log_softmax, cross_entropy's first op,
  // take dtype=float32 and read f16 directly: no cast). Each moves 6 bytes (4 + 2); in every
  // other precision none exist. Unset: none (the weights' casts, once per forward, the twin
  // adds from the parameters).
  std::optional<Elements> autocast_forward_cast_elements_per_sample;
  std::optional<Elements> autocast_backward_cast_elements_per_sample;
};

// Where and how a profiled model was measured (dptwin_profile's `measured` block).
struct MeasuredProfile {
  std::string device;       // the device's own name ("NVIDIA H100 80GB HBM3", "cpu: AMD EPYC")
  std::string device_kind;  // "cpu" or "cuda"
  std::optional<std::string> gpu_model;  // the hardware files' GPU model it is, when the user said so
  std::string torch;        // torch version
  std::string dtype;        // "f32", "bf16", ...
  std::int64_t batch = 0;   // samples per measured step
  std::optional<int> threads;  // torch threads on the CPU
  std::string optimizer;    // "adamw", "sgd"
  int steps = 0, warmup_steps = 0;
  Seconds step_s = 0, forward_s = 0, backward_s = 0, optimizer_step_s = 0;  // medians
  Elements frozen_parameters = 0;  // elements with requires_grad false
  Elements buffer_elements = 0;    // buffers (BatchNorm running statistics): not parameters
};

struct ModelDescription {
  std::string name;              // library name ("resnet50", "gpt2-1.5b") or an mlp spec
  std::string sample;            // what one sample is ("one 224x224 RGB image", "a 1,024-token sequence")
  std::int64_t input_features = 0;  // flattened per-sample size of the model's input
  std::vector<LayerDescription> layers;
  std::vector<std::string> sources;  // where the architecture and the FLOP counts come from
  std::optional<MeasuredProfile> measured;  // present in a dptwin_profile file
  // Tokens in one sample, for targets and figures in tokens (a sequence model's sequence
  // length, or the mean of its padded batches); none for a model whose samples are not
  // token sequences. Never read off `sample`'s prose.
  std::optional<double> tokens_per_sample;
  // A Hugging Face config that asks for attn_implementation "flash_attention_2": costed as
  // sdpa's FlashAttention-2 kernels, but transformers runs it only in float16 or bfloat16
  // and the flash-attn package only on Ampere or newer, so such a point is infeasible.
  bool flash_attention_2 = false;
};

// Sum over layers and parameters.
Elements model_parameter_count(const ModelDescription& m);
double model_forward_flops_per_sample(const ModelDescription& m);
Elements model_activation_elements_per_sample(const ModelDescription& m);
// Output features of the last layer (the model's per-sample output size).
std::int64_t model_output_features(const ModelDescription& m);

// The most activation elements one layer saves per sample (10^13) that a model holds: a
// model file's bound, so that what `dptwin model show` writes reads back; elements x batch
// x element size then stays far inside 64-bit bytes.
inline constexpr std::int64_t kMaxLayerActivationElements = 10'000'000'000'000;

// Checks internal consistency (at least one layer, positive sizes, no empty or
// duplicate parameter names within a layer, no negative FLOPs, at most
// kMaxLayerActivationElements saved per layer and sample); throws
// std::invalid_argument naming the model, the layer and what is wrong.
void validate_model_description(const ModelDescription& m);

// The description of make_mlp(spec): per Linear layer weight [out, in] and bias
// [out], 2 x in x out forward FLOPs per sample; LayerNorm and activation layers
// as their own entries, exactly as make_mlp registers them.
ModelDescription describe_mlp(const MlpSpec& spec);

// Whether a profile was taken on the GPU kind `gpu_model` (a hardware file's GPU name):
// its gpu_model equals it, or the GPU's short name ("H100" of "H100-SXM5-80GB") is a
// whole word of the CUDA device's name ("NVIDIA H100 80GB HBM3").
bool measured_on_gpu_kind(const MeasuredProfile& p, const std::string& gpu_model);

// Decides whether a profiled model's measured times apply to a prediction on
// `gpu_model` (the hardware file's GPU name) in `dtype`: they do when the profile
// was taken on that GPU kind (its gpu_model, or the GPU name in its device name,
// "H100" of "H100-SXM5-80GB" in "NVIDIA H100 80GB HBM3") in that dtype. Otherwise
// the per-layer times are dropped, and the layers cost their FLOPs and bytes.
// Returns the sentence that says which (empty for a model without a profile).
std::string apply_measured_costs(ModelDescription& m, const std::string& gpu_model, const std::string& dtype);

// Builds the cost-only model on `device`: one CostLayer per description entry,
// parameters and gradients really allocated (zeroed where the device computes).
// With a precision, parameters take precision_parameter_dtype and activations and
// compute types follow it (see CostLayer); `memory_format` is the model's
// (channels_last: its convolutions pay no NCHW<->NHWC transposes in Tensor Core types).
Sequential make_cost_only_model(const ModelDescription& m, Device& device, DType dtype);
Sequential make_cost_only_model(const ModelDescription& m, Device& device, Precision precision,
                                MemoryFormat memory_format = MemoryFormat::contiguous);

// The op class of a layer, from its type's "+"-separated parts: conv when a part
// is a convolution (Conv2d, Bottleneck); else matmul when a part holds GEMMs
// (Linear, a transformer block or layer, heads); else other (norms, activations,
// pooling, embeddings: autocast's fp32 list or ops tensor cores do not run).
OpClass layer_op_class(const LayerDescription& l);

}  // namespace dpt
