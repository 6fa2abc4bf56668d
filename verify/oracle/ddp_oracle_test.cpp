// PyTorch as oracle for the strategies :
//  * torch.chunk's sizes for every B in [0, 300] and N in [1, 16] against split.hpp;
//  * torch DistributedDataParallel (gloo, two processes on the CPU) against dptwin's
//    DDP on the host backend, from the same weights (rank 1 starts from different
//    ones, so DDP's construction broadcast matters) and the same per-rank batches:
//    every rank's gradients after each of 3 steps, the printed loss, and every rank's
//    parameters after 3 SGD steps (momentum, weight decay), for even and uneven
//    splits (f64 relative error <= 1e-10, f32 <= 1e-5), and with fp16_compress_hook
//    registered on both sides (relative error <= 2^-7, from f16 rounding);
//  * torch loads dptwin's DataParallel checkpoint after stripping "module.", and
//    refuses it strictly, with the same text dptwin gives.
// The jobs go to PyTorch in the same run as oracle_test.cpp's (oracle_session);
// skips only where /usr/bin/python3 cannot import torch.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/core/fault_injection.hpp"
#include "engine/io/checkpoint.hpp"
#include "engine/parallel/data_parallel.hpp"
#include "engine/parallel/ddp/ddp.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/nn/init.hpp"
#include "engine/parallel/split.hpp"
#include "verify/oracle/oracle_support.hpp"

using namespace dpt;
using namespace dpt::oracle;

