// PyTorch as external oracle : the same MLP, weights and batch through
// torch 1.13 and through dptwin's host engine. Loss and every gradient, then the
// parameters after 3 SGD (momentum, weight decay) and 3 AdamW steps, must agree
// within 1e-10 (f64) or 1e-5 (f32) relative error per tensor; checkpoints cross
// between the two in both directions, and a strict load of a "module."-prefixed
// state dict fails with PyTorch's own text.
//
// The jobs go to PyTorch in one process together with ddp_oracle_test.cpp's
// (oracle_session), so the suite takes seconds. It skips only where
// /usr/bin/python3 cannot import torch.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/io/checkpoint.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/nn/init.hpp"
#include "engine/nn/loss.hpp"
#include "engine/optim/optim.hpp"
#include "verify/oracle/oracle_support.hpp"

using namespace dpt;
using namespace dpt::oracle;

namespace {

struct TrainCase {
  std::string name;
  MlpSpec spec;
  DType dtype;
  LossKind loss;
  Reduction reduction;
  std::int64_t batch;
  std::uint64_t seed;
};

const SgdOptions kSgd{.lr = 0.1, .momentum = 0.9, .dampening = 0.0, .weight_decay = 0.01, .nesterov = false};
const AdamWOptions kAdamW{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
constexpr int kSteps = 3;

std::vector<TrainCase> train_cases() {
  std::vector<TrainCase> cases;
  std::uint64_t seed = 100;
  for (DType dtype : {DType::f32, DType::f64})
    for (LossKind loss : {LossKind::mse, LossKind::cross_entropy})
      for (bool layernorm : {false, true})
        for (Activation act : {Activation::relu, Activation::gelu}) {
          MlpSpec spec{.widths = {6, 9, 7, 4}, .activation = act, .layernorm = layernorm};
          cases.push_back({fmt::format("{}_{}_{}_{}", dtype_name(dtype), loss == LossKind::mse ? "mse" : "ce",
                                       layernorm ? "ln" : "noln", act == Activation::relu ? "relu" : "gelu"),
                           spec, dtype, loss, Reduction::mean, 10, seed++});
        }
  // Sum reduction and other depths and widths.
  cases.push_back({"f64_mse_sum_deep", {.widths = {3, 5, 5, 5, 2}, .activation = Activation::gelu, .layernorm = true},
                   DType::f64, LossKind::mse, Reduction::sum, 7, seed++});
  cases.push_back({"f32_ce_sum_wide", {.widths = {12, 16, 5}, .activation = Activation::relu, .layernorm = false},
                   DType::f32, LossKind::cross_entropy, Reduction::sum, 13, seed++});
  cases.push_back({"f64_ce_single_layer", {.widths = {4, 3}, .activation = Activation::relu, .layernorm = false},
                   DType::f64, LossKind::cross_entropy, Reduction::mean, 5, seed++});
  return cases;
}

// The case's model: make_mlp from its seed, LayerNorm parameters moved away from
// 1 and 0 so their gradients and updates are exercised with general values.
Sequential case_model(const TrainCase& c, Device& dev) {
  Sequential m = make_mlp(c.spec, dev, c.dtype, c.seed);
  Generator gen(c.seed ^ 0x5eed);
  for (size_t i = 0; i < m.size(); ++i) {
    if (m.layer(i).type_name() != "LayerNorm") continue;
    for (Parameter* p : m.layer(i).parameters()) init_uniform(p->value, 0.5, gen);
    std::vector<double> w = tensor_to_f64_vector(m.layer(i).parameters()[0]->value);
    for (double& v : w) v += 1.0;  // weight in [0.5, 1.5)
    tensor_fill_from_f64(m.layer(i).parameters()[0]->value, w);
  }
  return m;
}

std::pair<Tensor, Tensor> case_batch(const TrainCase& c, Device& dev) {
  Generator gen(c.seed * 7919 + 1);
  Tensor x = Tensor::empty(dev, {c.batch, c.spec.widths.front()}, c.dtype, MemoryCategory::inputs);
  init_uniform(x, 1.0, gen);
  const std::int64_t out = c.spec.widths.back();
  Tensor y;
  if (c.loss == LossKind::mse) {
    y = Tensor::empty(dev, {c.batch, out}, c.dtype, MemoryCategory::inputs);
    init_uniform(y, 1.0, gen);
  } else {
    y = Tensor::empty(dev, {c.batch}, DType::i64, MemoryCategory::inputs);
    std::vector<double> labels;
    for (std::int64_t i = 0; i < c.batch; ++i) labels.push_back(static_cast<double>(gen.randint(out)));
    tensor_fill_from_f64(y, labels);
  }
  return {x, y};
}

// One step's loss with dptwin: zero_grad, forward, loss, backward.
double forward_backward(Sequential& m, const TrainCase& c, const Tensor& x, const Tensor& y) {
  m.zero_grad();
  Tensor out = m.forward(x);
  LossResult r = loss_forward_backward(c.loss, c.reduction, out, y);
  m.backward(r.grad);
  m.clear_saved();
  return r.value;
}

const Session& state() { return oracle_session(); }

// Checkpoint jobs share these models.
const MlpSpec kCkptSpec{.widths = {5, 8, 8, 3}, .activation = Activation::gelu, .layernorm = true};

Tensor ckpt_input(Device& dev) {
  Generator gen(4242);
  Tensor x = Tensor::empty(dev, {6, 5}, DType::f64, MemoryCategory::inputs);
  init_uniform(x, 2.0, gen);
  return x;
}

Tensor ckpt_input_f32(Device& dev) {
  Generator gen(4243);
  Tensor x = Tensor::empty(dev, {6, 5}, DType::f32, MemoryCategory::inputs);
  init_uniform(x, 2.0, gen);
  return x;
}

// The jobs this file sends to the oracle.
void add_jobs(JobSet& jobs, const std::string& dir) {
  HostDevice dev(0, DeviceKind::host_worker);
  for (const auto& c : train_cases()) {
    Sequential m = case_model(c, dev);
    auto [x, y] = case_batch(c, dev);
    for (auto& [k, t] : model_state_dict(m, c.name + "/param/")) jobs.add(k, t);
    jobs.add(c.name + "/x", x);
    jobs.add(c.name + "/y", y);
    jobs.jobs.push_back({{"kind", "train"},
                         {"name", c.name},
                         {"model", model_json(c.spec, c.dtype)},
                         {"loss", loss_name(c.loss)},
                         {"reduction", reduction_name(c.reduction)},
                         {"steps", kSteps},
                         {"sgd", sgd_json(kSgd)},
                         {"adamw", adamw_json(kAdamW)}});
  }
  // dptwin's checkpoint, plain and with DataParallel's "module." prefix, loaded by torch.
  Sequential m = make_mlp(kCkptSpec, dev, DType::f64, 77);
  save_checkpoint(m, dir + "/dptwin.safetensors");
  write_safetensors_atomic(dir + "/dptwin_module.safetensors", model_state_dict(m, "module."));
  Tensor x = ckpt_input(dev);
  for (const char* name : {"load_plain", "load_prefixed_strict", "load_prefixed_stripped", "save_torch"})
    jobs.add(std::string(name) + "/x", x);
  auto model = model_json(kCkptSpec, DType::f64);
  jobs.jobs.push_back({{"kind", "load_checkpoint"}, {"name", "load_plain"}, {"model", model},
                       {"path", dir + "/dptwin.safetensors"}});
  jobs.jobs.push_back({{"kind", "load_checkpoint"}, {"name", "load_prefixed_strict"}, {"model", model},
                       {"path", dir + "/dptwin_module.safetensors"}});
  jobs.jobs.push_back({{"kind", "load_checkpoint"}, {"name", "load_prefixed_stripped"}, {"model", model},
                       {"path", dir + "/dptwin_module.safetensors"}, {"strip_prefix", "module."}});
  // A checkpoint torch writes with its own initialisation, for dptwin to load.
  jobs.jobs.push_back({{"kind", "save_checkpoint"}, {"name", "save_torch"}, {"model", model}, {"seed", 1234},
                       {"path", dir + "/torch.safetensors"}});
  // Half-precision state dicts of an f32 model (F16, BF16), for dptwin's f32 model to load.
  const Tensor x32 = ckpt_input_f32(dev);
  for (const char* st : {"F16", "BF16"}) {
    const std::string name = std::string("save_torch_") + st;
    jobs.add(name + "/x", x32);
    jobs.jobs.push_back({{"kind", "save_checkpoint"}, {"name", name}, {"model", model_json(kCkptSpec, DType::f32)},
                         {"seed", 4321}, {"save_dtype", st}, {"path", dir + "/" + name + ".safetensors"}});
  }
}
[[maybe_unused]] const bool registered = register_job_provider(add_jobs);

}  // namespace

class TorchOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    if (state().skip) GTEST_SKIP() << *state().skip;
    if (state().error) FAIL() << *state().error;
  }

  static const SafetensorsTensor& result(const std::string& name) { return state().results.file.at(name); }
};

