// Cost-only layers: they allocate what the real layer allocates (parameters,
// gradients, saved activations) and charge what it costs, through the same
// Device interface the numeric layers use.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "engine/nn/cost_layer.hpp"
#include "engine/core/fault_injection.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/core/kernels.hpp"
#include "engine/nn/model_library.hpp"
#include "engine/optim/grad_scaler.hpp"
#include "engine/optim/optim.hpp"
#include "engine/parallel/strategy.hpp"

namespace dpt {
namespace {

// A shape-only device that records every op submitted to it, as the twin's
// shape-only mode sees them (no data, costs only).
class RecordingDevice final : public Device {
 public:
  int index() const override { return 0; }
  DeviceKind kind() const override { return DeviceKind::sim; }
  std::string name() const override { return "recording:0"; }
  bool computes() const override { return false; }
  void submit(const OpCost& cost, const std::function<void()>&) override { ops.push_back(cost); }
  void synchronize() override {}
  Kernels& kernels() override { return host_kernels(); }
  std::vector<OpCost> ops;

 protected:
  void* raw_allocate(Bytes) override { return nullptr; }
  void raw_free(void*, Bytes) override {}
};

LayerDescription block() {
  // Hand-written: 2 parameters of 6 and 3 elements, 100 FLOPs and 10 saved elements per sample.
  return {"block", "TestBlock", {{"weight", {3, 2}}, {"bias", {3}}}, 100.0, 10, 3};
}

TEST(CostLayer, AllocatesParametersAndGradientsOfTheDescribedShapes) {
  RecordingDevice dev;
  CostLayer layer(block(), 2, dev, DType::f32);
  auto params = layer.parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->name, "weight");
  EXPECT_EQ(params[0]->value.shape(), (Shape{3, 2}));
  EXPECT_EQ(params[1]->grad.shape(), (Shape{3}));
  EXPECT_EQ(layer.type_name(), "TestBlock");
  // (6 + 3) elements x 4 bytes, once as parameters and once as gradients.
  auto at_peak = dev.memory().breakdown_at_peak();
  EXPECT_EQ(at_peak[static_cast<int>(MemoryCategory::parameters)], 36);
  EXPECT_EQ(at_peak[static_cast<int>(MemoryCategory::gradients)], 36);
  EXPECT_EQ(dev.memory().live_bytes(), 72);
}

TEST(CostLayer, ForwardChargesFlopsTimesBatchAndSavesActivations) {
  RecordingDevice dev;
  CostLayer layer(block(), 2, dev, DType::f64);
  Tensor x = Tensor::empty(dev, {5, 2}, DType::f64, MemoryCategory::inputs);
  const Bytes before = dev.memory().live_bytes();
  dev.ops.clear();
  Tensor y = layer.forward(x);
  EXPECT_EQ(y.shape(), (Shape{5, 3}));
  // Shape-only: no fill, just the layer's charges. A block holds norms and activations
  // beside its GEMMs: they stream the saved activations (400 bytes) in a kernel of their
  // own, reading and writing them once.
  ASSERT_EQ(dev.ops.size(), 2u);
  EXPECT_DOUBLE_EQ(dev.ops[0].flops, 500.0);  // 100 per sample x 5
  EXPECT_EQ(dev.ops[1].flops, 0.0);
  EXPECT_EQ(dev.ops[1].bytes_read, 400);
  EXPECT_EQ(dev.ops[1].bytes_written, 400);
  // Saved activations 10 x 5 x 8 bytes plus the output 5 x 3 x 8 bytes.
  EXPECT_EQ(dev.memory().live_bytes() - before, 400 + 120);
  dev.ops.clear();
  Tensor dy = Tensor::empty(dev, {5, 3}, DType::f64, MemoryCategory::activations);
  Tensor dx = layer.backward(dy, true);
  ASSERT_EQ(dev.ops.size(), 2u);  // the norms' and activations' backward (3 passes), then the GEMMs
  EXPECT_EQ(dev.ops[0].bytes_read + dev.ops[0].bytes_written, 3 * 400);
  EXPECT_DOUBLE_EQ(dev.ops[1].flops, 1000.0);  // backward is 2x forward
  EXPECT_EQ(dx.shape(), (Shape{5, 2}));
  y = Tensor();
  dy = Tensor();
  dx = Tensor();
  // Backward freed the saved activations: only the input remains beyond the start.
  EXPECT_EQ(dev.memory().live_bytes(), before);
}

TEST(CostLayer, BackwardWithoutInputGradReturnsUndefined) {
  RecordingDevice dev;
  CostLayer layer(block(), 2, dev, DType::f32);
  Tensor x = Tensor::empty(dev, {4, 2}, DType::f32);
  Tensor y = layer.forward(x);
  Tensor dx = layer.backward(y, false);
  EXPECT_FALSE(dx.defined());
}

TEST(CostLayer, OnAComputingDeviceTheOutputIsZeros) {
  HostDevice dev(0, DeviceKind::host_worker);
  CostLayer layer(block(), 2, dev, DType::f32);
  Tensor x = Tensor::zeros(dev, {4, 2}, DType::f32);
  Tensor y = layer.forward(x);
  for (double v : tensor_to_f64_vector(y)) EXPECT_EQ(v, 0.0);
  for (double v : tensor_to_f64_vector(layer.parameters()[0]->value)) EXPECT_EQ(v, 0.0);
}

TEST(CostLayer, RejectsAnInputOfTheWrongWidth) {
  RecordingDevice dev;
  CostLayer layer(block(), 2, dev, DType::f32);
  Tensor x = Tensor::empty(dev, {4, 7}, DType::f32);
  try {
    layer.forward(x);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "cost-only layer block (TestBlock): input has shape [4, 7], expected [batch, 2]");
  }
}