namespace {

constexpr int kWorld = 2;
constexpr int kSteps = 3;
const SgdOptions kSgd{.lr = 0.1, .momentum = 0.9, .dampening = 0.0, .weight_decay = 0.01, .nesterov = false};

struct DdpCase {
  std::string name;
  MlpSpec spec;
  DType dtype;
  LossKind loss;
  std::int64_t global_batch;  // split over kWorld ranks with torch.chunk
  std::uint64_t seed;
  CommHook comm_hook = CommHook::none;
};

std::vector<DdpCase> ddp_cases() {
  const MlpSpec plain{.widths = {5, 7, 3}, .activation = Activation::relu, .layernorm = false};
  const MlpSpec normed{.widths = {4, 6, 6, 3}, .activation = Activation::gelu, .layernorm = true};
  return {
      {"f64_mse_even", plain, DType::f64, LossKind::mse, 8, 11},
      {"f64_mse_uneven", normed, DType::f64, LossKind::mse, 5, 12},  // 3 + 2
      {"f64_ce_even", normed, DType::f64, LossKind::cross_entropy, 6, 13},
      {"f64_ce_uneven", plain, DType::f64, LossKind::cross_entropy, 7, 14},  // 4 + 3
      {"f32_mse_uneven", normed, DType::f32, LossKind::mse, 9, 15},          // 5 + 4
      {"f32_ce_even", normed, DType::f32, LossKind::cross_entropy, 10, 16},
      // fp16_compress_hook: cast to f16, divide by the world size, all-reduce, cast back.
      {"f32_mse_fp16_hook", normed, DType::f32, LossKind::mse, 8, 17, CommHook::fp16_compress},
      {"f64_ce_fp16_hook", plain, DType::f64, LossKind::cross_entropy, 7, 18, CommHook::fp16_compress},
  };
}

// Rank 0's initial model; other ranks build different weights, which DDP's
// construction broadcast must replace.
Sequential build_rank_model(const DdpCase& c, Device& dev) {
  return make_mlp(c.spec, dev, c.dtype, dev.index() == 0 ? c.seed : c.seed + 1000);
}

// Step s's global batch, in host memory.
std::pair<Tensor, Tensor> step_batch(const DdpCase& c, Device& host, int step) {
  Generator gen(c.seed * 31 + static_cast<std::uint64_t>(step));
  Tensor x = Tensor::empty(host, {c.global_batch, c.spec.widths.front()}, c.dtype, MemoryCategory::inputs);
  init_uniform(x, 1.0, gen);
  const std::int64_t out = c.spec.widths.back();
  Tensor y;
  if (c.loss == LossKind::mse) {
    y = Tensor::empty(host, {c.global_batch, out}, c.dtype, MemoryCategory::inputs);
    init_uniform(y, 1.0, gen);
  } else {
    y = Tensor::empty(host, {c.global_batch}, DType::i64, MemoryCategory::inputs);
    std::vector<double> labels;
    for (std::int64_t i = 0; i < c.global_batch; ++i) labels.push_back(static_cast<double>(gen.randint(out)));
    tensor_fill_from_f64(y, labels);
  }
  return {x, y};
}

std::unique_ptr<DistributedDataParallel> make_ddp(const DdpCase& c, HostBackend& backend) {
  StrategyOptions o;
  o.kind = StrategyKind::ddp;
  o.device_ids = {0, 1};
  o.loss = c.loss;
  o.comm_hook = {c.comm_hook, 1};
  return std::make_unique<DistributedDataParallel>(
      backend, o, [&](Device& dev) { return build_rank_model(c, dev); },
      [](std::vector<NamedParameter> ps) { return make_sgd(std::move(ps), kSgd); });
}

const MlpSpec kDpSpec{.widths = {4, 8, 2}, .activation = Activation::gelu, .layernorm = true};

const Session& state() { return oracle_session(); }

Tensor dp_probe_input(Device& host) {
  Generator gen(99);
  Tensor x = Tensor::empty(host, {5, 4}, DType::f64, MemoryCategory::inputs);
  init_uniform(x, 1.0, gen);
  return x;
}

// The DataParallel model whose checkpoint torch loads: one training step on two
// devices (an uneven 3 + 2 split), so the saved weights are not the initial ones.
std::unique_ptr<DataParallel> trained_dp(HostBackend& backend) {
  StrategyOptions o;
  o.kind = StrategyKind::data_parallel;
  o.device_ids = {0, 1};
  auto dp = std::make_unique<DataParallel>(
      backend, o, [](Device& dev) { return make_mlp(kDpSpec, dev, DType::f64, 21); },
      [](std::vector<NamedParameter> ps) { return make_sgd(std::move(ps), kSgd); });
  Generator gen(7);
  Tensor x = Tensor::empty(backend.host_memory(), {5, 4}, DType::f64, MemoryCategory::inputs);
  Tensor y = Tensor::empty(backend.host_memory(), {5, 2}, DType::f64, MemoryCategory::inputs);
  init_uniform(x, 1.0, gen);
  init_uniform(y, 1.0, gen);
  dp->train_step(x, y);
  return dp;
}

// The jobs this file sends to the oracle.
void add_jobs(JobSet& jobs, const std::string& dir) {
  HostBackend backend(kWorld);
  jobs.jobs.push_back({{"kind", "chunk_table"}, {"name", "chunk"}, {"max_batch", 300}, {"max_chunks", 16}});

  for (const auto& c : ddp_cases()) {
    Sequential rank0 = build_rank_model(c, backend.device(0));
    Sequential other = build_rank_model(c, backend.device(1));
    for (auto& [k, t] : model_state_dict(rank0, c.name + "/param/")) jobs.add(k, t);
    for (auto& [k, t] : model_state_dict(other, c.name + "/param_other/")) jobs.add(k, t);
    // Each rank's local batch: torch.chunk of the global one (checked against
    // torch by the chunk table), as dptwin's DDP splits it.
    const auto sizes = chunk_sizes(c.global_batch, kWorld);
    const auto offsets = chunk_offsets(sizes);
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = step_batch(c, backend.host_memory(), step);
      for (int r = 0; r < kWorld; ++r) {
        auto at = offsets[static_cast<size_t>(r)], n = sizes[static_cast<size_t>(r)];
        jobs.add(fmt::format("{}/x/step{}/rank{}", c.name, step, r), x.slice_rows(at, n));
        jobs.add(fmt::format("{}/y/step{}/rank{}", c.name, step, r), y.slice_rows(at, n));
      }
    }
    jobs.jobs.push_back({{"kind", "ddp"},
                         {"name", c.name},
                         {"model", model_json(c.spec, c.dtype)},
                         {"loss", loss_name(c.loss)},
                         {"reduction", "mean"},
                         {"steps", kSteps},
                         {"sgd", sgd_json(kSgd)},
                         {"world_size", kWorld},
                         {"comm_hook", comm_hook_name({c.comm_hook, 1})}});
  }