class TorchOracleTrain : public TorchOracle, public ::testing::WithParamInterface<TrainCase> {};

TEST_P(TorchOracleTrain, LossAndGradients) {
  const TrainCase& c = GetParam();
  HostDevice dev(0, DeviceKind::host_worker);
  Sequential m = case_model(c, dev);
  auto [x, y] = case_batch(c, dev);
  double loss = forward_backward(m, c, x, y);
  const double tol = tolerance_for(c.dtype);
  // Invariant: dptwin's loss and each gradient equal PyTorch's within the dtype's tolerance.
  EXPECT_LE(max_rel_error({loss}, values_of(result(c.name + "/loss"))), tol)
      << "loss " << loss << " vs torch " << values_of(result(c.name + "/loss"))[0];
  for (const auto& np : m.named_parameters()) {
    double err = max_rel_error(tensor_to_f64_vector(np.param->grad), values_of(result(c.name + "/grad/" + np.name)));
    EXPECT_LE(err, tol) << "gradient of " << np.name;
  }
}

TEST_P(TorchOracleTrain, ParametersAfterSgdAndAdamW) {
  const TrainCase& c = GetParam();
  HostDevice dev(0, DeviceKind::host_worker);
  auto [x, y] = case_batch(c, dev);
  const double tol = tolerance_for(c.dtype);
  for (const std::string tag : {"sgd", "adamw"}) {
    Sequential m = case_model(c, dev);
    auto opt = tag == "sgd" ? make_sgd(m.named_parameters(), kSgd) : make_adamw(m.named_parameters(), kAdamW);
    std::vector<double> losses;
    for (int s = 0; s < kSteps; ++s) {
      losses.push_back(forward_backward(m, c, x, y));
      opt->step();
    }
    // Invariant: the loss of every step and every parameter after the last step equal PyTorch's.
    EXPECT_LE(max_rel_error(losses, values_of(result(c.name + "/" + tag + "_losses"))), tol) << tag << " losses";
    for (const auto& np : m.named_parameters()) {
      double err = max_rel_error(tensor_to_f64_vector(np.param->value),
                                 values_of(result(c.name + "/" + tag + "/" + np.name)));
      EXPECT_LE(err, tol) << np.name << " after " << kSteps << " " << tag << " steps";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, TorchOracleTrain, ::testing::ValuesIn(train_cases()),
                         [](const auto& case_info) { return case_info.param.name; });

TEST_F(TorchOracle, DptwinCheckpointLoadsStrictlyInTorch) {
  HostDevice dev(0, DeviceKind::host_worker);
  Sequential m = make_mlp(kCkptSpec, dev, DType::f64, 77);
  Tensor out = m.forward(ckpt_input(dev));
  ASSERT_FALSE(state().results.errors.contains("load_plain")) << state().results.errors["load_plain"];
  // Invariant: torch's model, strictly loaded from dptwin's file, computes dptwin's output.
  EXPECT_LE(max_rel_error(tensor_to_f64_vector(out), values_of(result("load_plain/out"))), 1e-12);
  ASSERT_FALSE(state().results.errors.contains("load_prefixed_stripped"));
  EXPECT_LE(max_rel_error(tensor_to_f64_vector(out), values_of(result("load_prefixed_stripped/out"))), 1e-12);
}

TEST_F(TorchOracle, StrictLoadErrorTextMatchesTorch) {
  // Both refuse the "module."-prefixed state dict; dptwin's message is torch's,
  // followed by the line naming the file.
  ASSERT_TRUE(state().results.errors.contains("load_prefixed_strict")) << "torch loaded a prefixed state dict";
  const std::string torch_msg = state().results.errors["load_prefixed_strict"];
  HostDevice dev(0, DeviceKind::host_worker);
  Sequential m = make_mlp(kCkptSpec, dev, DType::f64, 5);
  const std::string path = state().dir + "/dptwin_module.safetensors";
  try {
    load_state_dict(m, read_safetensors(path));
    FAIL() << "dptwin loaded a prefixed state dict strictly";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), torch_msg + "\n\t(checkpoint file: " + path + ")");
  }
}