TEST(CostLayer, ReplicaHasTheSameParametersOnTheOtherDevice) {
  RecordingDevice a, b;
  CostLayer layer(block(), 2, a, DType::f32);
  auto replica = layer.replicate_on(b);
  auto p = replica->parameters();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(&p[0]->value.device(), &b);
  EXPECT_EQ(p[0]->value.shape(), (Shape{3, 2}));
  EXPECT_EQ(replica->output_shape({9, 2}), (Shape{9, 3}));
}

TEST(ModelDescription, ValidationNamesTheModelLayerAndProblem) {
  ModelDescription m{"toy", "x", 2, {block(), block()}, {}};
  try {
    validate_model_description(m);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "model toy: layer 1 (block): duplicate layer name");
  }
  m.layers[1].name = "block2";
  m.layers[1].parameters[1].shape = {0};
  try {
    validate_model_description(m);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "model toy: layer 1 (block2): parameter 'bias' has shape [0]: dimensions must be positive");
  }
}

TEST(ModelDescription, DescribeMlpCountsLinearParametersAndFlops) {
  MlpSpec spec{{4, 16, 2}, Activation::relu, true};
  ModelDescription m = describe_mlp(spec);
  // Linear(4,16), LayerNorm(16), ReLU, Linear(16,2): as make_mlp registers them.
  ASSERT_EQ(m.layers.size(), 4u);
  EXPECT_EQ(m.layers[0].type, "Linear");
  EXPECT_EQ(m.layers[1].type, "LayerNorm");
  EXPECT_EQ(m.layers[2].type, "ReLU");
  EXPECT_EQ(m.layers[3].name, "3");
  // 4*16+16 + 16+16 + 16*2+2 parameters, counted by hand.
  EXPECT_EQ(model_parameter_count(m), 80 + 32 + 34);
  // 2*4*16+16 + 8*16 + 16 + 2*16*2+2 FLOPs per sample.
  EXPECT_DOUBLE_EQ(model_forward_flops_per_sample(m), 144.0 + 128.0 + 16.0 + 66.0);
  EXPECT_EQ(model_output_features(m), 2);
}


// Widths whose products would wrap 64 bits (2^32 x 2^32 weights read as 0) are refused,
// naming the layer; a large but sound MLP is not.
TEST(ModelDescription, MlpSpecsBeyondATensorsBoundAreRefused) {
  const auto error = [](const std::string& spec) {
    try {
      (void)parse_mlp_spec(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(error("mlp:1-4294967296-4294967296-1").find("Linear(4294967296, 4294967296) has 1.845e+19 weights"),
            std::string::npos)
      << error("mlp:1-4294967296-4294967296-1");
  EXPECT_NE(error("mlp:3037000500-3037000500-3037000500").find("Linear(3037000500, 3037000500)"), std::string::npos);
  EXPECT_EQ(error("mlp:65536-65536-10"), "(accepted)");  // 4.3e9 weights
}

// Invariant: every repository file a built-in description names as its source exists
// (a layout move once left "engine/model.hpp" in `model show mlp:` for a year of stops).
TEST(ModelDescription, SourcesNameFilesThatExist) {
  const ModelDescription m = describe_mlp(parse_mlp_spec("mlp:6-10-3"));
  int named = 0;
  for (const auto& source : m.sources) {
    std::istringstream words(source);
    for (std::string w; words >> w;) {
      if (w.rfind("engine/", 0) != 0 && w.rfind("sim/", 0) != 0 && w.rfind("scenarios/", 0) != 0) continue;
      ++named;
      EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(DPT_SOURCE_DIR) / w)) << w << " in: " << source;
    }
  }
  EXPECT_EQ(named, 2) << "make_mlp's header and the kernels' source";
}

TEST(ModelDescription, DescribeMlpHasMakeMlpsParameterNamesAndShapes) {
  // The library form of an MLP must present the strategies with exactly the
  // parameters the numeric MLP registers, in the same order.
  for (const char* text : {"mlp:4-16-2", "mlp:8-32-32-3", "mlp:5-7-1"}) {
    for (bool layernorm : {false, true}) {
      MlpSpec spec = parse_mlp_spec(text);
      spec.layernorm = layernorm;
      HostDevice dev(0, DeviceKind::host_worker);
      Sequential numeric = make_mlp(spec, dev, DType::f32, 1);
      Sequential cost = make_cost_only_model(describe_mlp(spec), dev, DType::f32);
      auto a = numeric.named_parameters();
      auto b = cost.named_parameters();
      ASSERT_EQ(a.size(), b.size()) << text;
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].name, b[i].name) << text;
        EXPECT_EQ(a[i].param->value.shape(), b[i].param->value.shape()) << text << " " << a[i].name;
      }
      ASSERT_EQ(numeric.size(), cost.size());
      for (size_t i = 0; i < numeric.size(); ++i) EXPECT_EQ(numeric.layer(i).type_name(), cost.layer(i).type_name());
    }
  }
}

