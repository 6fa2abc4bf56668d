// Training precision as PyTorch defines it: the compute type of each op class, the
// dtype of saved activations and of parameters, the op class of the model
// library's layer types, and the twin's kernel time under a precision.
#include <gtest/gtest.h>

#include <stdexcept>

#include "engine/core/precision.hpp"
#include "engine/nn/model_library.hpp"
#include "sim/twin/sim_device.hpp"

namespace dpt {
namespace {

TEST(Precision, NamesRoundTripAndUnknownNamesAreRejectedWithTheChoices) {
  for (Precision p : {Precision::f32, Precision::tf32, Precision::bf16_amp, Precision::f16_amp, Precision::bf16,
                      Precision::f16_master,
                      Precision::f64})
    EXPECT_EQ(precision_from_name(precision_name(p)), p);
  try {
    precision_from_name("fp16");
    FAIL() << "fp16 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'fp16'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bf16-amp"), std::string::npos) << e.what();
  }
}

// PyTorch's defaults (torch.backends.cudnn.allow_tf32 = True, torch.backends.cuda.
// matmul.allow_tf32 = False): on Ampere+ convolutions run on TF32, matmul in f32.
TEST(Precision, F32IsPyTorchsDefaultsTf32ConvolutionsOnlyWhereTheGpuHasTf32) {
  EXPECT_EQ(precision_compute_type(Precision::f32, OpClass::conv, true), ComputeType::tf32);
  EXPECT_EQ(precision_compute_type(Precision::f32, OpClass::matmul, true), ComputeType::f32);
  EXPECT_EQ(precision_compute_type(Precision::f32, OpClass::other, true), ComputeType::f32);
  EXPECT_EQ(precision_compute_type(Precision::f32, OpClass::conv, false), ComputeType::f32);  // Volta
  EXPECT_EQ(precision_compute_type(Precision::tf32, OpClass::matmul, true), ComputeType::tf32);
  EXPECT_EQ(precision_compute_type(Precision::tf32, OpClass::matmul, false), ComputeType::f32);
}

// Autocast: matmul/conv in the low type, autocast's fp32 list (norms, softmax,
// losses) in f32; master weights and gradients stay f32, so bytes on the wire do too.
TEST(Precision, AutocastLowersOnlyMatmulAndConvAndKeepsF32WeightsAndGradients) {
  for (auto [p, low] : {std::pair{Precision::bf16_amp, ComputeType::bf16}, std::pair{Precision::f16_amp, ComputeType::f16}}) {
    EXPECT_EQ(precision_compute_type(p, OpClass::matmul, true), low);
    EXPECT_EQ(precision_compute_type(p, OpClass::conv, false), low);
    EXPECT_EQ(precision_compute_type(p, OpClass::other, true), ComputeType::f32);
    EXPECT_EQ(precision_parameter_dtype(p), DType::f32);
    EXPECT_EQ(precision_activation_dtype(p, OpClass::other), DType::f32);
  }
  EXPECT_EQ(precision_activation_dtype(Precision::bf16_amp, OpClass::matmul), DType::bf16);
  EXPECT_EQ(precision_activation_dtype(Precision::f16_amp, OpClass::conv), DType::f16);
  EXPECT_TRUE(precision_uses_grad_scaler(Precision::f16_amp));
  EXPECT_FALSE(precision_uses_grad_scaler(Precision::bf16_amp));
}

TEST(Precision, PureBf16StoresEverythingInBf16AndF64EverythingInF64) {
  EXPECT_EQ(precision_parameter_dtype(Precision::bf16), DType::bf16);
  EXPECT_EQ(precision_activation_dtype(Precision::bf16, OpClass::other), DType::bf16);
  EXPECT_EQ(precision_parameter_dtype(Precision::f64), DType::f64);
  EXPECT_EQ(precision_compute_type(Precision::f64, OpClass::conv, true), ComputeType::f64);
  EXPECT_EQ(precision_parameter_dtype(Precision::tf32), DType::f32);  // TF32 is a math mode, not a storage type
  EXPECT_EQ(precision_of_dtype(DType::f32), Precision::f32);
  EXPECT_EQ(precision_of_dtype(DType::f64), Precision::f64);
  EXPECT_THROW(precision_of_dtype(DType::i64), std::invalid_argument);
}