TEST_F(TorchOracle, TorchCheckpointLoadsInDptwin) {
  HostDevice dev(0, DeviceKind::host_worker);
  Sequential m = make_mlp(kCkptSpec, dev, DType::f64, 999);  // different weights until loaded
  auto file = read_safetensors(state().dir + "/torch.safetensors");
  EXPECT_EQ(file.metadata.at("format"), "pt");
  load_state_dict(m, file);
  Tensor out = m.forward(ckpt_input(dev));
  // Invariant: dptwin, loaded from torch's file, computes torch's output.
  EXPECT_LE(max_rel_error(tensor_to_f64_vector(out), values_of(result("save_torch/out"))), 1e-12);
}

// torch's load_state_dict casts a half-precision state dict into a float model; dptwin's
// load widens F16 and BF16 exactly. Invariant: dptwin's f32 model loaded from torch's
// model.half() / bfloat16 state dict computes what torch's f32 model loaded from it does.
// (Caught: bits read as the other half format, or F16 exponents off by one.)
TEST_F(TorchOracle, HalfPrecisionStateDictLoadsIntoAFloatModel) {
  for (const std::string st : {"F16", "BF16"}) {
    SCOPED_TRACE(st);
    HostDevice dev(0, DeviceKind::host_worker);
    Sequential m = make_mlp(kCkptSpec, dev, DType::f32, 999);
    auto file = read_safetensors(state().dir + "/save_torch_" + st + ".safetensors");
    ASSERT_FALSE(file.tensors.empty());
    EXPECT_EQ(dtype_safetensors_name(file.tensors.front().dtype), st);
    load_state_dict(m, file);
    Tensor out = m.forward(ckpt_input_f32(dev));
    EXPECT_LE(max_rel_error(tensor_to_f64_vector(out), values_of(result("save_torch_" + st + "/out"))), 1e-6);
    // Every loaded weight is exactly torch's after its cast (widening is exact).
    for (const auto& np : m.named_parameters())
      EXPECT_EQ(tensor_to_f64_vector(np.param->value), values_of(result("save_torch_" + st + "/param/" + np.name)))
          << np.name;
  }
}