TEST(CostOnlyModel, TrainsAStepUnderTheSingleStrategyOnTheHost) {
  // The strategies cannot tell a cost-only model from a numeric one: a full step
  // (forward, loss, backward, optimizer) runs on it, on zeros.
  HostBackend backend(1);
  const ModelDescription desc = describe_mlp(parse_mlp_spec("mlp:6-10-3"));
  StrategyOptions options;
  options.kind = StrategyKind::single;
  auto strategy = make_strategy(
      backend, options, [&](Device& d) { return make_cost_only_model(desc, d, DType::f32); },
      [](std::vector<NamedParameter> p) { return make_sgd(std::move(p), SgdOptions{}); });
  Tensor x = Tensor::zeros(backend.host_memory(), {4, 6}, DType::f32, MemoryCategory::inputs);
  Tensor y = Tensor::zeros(backend.host_memory(), {4, 3}, DType::f32, MemoryCategory::inputs);
  StepResult r = strategy->train_step(x, y);
  EXPECT_EQ(r.loss, 0.0);  // zeros against zeros
  ASSERT_EQ(r.samples_per_device.size(), 1u);
  EXPECT_EQ(r.samples_per_device[0], 4);
  EXPECT_EQ(strategy->module().parameter_count(), model_parameter_count(desc));
}

TEST(SgdStep, ChargesTheBuffersTorchsUpdateTouches) {
  // torch.optim.SGD without momentum reads the parameter and its gradient and writes the
  // parameter (p.add_(grad, alpha=-lr)); with momentum it also reads and writes the
  // momentum buffer. A 10-element f32 tensor is 40 bytes.
  RecordingDevice dev;
  Tensor p = Tensor::empty(dev, {10}, DType::f32, MemoryCategory::parameters);
  Tensor g = Tensor::empty(dev, {10}, DType::f32, MemoryCategory::gradients);
  Tensor buf = Tensor::empty(dev, {10}, DType::f32, MemoryCategory::optimizer_state);
  kernel_sgd_step(SgdOptions{}, true, p, g, nullptr);
  SgdOptions momentum;
  momentum.momentum = 0.9;
  kernel_sgd_step(momentum, true, p, g, &buf);
  ASSERT_EQ(dev.ops.size(), 2u);
  EXPECT_EQ(dev.ops[0].bytes_read, 80);
  EXPECT_EQ(dev.ops[0].bytes_written, 40);
  EXPECT_EQ(dev.ops[1].bytes_read, 120);
  EXPECT_EQ(dev.ops[1].bytes_written, 80);
}

// multi_tensor_apply's launches, counted by hand from MultiTensorApply.cuh's rules: chunks of
// 65,536 elements, a launch at 320 queued chunks, or when the depth's tensor limit (110, 64,
// 48, 36, 30) is reached at a tensor's last chunk, or at the end.
TEST(OptimizerImpl, MultiTensorLaunchesFollowPyTorchsLimits) {
  EXPECT_EQ(multi_tensor_launches({}, 1), 0);
  EXPECT_EQ(multi_tensor_launches({65536LL * 320}, 1), 1);      // exactly 320 chunks
  EXPECT_EQ(multi_tensor_launches({65536LL * 320 + 1}, 1), 2);  // one chunk more
  EXPECT_EQ(multi_tensor_launches(std::vector<std::int64_t>(110, 10), 1), 1);
  EXPECT_EQ(multi_tensor_launches(std::vector<std::int64_t>(111, 10), 1), 2);
  EXPECT_EQ(multi_tensor_launches(std::vector<std::int64_t>(200, 10), 3), 5);  // 48 a launch: 4 full and 8 left
  EXPECT_EQ(multi_tensor_launches({10, 0, 10}, 4), 1);                         // empty tensors are skipped
  EXPECT_EQ(multi_tensor_launches(std::vector<std::int64_t>(110, 10), 1, true), 2);  // a scalar list: 96 a launch
  EXPECT_THROW(multi_tensor_launches({10}, 6), std::invalid_argument);
  // Each launch on the tensor whose chunk fires it: the 110th tensor fills the list, the
  // 111th ends it; a tensor of 321 chunks fires one at its 320th chunk and the last at its end.
  const auto by = multi_tensor_launches_by_tensor(std::vector<std::int64_t>(111, 10), 1);
  EXPECT_EQ(by[109], 1);
  EXPECT_EQ(by[110], 1);
  EXPECT_EQ(std::count(by.begin(), by.end(), 0), 109);
  EXPECT_EQ(multi_tensor_launches_by_tensor({10, 65536LL * 321, 0}, 2), (std::vector<int>{0, 2, 0}));
}