// f16-master (apex amp O2, DeepSpeed fp16): the whole model is f16, so its weights, gradients
// (DDP's buckets), activations and GEMMs are f16; the f32 copies live in the optimizer.
TEST(Precision, F16MasterKeepsTheModelInF16AndMastersInTheOptimizer) {
  const Precision p = Precision::f16_master;
  EXPECT_EQ(precision_name(p), "f16-master");
  EXPECT_EQ(precision_from_name("f16-master"), p);
  EXPECT_EQ(precision_parameter_dtype(p), DType::f16);
  for (OpClass c : {OpClass::other, OpClass::matmul, OpClass::conv}) EXPECT_EQ(precision_activation_dtype(p, c), DType::f16);
  EXPECT_EQ(precision_compute_type(p, OpClass::matmul, true), ComputeType::f16);
  EXPECT_EQ(precision_compute_type(p, OpClass::conv, false), ComputeType::f16);
  EXPECT_EQ(precision_compute_type(p, OpClass::other, true), ComputeType::f32);
  EXPECT_TRUE(precision_uses_master_weights(p));
  EXPECT_FALSE(precision_uses_grad_scaler(p));  // its loss scaler is the master-weights optimizer's own
  for (Precision q : {Precision::f32, Precision::tf32, Precision::bf16_amp, Precision::f16_amp, Precision::bf16,
                      Precision::f64})
    EXPECT_FALSE(precision_uses_master_weights(q)) << precision_name(q);
}

TEST(Precision, LibraryLayerTypesGetTheirOpClass) {
  auto cls = [](const char* type) { return layer_op_class(LayerDescription{"l", type, {}, 0, 0, 1}); };
  EXPECT_EQ(cls("Conv2d+BatchNorm2d+ReLU+MaxPool2d"), OpClass::conv);
  EXPECT_EQ(cls("Bottleneck"), OpClass::conv);
  EXPECT_EQ(cls("GPT2Block"), OpClass::matmul);
  EXPECT_EQ(cls("BertLayer"), OpClass::matmul);
  EXPECT_EQ(cls("LlamaDecoderLayer"), OpClass::matmul);
  EXPECT_EQ(cls("LayerNorm+TiedLinear"), OpClass::matmul);
  EXPECT_EQ(cls("AdaptiveAvgPool2d+Linear"), OpClass::matmul);
  EXPECT_EQ(cls("Linear"), OpClass::matmul);
  EXPECT_EQ(cls("GPT2Embeddings"), OpClass::other);
  EXPECT_EQ(cls("Embedding"), OpClass::other);
  EXPECT_EQ(cls("LayerNorm"), OpClass::other);
  EXPECT_EQ(cls("RMSNorm"), OpClass::other);
  EXPECT_EQ(cls("ReLU"), OpClass::other);
  EXPECT_EQ(cls("GELU"), OpClass::other);
}

// A GPU with A100's dense datasheet peaks, efficiency 1 and no latency: a
// compute-bound op's time is flops / the peak of its compute type.
SimGpuRates a100_like() {
  SimGpuRates r;
  r.model = "a100-like";
  r.peak_flops = {{DType::f32, 19.5e12}, {DType::f64, 19.5e12}};
  r.compute_peak_flops = {{ComputeType::tf32, 156e12}, {ComputeType::bf16, 312e12}, {ComputeType::f16, 312e12}};
  r.memory_bandwidth = 2e12;
  return r;
}

TEST(Precision, KernelTimeUsesThePeakOfTheOpsComputeType) {
  const SimGpuRates r = a100_like();
  const OpCost conv{"conv", OpKind::compute, 312e12, 0, 0, OpClass::conv};
  const OpCost matmul{"gemm", OpKind::compute, 312e12, 0, 0, OpClass::matmul};
  const OpCost norm{"norm", OpKind::compute, 19.5e12, 0, 0, OpClass::other};
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(conv, r, Precision::f32), 2.0);      // 312 / 156 (TF32)
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(matmul, r, Precision::f32), 16.0);   // 312 / 19.5 (f32)
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(matmul, r, Precision::tf32), 2.0);
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(matmul, r, Precision::bf16_amp), 1.0);
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(norm, r, Precision::bf16_amp), 1.0);  // 19.5 / 19.5: f32 under autocast
  SimGpuRates volta = r;
  volta.compute_peak_flops = {{ComputeType::f16, 125e12}};
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(conv, volta, Precision::f32), 16.0);  // no TF32: f32
  try {
    sim_kernel_time_s(matmul, volta, Precision::bf16_amp);
    FAIL() << "bf16 on a GPU without a bf16 peak";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no bf16 peak flops, which precision bf16-amp needs"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dpt