// The comparison itself has teeth: a planted off-by-one-step error (AdamW run for
// 2 steps instead of 3) and a gradient scaled by (1 + 1e-4) both exceed the f32 tolerance.
TEST_F(TorchOracle, ComparisonCatchesPlantedErrors) {
  const TrainCase c = train_cases().front();  // f32
  HostDevice dev(0, DeviceKind::host_worker);
  auto [x, y] = case_batch(c, dev);
  Sequential m = case_model(c, dev);
  auto opt = make_adamw(m.named_parameters(), kAdamW);
  for (int s = 0; s < kSteps - 1; ++s) {
    forward_backward(m, c, x, y);
    opt->step();
  }
  double worst = 0;
  for (const auto& np : m.named_parameters())
    worst = std::max(worst, max_rel_error(tensor_to_f64_vector(np.param->value),
                                          values_of(result(c.name + "/adamw/" + np.name))));
  EXPECT_GT(worst, tolerance_for(c.dtype));
  Sequential g = case_model(c, dev);
  forward_backward(g, c, x, y);
  auto grad = tensor_to_f64_vector(g.named_parameters()[0].param->grad);
  for (double& v : grad) v *= 1 + 1e-4;
  EXPECT_GT(max_rel_error(grad, values_of(result(c.name + "/grad/0.weight"))), tolerance_for(c.dtype));
}