struct ChargedStep {
  std::vector<OpCost> updates;  // the adamw_step/sgd_step ops, one per parameter
  int launches = 0;
};

// One optimizer step on a recording device over parameters of these element counts.
ChargedStep charged_step(const std::vector<std::int64_t>& numels, OptimizerImpl impl, bool adamw) {
  RecordingDevice dev;
  std::vector<Parameter> ps(numels.size());
  std::vector<NamedParameter> named;
  for (size_t i = 0; i < numels.size(); ++i) {
    ps[i].value = Tensor::empty(dev, {numels[i]}, DType::f32, MemoryCategory::parameters);
    ps[i].grad = Tensor::empty(dev, {numels[i]}, DType::f32, MemoryCategory::gradients);
    named.push_back({"p" + std::to_string(i), &ps[i]});
  }
  SgdOptions momentum;
  momentum.momentum = 0.9;
  auto opt = adamw ? make_adamw(named, AdamWOptions{}, impl) : make_sgd(named, momentum, impl);
  opt->step();
  ChargedStep out;
  for (const auto& op : dev.ops)
    if (std::string(op.name) == (adamw ? "adamw_step" : "sgd_step")) {
      out.updates.push_back(op);
      out.launches += op.launches;
    }
  return out;
}

// Invariant: each implementation charges PyTorch's kernels for the same numerics: per
// parameter of n f32 elements, AdamW for_loop 9 launches reading 14 x 4n bytes and writing
// 9 x 4n (torch 1.13 _single_tensor_adamw's mul_, mul_, add_, mul_, addcmul_, sqrt, div,
// add_, addcdiv_), foreach the same bytes in multi_tensor_apply's launches over all the
// parameters (9 ops, one launch each for these three small lists, fired at the last one), fused 4n x 4 read and
// 3 x 4n written in one launch; dptwin's own kernel 4 and 3, one launch per parameter. SGD
// with momentum: for_loop 3 launches, 5 read and 3 written. Caught: the planted
// foreach-one-launch-per-op (9 launches where 200 small tensors need 31).
TEST(OptimizerImpl, EachImplementationChargesPyTorchsKernels) {
  const std::vector<std::int64_t> n = {10, 70000, 30};  // 1, 2 and 1 chunks
  auto bytes = [](const ChargedStep& c, size_t i) { return std::pair{c.updates[i].bytes_read, c.updates[i].bytes_written}; };
  const auto own = charged_step(n, OptimizerImpl::per_parameter, true);
  ASSERT_EQ(own.updates.size(), 3u);
  EXPECT_EQ(own.launches, 3);
  EXPECT_EQ(bytes(own, 1), (std::pair<Bytes, Bytes>{4 * 4 * 70000, 3 * 4 * 70000}));
  const auto loop = charged_step(n, OptimizerImpl::for_loop, true);
  EXPECT_EQ(loop.launches, 27);
  EXPECT_EQ(bytes(loop, 1), (std::pair<Bytes, Bytes>{14 * 4 * 70000, 9 * 4 * 70000}));
  const auto each = charged_step(n, OptimizerImpl::foreach, true);
  EXPECT_EQ(each.launches, 9);
  EXPECT_EQ(each.updates[0].launches, 0);
  EXPECT_EQ(each.updates[2].launches, 9);  // each list's one launch fires at its last tensor
  EXPECT_EQ(bytes(each, 1), bytes(loop, 1));
  const auto fused = charged_step(n, OptimizerImpl::fused, true);
  EXPECT_EQ(fused.launches, 1);
  EXPECT_EQ(bytes(fused, 1), bytes(own, 1));
  const auto sgd = charged_step(n, OptimizerImpl::for_loop, false);
  EXPECT_EQ(sgd.launches, 9);
  EXPECT_EQ(bytes(sgd, 0), (std::pair<Bytes, Bytes>{5 * 40, 3 * 40}));
  // 200 tensors: AdamW's op depths 1, 1, 2, 1, 3, 2, 1 (a scalar list: 96), 2, 3 launch
  // 2, 2, 4, 2, 5, 4, 3, 4, 5.
  const std::vector<std::int64_t> many(200, 10);
  EXPECT_EQ(charged_step(many, OptimizerImpl::foreach, true).launches, 31);
  // An empty parameter launches nothing in a loop (PyTorch skips empty tensors).
  EXPECT_EQ(charged_step({10, 0}, OptimizerImpl::for_loop, true).launches, 9);
  ScopedFault f(Fault::foreach_one_launch_per_op);
  EXPECT_NE(charged_step(many, OptimizerImpl::foreach, true).launches, 31);
}

