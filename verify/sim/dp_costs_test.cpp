// DataParallel's per-step kernels as PyTorch launches them, counted in the twin's
// trace: replicate's broadcast_coalesced flattens each coalesced group once on the
// primary (one torch.cat, none for a lone tensor) and hands the replicas views of the
// buffer they received; reduce_add_coalesced flattens once per device, sums onto the
// primary and accumulates one kernel per tensor (autograd's AccumulateGrad).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "engine/core/kernels.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/model_library.hpp"
#include "engine/optim/optim.hpp"
#include "engine/parallel/dp/replicate.hpp"
#include "engine/parallel/strategy.hpp"
#include "sim/twin/chrome_trace.hpp"
#include "verify/support/sim_test_support.hpp"

namespace dpt {
namespace {

using test::simulate;
using test::TestMachineOptions;

// The MLP 64-64-64-64-64: four Linear layers, each a 64x64 f32 weight (16,384 bytes)
// then a bias of 64 (256 bytes), in registration order w0 b0 w1 b1 ...
MlpSpec four_layers() {
  MlpSpec s;
  s.widths = {64, 64, 64, 64, 64};
  return s;
}
constexpr Bytes kWeightBytes = 64 * 64 * 4;
constexpr Bytes kBiasBytes = 64 * 4;

// Kernels and copies the trace holds from event `from` on: kernels named `name` on
// device `gpu`, device-local (not peer) ones.
int count_kernels(const ChromeTrace& t, size_t from, int gpu, const std::string& name) {
  int n = 0;
  for (size_t i = from; i < t.events().size(); ++i) {
    const TraceEvent& e = t.events()[i];
    if (e.pid == gpu + 1 && e.name == name && e.category != "copy") ++n;
  }
  return n;
}
// Peer copies into `gpu` from event `from` on, and their bytes.
std::pair<int, double> peer_copies_into(const ChromeTrace& t, size_t from, int gpu) {
  int n = 0;
  double bytes = 0;
  for (size_t i = from; i < t.events().size(); ++i) {
    const TraceEvent& e = t.events()[i];
    if (e.pid != gpu + 1 || e.category != "copy") continue;
    bool peer = false;
    for (const auto& [k, v] : e.args) peer |= k == "path" && v == "peer to peer";
    for (const auto& [k, v] : e.args)
      if (peer && k == "to" && v == fmt::format("sim:gpu{}", gpu)) {
        ++n;
        for (const auto& [nk, nv] : e.number_args)
          if (nk == "bytes") bytes += nv;
      }
  }
  return {n, bytes};
}

struct Counts {
  int cat0 = 0, copy0 = 0, cat1 = 0, copy1 = 0, peer = 0, axpy0 = 0;
  double peer_bytes = 0;
  bool views = false, values_equal = false, sum_right = false;
};

// The cat and copy kernels on GPUs 0 and 1 from event `at` on, into c.
void count_flattening(const ChromeTrace& t, size_t at, Counts& c) {
  c.cat0 = count_kernels(t, at, 0, "cat");
  c.copy0 = count_kernels(t, at, 0, "copy");
  c.cat1 = count_kernels(t, at, 1, "cat");
  c.copy1 = count_kernels(t, at, 1, "copy");
}

// In a forked child: the two-GPU test machine (1 us launch latency) with a trace;
// runs body(backend, trace) in an actor and returns its string.
std::string simulate_traced(bool numeric, const std::function<std::string(SimBackend&, const ChromeTrace&)>& body) {
  TestMachineOptions o;
  o.launch_latency = 1e-6;
  ChromeTrace trace;
  return simulate(o, {.numeric = numeric, .trace = &trace}, [&](SimBackend& b) { return body(b, trace); });
}

// Replicates the MLP from GPU 0 onto GPU 1 with coalesced buffers of `limit` bytes,
// then reduces gradients 1 (primary) and 2 (replica) back; counts each phase's kernels.
std::pair<Counts, Counts> run_replicate_and_reduce(Bytes limit) {
  const std::string out = simulate_traced(true, [&](SimBackend& b, const ChromeTrace& trace) {
    Sequential primary = make_mlp(four_layers(), b.device(0), DType::f32, 7);
    b.device(0).synchronize();
    Counts rep, red;
    size_t at = trace.events().size();
    std::vector<Sequential> replicas = replicate(b, primary, {0, 1}, limit);
    b.device(0).synchronize();
    b.device(1).synchronize();
    count_flattening(trace, at, rep);
    std::tie(rep.peer, rep.peer_bytes) = peer_copies_into(trace, at, 1);
    auto mine = primary.named_parameters();
    auto theirs = replicas[0].named_parameters();
    rep.values_equal = true;
    for (size_t i = 0; i < mine.size(); ++i)
      rep.values_equal &= std::memcmp(mine[i].param->value.data(), theirs[i].param->value.data(),
                                      static_cast<size_t>(mine[i].param->value.size_bytes())) == 0;
    // A weight and its bias in one buffer: the bias starts where the weight ends.
    rep.views = static_cast<const char*>(theirs[0].param->value.data()) + kWeightBytes ==
                static_cast<const char*>(theirs[1].param->value.data());

    for (auto& q : mine) kernel_fill(q.param->grad, 1.0);
    for (auto& q : theirs) kernel_fill(q.param->grad, 2.0);
    b.device(0).synchronize();
    b.device(1).synchronize();
    at = trace.events().size();
    reduce_add_coalesced(b, primary, {&replicas[0]}, limit);
    b.device(0).synchronize();
    count_flattening(trace, at, red);
    red.axpy0 = count_kernels(trace, at, 0, "axpy");
    std::tie(red.peer, red.peer_bytes) = peer_copies_into(trace, at, 0);
    red.sum_right = true;
    for (auto& q : mine) {
      const auto* g = static_cast<const float*>(q.param->grad.data());
      for (Elements k = 0; k < q.param->grad.numel(); ++k) red.sum_right &= g[k] == 3.0f;
    }
    auto line = [](const Counts& c) {
      return fmt::format("{} {} {} {} {} {} {} {} {} {} ", c.cat0, c.copy0, c.cat1, c.copy1, c.peer, c.axpy0,
                         c.peer_bytes, int(c.views), int(c.values_equal), int(c.sum_right));
    };
    return line(rep) + line(red);
  });
  std::istringstream in(out);
  std::pair<Counts, Counts> r;
  for (Counts* c : {&r.first, &r.second}) {
    int views, equal, sum;
    in >> c->cat0 >> c->copy0 >> c->cat1 >> c->copy1 >> c->peer >> c->axpy0 >> c->peer_bytes >> views >> equal >> sum;
    c->views = views;
    c->values_equal = equal;
    c->sum_right = sum;
  }
  return r;
}

// Invariant (replicate): with buffers of one weight plus one bias (16,640 bytes) the
// four layers make four groups of two tensors. The primary launches one cat per group
// and no other kernel; each group crosses to the replica once (4 copies, every
// parameter byte once); the replica launches nothing: its parameters are views of the
// buffers it received (a weight's bias starts where the weight ends) and hold the
// primary's values.
// Invariant (reduce): each device flattens each group with one cat; the replica's
// gradient bytes cross to the primary once; the primary sums with one kernel per group
// and accumulates one copy per tensor (8): 1 + 2 = 3 everywhere.
TEST(DataParallelCosts, ReplicateAndReduceFlattenOncePerGroupAndReplicasHoldViews) {
  const Bytes pair = kWeightBytes + kBiasBytes;
  const auto [rep, red] = run_replicate_and_reduce(pair);
  EXPECT_EQ(rep.cat0, 4);
  EXPECT_EQ(rep.copy0, 0);
  EXPECT_EQ(rep.cat1 + rep.copy1, 0);
  EXPECT_EQ(rep.peer, 4);
  EXPECT_EQ(rep.peer_bytes, 4.0 * static_cast<double>(pair));
  EXPECT_TRUE(rep.views);
  EXPECT_TRUE(rep.values_equal);
  EXPECT_EQ(red.cat1, 4);
  EXPECT_EQ(red.copy1, 0);
  EXPECT_EQ(red.peer, 4);
  EXPECT_EQ(red.peer_bytes, 4.0 * static_cast<double>(pair));
  EXPECT_EQ(red.cat0, 4);
  EXPECT_EQ(red.axpy0, 4);
  EXPECT_EQ(red.copy0, 8);
  EXPECT_TRUE(red.sum_right);
}

// Invariant: a group of one tensor is not flattened at all (flatten_dense_tensors returns
// a view): with 16,384-byte buffers every tensor is alone, so no cat runs anywhere,
// eight copies carry the parameters out and eight carry the gradients back; the
// primary's sum of a lone tensor needs a buffer of its own (one copy) before its sum
// (one axpy) and its accumulation (one copy): 16 copies.
TEST(DataParallelCosts, LoneTensorsAreSentWithoutFlattening) {
  const auto [rep, red] = run_replicate_and_reduce(kWeightBytes);
  EXPECT_EQ(rep.cat0 + rep.cat1 + red.cat0 + red.cat1, 0);
  EXPECT_EQ(rep.copy0 + rep.copy1 + red.copy1, 0);
  EXPECT_EQ(rep.peer, 8);
  EXPECT_EQ(red.peer, 8);
  EXPECT_EQ(red.axpy0, 8);
  EXPECT_EQ(red.copy0, 16);
  EXPECT_TRUE(rep.values_equal);
  EXPECT_TRUE(red.sum_right);
}

// The planted fault flattens and unflattens with a copy kernel per tensor (the twin's
// former charge): the numbers stay right, the kernel counts above catch it.
TEST(DataParallelCosts, PlantedPerTensorFlattenIsCaught) {
  const ScopedFault f(Fault::dp_flatten_per_tensor);
  const auto [rep, red] = run_replicate_and_reduce(kWeightBytes + kBiasBytes);
  EXPECT_TRUE(rep.values_equal);
  EXPECT_TRUE(red.sum_right);
  EXPECT_NE(rep.copy0, 0);  // would be 0
  EXPECT_NE(rep.copy1, 0);  // would be 0: the replica copies into tensors of its own
  EXPECT_FALSE(rep.views);
  EXPECT_NE(red.copy1, 0);  // would be 0
}

// Kernels (not copies) on GPU 1 while replicating the MLP's cost-only model onto it in
// shape-only mode.
int replica_kernels_shape_only() {
  const std::string out = simulate_traced(false, [&](SimBackend& b, const ChromeTrace& trace) {
    int kernels = 0;
    // The cost-only model of the MLP, as predictions build it (make_cost_only_model).
    Sequential primary = make_cost_only_model(describe_mlp(four_layers()), b.device(0), DType::f32);
    b.device(0).synchronize();
    const size_t at = trace.events().size();
    std::vector<Sequential> replicas = replicate(b, primary, {0, 1});
    b.device(1).synchronize();
    for (size_t i = at; i < trace.events().size(); ++i)
      kernels += trace.events()[i].pid == 2 && trace.events()[i].category != "copy";
    return std::to_string(kernels);
  });
  return std::stoi(out);
}

// Invariant: PyTorch's replicas have no .grad to zero (their parameters are not
// leaves), so replicating onto a shape-only GPU launches no kernel there at all: the
// buffer arrives by copy and the parameters are views of it.
TEST(DataParallelCosts, ReplicasLaunchNoKernelInShapeOnlyMode) {
  EXPECT_EQ(replica_kernels_shape_only(), 0);
  const ScopedFault f(Fault::dp_replica_grads_filled);  // planted: a fill per gradient (8)
  EXPECT_NE(replica_kernels_shape_only(), 0);
}

// One DataParallel step of the MLP on GPUs 0 and 1 (cross-entropy over 64 classes,
// `batch` samples): the bytes of the peer copies into GPU 1, the loss, the primary's
// first weight after the SGD step.
struct DpStep {
  double bytes_into_gpu1 = 0;
  double loss = 0;
  std::vector<float> weight;
};

DpStep run_dp_step(bool loss_per_replica, std::int64_t batch, std::int64_t first_sample = 0) {
  const std::string out = simulate_traced(true, [&](SimBackend& b, const ChromeTrace& trace) {
    StrategyOptions so;
    so.kind = StrategyKind::data_parallel;
    so.device_ids = {0, 1};
    so.loss = LossKind::cross_entropy;
    so.dp_loss_per_replica = loss_per_replica;
    auto strategy = make_strategy(
        b, so, [](Device& d) { return make_mlp(four_layers(), d, DType::f32, 7); },
        [](std::vector<NamedParameter> ps) { return make_sgd(std::move(ps), SgdOptions{}); });
    Tensor x = Tensor::empty(b.host_memory(), {batch, 64}, DType::f32, MemoryCategory::inputs);
    Tensor y = Tensor::empty(b.host_memory(), {batch}, DType::i64, MemoryCategory::inputs);
    auto* xv = static_cast<float*>(x.data());
    auto* yv = static_cast<std::int64_t*>(y.data());
    // Sample s of a fixed data set (whichever batch it falls in): inputs, label.
    for (Elements i = 0; i < x.numel(); ++i) xv[i] = static_cast<float>((i + first_sample * 64) % 13) / 13.0f - 0.5f;
    for (Elements i = 0; i < y.numel(); ++i) yv[i] = ((i + first_sample) * 7) % 64;
    const size_t at = trace.events().size();
    const StepResult r = strategy->train_step(x, y);
    b.device(0).synchronize();
    b.device(1).synchronize();
    const Tensor& w = strategy->module().named_parameters()[0].param->value;
    const auto* wv = static_cast<const float*>(w.data());
    std::string text = fmt::format("{} {:.17g}", peer_copies_into(trace, at, 1).second, r.loss);
    for (Elements i = 0; i < w.numel(); ++i) text += fmt::format(" {:.9g}", wv[i]);
    return text;
  });
  std::istringstream in(out);
  DpStep s;
  in >> s.bytes_into_gpu1 >> s.loss;
  for (float v; in >> v;) s.weight.push_back(v);
  return s;
}

// Invariant: when the module computes its loss (a Hugging Face model given labels),
// GPU 1 receives the parameters (4 x 16,640 bytes), its 8 input rows (8 x 64 x 4) and
// its 8 labels (8 x 8): nothing comes back for the gathered outputs, whose gradient
// the loss never needed. With the loss on the gathered outputs GPU 1 receives the
// parameters, its input rows and its rows of the output gradient (8 x 64 x 4) instead
// of the labels. With an even split both give the full batch's mean loss and the same
// update (the mean of the two halves' means is the full mean).
TEST(DataParallelCosts, ModuleComputedLossScattersNoOutputGradient) {
  const double params = 4.0 * static_cast<double>(kWeightBytes + kBiasBytes);
  const DpStep per_replica = run_dp_step(true, 16);
  const DpStep gathered = run_dp_step(false, 16);
  EXPECT_EQ(per_replica.bytes_into_gpu1, params + 8 * 64 * 4 + 8 * 8);
  EXPECT_EQ(gathered.bytes_into_gpu1, params + 8 * 64 * 4 + 8 * 64 * 4);
  EXPECT_NEAR(per_replica.loss, gathered.loss, 1e-6 * std::abs(gathered.loss));
  ASSERT_EQ(per_replica.weight.size(), gathered.weight.size());
  ASSERT_FALSE(gathered.weight.empty());
  for (size_t i = 0; i < gathered.weight.size(); ++i) EXPECT_NEAR(per_replica.weight[i], gathered.weight[i], 1e-6);
  // Planted: the module-computed loss still scatters the gathered outputs' gradient.
  const ScopedFault f(Fault::dp_replica_loss_scatters_grad);
  EXPECT_NE(run_dp_step(true, 16).bytes_into_gpu1, params + 8 * 64 * 4 + 8 * 8);
}

// Invariant: with an uneven split (5 samples: 3 on GPU 0, 2 on GPU 1) a module-computed
// loss is the mean of the two chunks' mean losses, as the Trainer's loss.mean() over
// DataParallel's gathered per-GPU losses gives, not the full-batch mean; the loss on the
// gathered outputs is the full-batch mean (3 mean_A + 2 mean_B) / 5. mean_A and mean_B
// come from separate runs on samples 0-2 and 3-4 with the loss on the gathered outputs.
TEST(DataParallelCosts, ModuleComputedLossAveragesChunkMeansOnUnevenSplits) {
  const double mean_a = run_dp_step(false, 3, 0).loss;
  const double mean_b = run_dp_step(false, 2, 3).loss;
  ASSERT_GT(std::abs(mean_a - mean_b), 1e-6);  // otherwise the two formulas agree
  EXPECT_NEAR(run_dp_step(true, 5).loss, (mean_a + mean_b) / 2, 1e-6);
  EXPECT_NEAR(run_dp_step(false, 5).loss, (3 * mean_a + 2 * mean_b) / 5, 1e-6);
}

}  // namespace
}  // namespace dpt