  auto dp = trained_dp(backend);
  const std::string path = dir + "/dp.safetensors";
  write_safetensors_atomic(path, dp->state_dict(), &backend);
  Tensor probe = dp_probe_input(backend.host_memory());
  jobs.add("dp_stripped/x", probe);
  jobs.add("dp_strict/x", probe);
  jobs.jobs.push_back({{"kind", "load_checkpoint"}, {"name", "dp_stripped"}, {"model", model_json(kDpSpec, DType::f64)},
                       {"path", path}, {"strip_prefix", "module."}});
  jobs.jobs.push_back({{"kind", "load_checkpoint"}, {"name", "dp_strict"}, {"model", model_json(kDpSpec, DType::f64)},
                       {"path", path}});
}
[[maybe_unused]] const bool registered = register_job_provider(add_jobs);

}  // namespace

class TorchStrategyOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    if (state().skip) GTEST_SKIP() << *state().skip;
    if (state().error) FAIL() << *state().error;
  }

  static const SafetensorsTensor& result(const std::string& name) { return state().results.file.at(name); }
};

TEST_F(TorchStrategyOracle, ChunkSizesEqualTorchChunk) {
  const auto& table = state().results.tables.at("chunk");
  int compared = 0;
  for (std::int64_t b = 0; b <= 300; ++b)
    for (int n = 1; n <= 16; ++n, ++compared) {
      // Invariant: dptwin's scatter sizes are torch.chunk's, for every B and N.
      EXPECT_EQ(chunk_sizes(b, n), table.at(fmt::format("{},{}", b, n)).get<std::vector<std::int64_t>>())
          << "B=" << b << " N=" << n;
    }
  EXPECT_EQ(compared, 301 * 16);
}

class TorchDdpOracle : public TorchStrategyOracle, public ::testing::WithParamInterface<DdpCase> {};

TEST_P(TorchDdpOracle, GradientsLossAndParametersMatchTorchDdp) {
  const DdpCase& c = GetParam();
  HostBackend backend(kWorld);
  auto ddp = make_ddp(c, backend);
  // With fp16_compress both sides round each gradient to f16 four times (cast, divide,
  // sum, cast back) from nearly equal f32/f64 values, so each is within 4u of the
  // exact mean (u = 2^-11) relative to sum |g_i| / N; 16u (2^-7) allows both, and
  // cancellation between the ranks' gradients, relative to the tensor's largest value.
  const double tol = c.comm_hook == CommHook::none ? tolerance_for(c.dtype) : std::ldexp(1.0, -7);
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = step_batch(c, backend.host_memory(), step);
    StepResult r = ddp->train_step(x, y);
    ASSERT_EQ(r.samples_per_device, chunk_sizes(c.global_batch, kWorld));
    // Invariant: the printed loss is the mean of torch's per-rank losses.
    double torch_loss = 0;
    for (int rank = 0; rank < kWorld; ++rank)
      torch_loss += values_of(result(fmt::format("{}/rank{}/step{}/loss", c.name, rank, step)))[0] / kWorld;
    EXPECT_LE(max_rel_error({r.loss}, {torch_loss}), tol) << "step " << step << " loss";
    // Invariant: each rank's gradient (after DDP's all-reduce) is torch DDP's on that rank.
    for (int rank = 0; rank < kWorld; ++rank)
      for (const auto& np : ddp->rank_module(rank).named_parameters()) {
        auto want = values_of(result(fmt::format("{}/rank{}/step{}/grad/{}", c.name, rank, step, np.name)));
        EXPECT_LE(max_rel_error(tensor_to_f64_vector(np.param->grad), want), tol)
            << "rank " << rank << " step " << step << " gradient of " << np.name;
      }
  }
  // Invariant: each rank's parameters after the steps are torch DDP's on that rank.
  for (int rank = 0; rank < kWorld; ++rank)
    for (const auto& np : ddp->rank_module(rank).named_parameters()) {
      auto want = values_of(result(fmt::format("{}/rank{}/param/{}", c.name, rank, np.name)));
      EXPECT_LE(max_rel_error(tensor_to_f64_vector(np.param->value), want), tol)
          << "rank " << rank << " parameter " << np.name << " after " << kSteps << " steps";
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, TorchDdpOracle, ::testing::ValuesIn(ddp_cases()),
                         [](const auto& case_info) { return case_info.param.name; });