// GradScaler's unscale is torch's _amp_foreach_non_finite_check_and_unscale_, one
// multi-tensor op over the gradients: 200 small gradients take 2 launches (110 a list),
// not 200 (it charged one per parameter).
TEST(OptimizerImpl, GradScalersUnscaleIsOneMultiTensorOp) {
  RecordingDevice dev;
  std::vector<Parameter> ps(200);
  std::vector<NamedParameter> named;
  for (size_t i = 0; i < ps.size(); ++i) {
    ps[i].value = Tensor::empty(dev, {10}, DType::f32, MemoryCategory::parameters);
    ps[i].grad = Tensor::empty(dev, {10}, DType::f32, MemoryCategory::gradients);
    named.push_back({"p" + std::to_string(i), &ps[i]});
  }
  GradScaler scaler(make_sgd(named, SgdOptions{}, OptimizerImpl::fused), named, GradScalerOptions{});
  scaler.step();
  int unscale_launches = 0, unscale_ops = 0;
  for (const auto& op : dev.ops)
    if (std::string(op.name) == "amp_unscale_step") {
      unscale_launches += op.launches;
      ++unscale_ops;
    }
  EXPECT_EQ(unscale_ops, 200);  // each gradient's bytes
  EXPECT_EQ(unscale_launches, 2);
}

// A profiled layer (dptwin_profile): frozen weight, measured times per sample.
LayerDescription profiled_block() {
  LayerDescription l = block();
  l.parameters[0].requires_grad = false;
  l.measured_forward_s_per_sample = 0.001;
  l.measured_backward_s_per_sample = 0.003;
  return l;
}

TEST(CostLayer, FrozenParametersHaveValuesButNoGradientsAndAreNotTrained) {
  // Invariant: a frozen tensor costs its value's memory and nothing else; only the
  // trainable ones reach the optimizer and DDP (parameters()).
  RecordingDevice dev;
  CostLayer layer(profiled_block(), 2, dev, DType::f32);
  const auto params = layer.parameters();
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(params[0]->name, "bias");
  auto at_peak = dev.memory().breakdown_at_peak();
  EXPECT_EQ(at_peak[static_cast<int>(MemoryCategory::parameters)], (6 + 3) * 4);
  EXPECT_EQ(at_peak[static_cast<int>(MemoryCategory::gradients)], 3 * 4);
}

TEST(CostLayer, MeasuredTimesAreChargedScaledByTheBatch) {
  RecordingDevice dev;
  CostLayer layer(profiled_block(), 2, dev, DType::f32);
  Tensor x = Tensor::empty(dev, {5, 2}, DType::f32, MemoryCategory::inputs);
  dev.ops.clear();
  Tensor y = layer.forward(x);
  ASSERT_EQ(dev.ops.size(), 1u);
  ASSERT_TRUE(dev.ops[0].measured_s);
  EXPECT_DOUBLE_EQ(*dev.ops[0].measured_s, 0.005);  // 1 ms per sample x 5
  Tensor dy = Tensor::empty(dev, {5, 3}, DType::f32, MemoryCategory::activations);
  dev.ops.clear();
  layer.backward(dy, true);
  ASSERT_EQ(dev.ops.size(), 1u);
  EXPECT_DOUBLE_EQ(*dev.ops[0].measured_s, 0.015);  // 3 ms per sample x 5
  // Without measured times the op has none: the twin costs its FLOPs and bytes.
  CostLayer plain(block(), 2, dev, DType::f32);
  dev.ops.clear();
  plain.forward(x);
  EXPECT_FALSE(dev.ops[0].measured_s);
}

// A convolution block whose memory-bound traffic and conv tensors the model library counted:
// 1,000 elements forward and 1,800 backward per sample through its norms and activations,
// 300 conv input plus output elements per sample.
LayerDescription counted_conv_block() {
  LayerDescription d{"layer1.0", "Bottleneck", {{"conv.weight", {4, 4, 1, 1}}}, 2000.0, 50, 3};
  d.memory_bound_forward_elements_per_sample = 1000;
  d.memory_bound_backward_elements_per_sample = 1800;
  d.conv_io_elements_per_sample = 300;
  return d;
}

// Whether a counted block's kernels move exactly what the library counted, x batch x the
// element size: the norm kernel its memory-bound elements, the conv kernel its weights plus
// its conv tensors (forward once, backward 1.5x read and 0.5x written, plus the gradients).
bool charges_counted_traffic() {
  RecordingDevice dev;
  CostLayer layer(counted_conv_block(), 2, dev, DType::f32);
  const Bytes batch = 5, elt = 4, weights = 16 * elt;
  Tensor x = Tensor::empty(dev, {5, 2}, DType::f32, MemoryCategory::inputs);
  dev.ops.clear();
  Tensor y = layer.forward(x);
  if (dev.ops.size() != 2u) return false;
  const OpCost conv = dev.ops[0], norm = dev.ops[1];
  Tensor dy = Tensor::empty(dev, {5, 3}, DType::f32, MemoryCategory::activations);
  dev.ops.clear();
  (void)layer.backward(dy, true);
  if (dev.ops.size() != 2u) return false;
  const OpCost norm_bwd = dev.ops[0], conv_bwd = dev.ops[1];
  return norm.bytes_read + norm.bytes_written == 1000 * batch * elt &&
         conv.bytes_read + conv.bytes_written == weights + 300 * batch * elt &&
         norm_bwd.bytes_read + norm_bwd.bytes_written == 1800 * batch * elt &&
         conv_bwd.bytes_read == weights + 450 * batch * elt &&
         conv_bwd.bytes_written == weights + 150 * batch * elt;  // the weight gradient and dx
}

TEST(CostLayer, CountedMemoryBoundTrafficAndConvTensorsAreCharged) { EXPECT_TRUE(charges_counted_traffic()); }

// A layer that lists its convolutions splits its conv kernel into them: each part takes
// the kernel's FLOPs in proportion to its own (hand-written: 60 and 20 of 80 conv FLOPs, so
// 3/4 and 1/4) and its bytes in proportion to its inputs plus outputs (100 and 200 of 300:
// 1/3 and 2/3), forward and backward; the parts sum to the kernel. Without the list: none.
TEST(CostLayer, ListedConvolutionsSplitTheConvKernel) {
  LayerDescription d = counted_conv_block();
  d.convs = {{60.0, 100}, {20.0, 200}};
  RecordingDevice dev;
  CostLayer layer(d, 2, dev, DType::f32);
  Tensor x = Tensor::empty(dev, {5, 2}, DType::f32, MemoryCategory::inputs);
  dev.ops.clear();
  Tensor y = layer.forward(x);
  Tensor dy = Tensor::empty(dev, {5, 3}, DType::f32, MemoryCategory::activations);
  (void)layer.backward(dy, true);
  int convs_seen = 0;
  for (const OpCost& op : dev.ops) {
    if (op.op_class != OpClass::conv) continue;
    ++convs_seen;
    ASSERT_EQ(op.parts.size(), 2u) << op.name;
    const double bytes = static_cast<double>(op.bytes_read + op.bytes_written);
    EXPECT_DOUBLE_EQ(op.parts[0].flops, 0.75 * op.flops) << op.name;
    EXPECT_DOUBLE_EQ(op.parts[1].flops, 0.25 * op.flops) << op.name;
    EXPECT_DOUBLE_EQ(op.parts[0].bytes, bytes / 3) << op.name;
    EXPECT_DOUBLE_EQ(op.parts[1].bytes, 2 * bytes / 3) << op.name;
  }
  EXPECT_EQ(convs_seen, 2);  // forward and backward
  RecordingDevice dev2;
  CostLayer plain(counted_conv_block(), 2, dev2, DType::f32);
  (void)plain.forward(Tensor::empty(dev2, {5, 2}, DType::f32, MemoryCategory::inputs));
  for (const OpCost& op : dev2.ops) EXPECT_TRUE(op.parts.empty()) << op.name;
}

// A layer that lists batched matmuls between activations (attention's) runs each as a
// kernel of its own: forward one per product, backward two (each operand's gradient), each
// with 2 x count x m x n x k FLOPs x batch and the activations it reads and writes, while
// the layer's own kernel keeps the rest of its FLOPs. Hand-computed for a layer of 1,000,000
// FLOPs per sample with products {2 x [8, 8] over 4} and {2 x [8, 4] over 8}, batch 5, f32:
// every product 2 x 2 x 8 x 8 x 4 x 5 = 5,120 FLOPs; forward, the first reads 2 x (8x4 + 4x8)
// x 5 x 4 B = 2,560 B and writes 2 x 8x8 x 5 x 4 = 2,560 B; the second reads (8x8 + 8x4)
// elements (3,840 B) and writes 8x4 (1,280 B). Backward of the first: dA reads dC and B
// (8x8 + 4x8: 3,840 B), writes dA (8x4: 1,280 B); dB reads A and dC (3,840 B), writes dB
// (4x8: 1,280 B).
bool bmms_are_own_kernels() {
  LayerDescription d{"encoder.layer.0", "BertLayer", {{"w", {2, 2}}}, 1'000'000.0, 50, 2};
  d.bmms = {{2, 8, 8, 4}, {2, 8, 4, 8}};
  RecordingDevice dev;
  CostLayer layer(d, 2, dev, DType::f32);
  Tensor x = Tensor::empty(dev, {5, 2}, DType::f32, MemoryCategory::inputs);
  dev.ops.clear();
  Tensor y = layer.forward(x);
  std::vector<OpCost> bmm, main;
  for (const auto& op : dev.ops) (std::string(op.name).starts_with("attention_bmm") ? bmm : main).push_back(op);
  if (bmm.size() != 2u || main.size() != 2u) return false;  // main: the GEMM kernel and its memory-bound parts
  const OpCost& gemm = main[0].op_class == OpClass::matmul ? main[0] : main[1];
  bool ok = bmm[0].flops == 5120 && bmm[0].bytes_read == 2560 && bmm[0].bytes_written == 2560 &&
            bmm[1].flops == 5120 && bmm[1].bytes_read == 3840 && bmm[1].bytes_written == 1280 &&
            bmm[0].op_class == OpClass::matmul && gemm.flops == 5'000'000.0 - 2 * 5120;
  Tensor dy = Tensor::empty(dev, {5, 2}, DType::f32, MemoryCategory::activations);
  dev.ops.clear();
  (void)layer.backward(dy, true);
  bmm.clear();
  main.clear();
  for (const auto& op : dev.ops) (std::string(op.name).starts_with("attention_bmm") ? bmm : main).push_back(op);
  if (bmm.size() != 4u || main.size() != 2u) return false;
  const OpCost& gemm_bwd = main[0].op_class == OpClass::matmul ? main[0] : main[1];
  for (const auto& op : bmm) ok = ok && op.flops == 5120;
  return ok && bmm[0].bytes_read == 3840 && bmm[0].bytes_written == 1280 && bmm[1].bytes_read == 3840 &&
         bmm[1].bytes_written == 1280 && gemm_bwd.flops == 10'000'000.0 - 4 * 5120;
}