// The comparison has teeth: DDP without its construction broadcast (a planted
// fault: rank 1 keeps its own weights) disagrees with torch on rank 1.
TEST_F(TorchStrategyOracle, ComparisonCatchesSkippedBroadcast) {
  const DdpCase c = ddp_cases().front();
  HostBackend backend(kWorld);
  StrategyOptions o;
  o.kind = StrategyKind::ddp;
  o.device_ids = {0, 1};
  o.loss = c.loss;
  const ScopedFault planted(Fault::ddp_skip_initial_broadcast);
  DistributedDataParallel ddp(
      backend, o, [&](Device& dev) { return build_rank_model(c, dev); },
      [](std::vector<NamedParameter> ps) { return make_sgd(std::move(ps), kSgd); });
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = step_batch(c, backend.host_memory(), step);
    ddp.train_step(x, y);
  }
  double worst = 0;
  for (const auto& np : ddp.rank_module(1).named_parameters())
    worst = std::max(worst, max_rel_error(tensor_to_f64_vector(np.param->value),
                                          values_of(result(fmt::format("{}/rank1/param/{}", c.name, np.name)))));
  EXPECT_GT(worst, tolerance_for(c.dtype));
}

// The hook comparison has teeth: a hook that does not divide by the world size (a
// planted fault) gives twice torch's gradient, outside the hook cases' tolerance.
TEST_F(TorchStrategyOracle, HookComparisonCatchesMissingDivision) {
  const std::vector<DdpCase> cases = ddp_cases();
  const DdpCase c = *std::find_if(cases.begin(), cases.end(), [](const DdpCase& k) { return k.comm_hook != CommHook::none; });
  HostBackend backend(kWorld);
  const ScopedFault planted(Fault::comm_hook_skip_divide);
  auto ddp = make_ddp(c, backend);
  auto [x, y] = step_batch(c, backend.host_memory(), 0);
  ddp->train_step(x, y);
  double worst = 0;
  for (const auto& np : ddp->rank_module(0).named_parameters())
    worst = std::max(worst, max_rel_error(tensor_to_f64_vector(np.param->grad),
                                          values_of(result(fmt::format("{}/rank0/step0/grad/{}", c.name, np.name)))));
  EXPECT_GT(worst, std::ldexp(1.0, -7));
}

TEST_F(TorchStrategyOracle, TorchLoadsDataParallelCheckpointAfterStrippingPrefix) {
  HostBackend backend(kWorld);
  auto dp = trained_dp(backend);
  auto sd = dp->state_dict();
  ASSERT_FALSE(sd.empty());
  for (const auto& [k, t] : sd) EXPECT_TRUE(k.starts_with("module.")) << k;
  ASSERT_FALSE(state().results.errors.contains("dp_stripped")) << state().results.errors["dp_stripped"];
  Tensor probe = copy_to(backend, dp_probe_input(backend.host_memory()), dp->module().device(), MemoryCategory::inputs);
  Tensor out = dp->module().forward(probe);
  // Invariant: torch, loaded from dptwin's DataParallel file, computes dptwin's output.
  EXPECT_LE(max_rel_error(tensor_to_f64_vector(out), values_of(result("dp_stripped/out"))), 1e-12);

  // Without stripping, torch refuses it, and dptwin's strict load gives torch's text.
  ASSERT_TRUE(state().results.errors.contains("dp_strict")) << "torch loaded the prefixed state dict strictly";
  const std::string path = state().dir + "/dp.safetensors";
  Sequential plain = make_mlp(kDpSpec, backend.device(0), DType::f64, 3);
  try {
    load_state_dict(plain, read_safetensors(path));
    FAIL() << "dptwin loaded the prefixed state dict strictly";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              state().results.errors["dp_strict"].get<std::string>() + "\n\t(checkpoint file: " + path + ")");
  }
}