TEST(CostLayer, AttentionBatchedMatmulsAreKernelsOfTheirOwn) { EXPECT_TRUE(bmms_are_own_kernels()); }

TEST(CostLayer, PlantedBugBatchedMatmulsInsideTheLayerRooflineIsCaught) {
  ScopedFault f(Fault::attention_bmms_in_layer_roofline);
  EXPECT_FALSE(bmms_are_own_kernels());
}

// A layer with a fused attention kernel (LayerDescription::sdpa) runs it as one kernel each
// way, with FlashAttention's FLOP count: forward 4 x q x k x d per head, halved when causal;
// backward 2.5x that (the scores recomputed); it reads q, k, v and writes the output and an
// f32 log-sum-exp per query and head; backward reads q, k, v, the output, its gradient and
// the log-sum-exp and writes three gradients. The layer's own kernel loses the FLOPs its
// description counts for attention (4 x q x k x d per head, twice backward). Hand-computed
// for 1,000,000 FLOPs per sample, 2 heads of 4 over 8 queries and 8 keys, causal, batch 5,
// f32: counted 4 x 10 x 8 x 8 x 4 = 10,240 FLOPs, the kernel 5,120 forward and 12,800
// backward; q, k, v and the output 10 x 8 x 4 x 4 B = 1,280 B each, the log-sum-exp
// 10 x 8 x 4 B = 320 B: forward reads 3,840 B and writes 1,600 B, backward reads 6,720 B
// and writes 3,840 B.
bool sdpa_is_one_fused_kernel() {
  LayerDescription d{"h.0", "GPT2Block", {{"w", {2, 2}}}, 1'000'000.0, 50, 2};
  d.sdpa = SdpaDescription{2, 8, 8, 4, true};
  RecordingDevice dev;
  CostLayer layer(d, 2, dev, DType::f32);
  Tensor x = Tensor::empty(dev, {5, 2}, DType::f32, MemoryCategory::inputs);
  dev.ops.clear();
  Tensor y = layer.forward(x);
  auto split = [&](std::vector<OpCost>& fused, std::vector<OpCost>& rest) {
    fused.clear();
    rest.clear();
    for (const auto& op : dev.ops) (std::string(op.name).starts_with("sdpa") ? fused : rest).push_back(op);
  };
  std::vector<OpCost> fused, rest;
  split(fused, rest);
  if (fused.size() != 1u || rest.size() != 2u) return false;
  const OpCost& gemm = rest[0].op_class == OpClass::matmul ? rest[0] : rest[1];
  bool ok = fused[0].flops == 5120 && fused[0].bytes_read == 3840 && fused[0].bytes_written == 1600 &&
            fused[0].op_class == OpClass::matmul && gemm.flops == 5'000'000.0 - 10'240;
  Tensor dy = Tensor::empty(dev, {5, 2}, DType::f32, MemoryCategory::activations);
  dev.ops.clear();
  (void)layer.backward(dy, true);
  split(fused, rest);
  if (fused.size() != 1u || rest.size() != 2u) return false;
  const OpCost& gemm_bwd = rest[0].op_class == OpClass::matmul ? rest[0] : rest[1];
  return ok && fused[0].flops == 12'800 && fused[0].bytes_read == 6720 && fused[0].bytes_written == 3840 &&
         gemm_bwd.flops == 10'000'000.0 - 20'480;
}

TEST(CostLayer, SdpaAttentionIsOneFusedKernel) { EXPECT_TRUE(sdpa_is_one_fused_kernel()); }

TEST(CostLayer, PlantedBugsInTheFusedKernelAreCaught) {
  {
    ScopedFault f(Fault::sdpa_causal_blocks_charged);
    EXPECT_FALSE(sdpa_is_one_fused_kernel());
  }
  ScopedFault f(Fault::sdpa_backward_no_recompute);
  EXPECT_FALSE(sdpa_is_one_fused_kernel());
}

TEST(CostLayer, PlantedBugIgnoringTheCountedTrafficIsCaught) {
  ScopedFault f(Fault::memory_bound_traffic_ignored);
  EXPECT_FALSE(charges_counted_traffic());
}

// A transformer block (a GEMM layer) whose counted memory-bound traffic has an autocast-f32
// share: of 1,000 forward and 1,800 backward elements per sample, 600 and 1,000 sit in
// tensors autocast keeps in f32 (LayerNorm, softmax, the residual stream's adds and sums).
LayerDescription counted_transformer_block() {
  LayerDescription d{"h.0", "GPT2Block", {{"attn.c_attn.weight", {2, 6}}}, 2000.0, 50, 2};
  d.memory_bound_forward_elements_per_sample = 1000;
  d.memory_bound_backward_elements_per_sample = 1800;
  d.memory_bound_forward_f32_elements_per_sample = 600;
  d.memory_bound_backward_f32_elements_per_sample = 1000;
  return d;
}

// The bytes a block's memory-bound kernel moves forward and backward at `precision`.
std::pair<Bytes, Bytes> memory_bound_bytes(Precision precision) {
  RecordingDevice dev;
  CostLayer layer(counted_transformer_block(), 2, dev, precision_parameter_dtype(precision), precision);
  Tensor x = Tensor::empty(dev, {5, 2}, DType::f32, MemoryCategory::inputs);
  dev.ops.clear();
  Tensor y = layer.forward(x);
  const OpCost fwd = dev.ops.back();  // after the GEMM kernel
  Tensor dy = Tensor::empty(dev, {5, 2}, DType::f32, MemoryCategory::activations);
  dev.ops.clear();
  (void)layer.backward(dy, true);
  const OpCost bwd = dev.ops.front();  // before the GEMM kernel
  return {fwd.bytes_read + fwd.bytes_written, bwd.bytes_read + bwd.bytes_written};
}

// Invariant: under bf16 or f16 autocast the autocast-f32 share moves 4 bytes an element and
// the rest 2 (batch 5: forward (400 x 2 + 600 x 4) x 5, backward (800 x 2 + 1000 x 4) x 5);
// f32 and tf32 move every element in 4 bytes, pure bf16 in 2 (its norms run in bf16).
bool charges_autocast_f32_share() {
  const auto f16 = memory_bound_bytes(Precision::f16_amp), bf16_amp = memory_bound_bytes(Precision::bf16_amp);
  const auto f32 = memory_bound_bytes(Precision::f32), tf32 = memory_bound_bytes(Precision::tf32);
  const auto bf16 = memory_bound_bytes(Precision::bf16);
  const std::pair<Bytes, Bytes> amp{(400 * 2 + 600 * 4) * 5, (800 * 2 + 1000 * 4) * 5};
  return f16 == amp && bf16_amp == amp && f32 == std::pair<Bytes, Bytes>{1000 * 4 * 5, 1800 * 4 * 5} && tf32 == f32 &&
         bf16 == std::pair<Bytes, Bytes>{1000 * 2 * 5, 1800 * 2 * 5};
}

TEST(CostLayer, AutocastKeepsItsF32ShareOfTheTrafficInF32) { EXPECT_TRUE(charges_autocast_f32_share()); }

TEST(CostLayer, PlantedBugAutocastF32ShareAtTheLowSizeIsCaught) {
  ScopedFault f(Fault::autocast_f32_traffic_low);
  EXPECT_FALSE(charges_autocast_f32_share());
}

// The cast kernels a block's forward and backward charge at `precision` (bytes moved; 0: none).
std::pair<Bytes, Bytes> autocast_cast_bytes(Precision precision) {
  RecordingDevice dev;
  LayerDescription d = counted_transformer_block();
  d.autocast_forward_cast_elements_per_sample = 300;
  d.autocast_backward_cast_elements_per_sample = 200;
  CostLayer layer(d, 2, dev, precision_parameter_dtype(precision), precision);
  Tensor x = Tensor::empty(dev, {5, 2}, DType::f32, MemoryCategory::inputs);
  Tensor dy = Tensor::empty(dev, {5, 2}, DType::f32, MemoryCategory::activations);
  dev.ops.clear();
  Tensor y = layer.forward(x);
  (void)layer.backward(dy, true);
  std::pair<Bytes, Bytes> moved{0, 0};
  for (const OpCost& op : dev.ops) {
    const std::string name = op.name;
    if (name == "autocast_cast_fwd") moved.first += op.bytes_read + op.bytes_written;
    if (name == "autocast_cast_bwd") moved.second += op.bytes_read + op.bytes_written;
  }
  return moved;
}

// Invariant: under bf16 or f16 autocast a GEMM layer's casts move 6 bytes (4 + 2) per element
// cast: forward its 300 counted activation elements x batch 5 plus its 12 weights (cast once
// per forward), backward its 200 x 5 plus the 12 weights' gradients cast back; f32, tf32 and
// pure bf16 have no autocast and charge no cast kernel.
bool charges_autocast_casts() {
  const std::pair<Bytes, Bytes> amp{(300 * 5 + 12) * 6, (200 * 5 + 12) * 6};
  const std::pair<Bytes, Bytes> none{0, 0};
  return autocast_cast_bytes(Precision::f16_amp) == amp && autocast_cast_bytes(Precision::bf16_amp) == amp &&
         autocast_cast_bytes(Precision::f32) == none && autocast_cast_bytes(Precision::tf32) == none &&
         autocast_cast_bytes(Precision::bf16) == none;
}

TEST(CostLayer, AutocastCastsMoveSixBytesAnElement) { EXPECT_TRUE(charges_autocast_casts()); }

TEST(CostLayer, PlantedBugFreeAutocastCastsIsCaught) {
  ScopedFault f(Fault::autocast_casts_free);
  EXPECT_FALSE(charges_autocast_casts());
}

}  // namespace
}  // namespace dpt
