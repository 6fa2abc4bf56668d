// DataParallel properties: gradients on the primary equal the single-device
// full-batch gradients for any split (uneven ones included), parameters after
// several steps match, only the devices torch.chunk uses get replicas, runs are
// deterministic, and the wrapper's state dict carries "module.". Each property is
// also run against a planted bug and must find a counterexample.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdlib>
#include <iostream>
#include <random>

#include "engine/core/fault_injection.hpp"
#include "engine/io/checkpoint.hpp"
#include "engine/parallel/data_parallel.hpp"
#include "engine/parallel/ddp/ddp.hpp"
#include "engine/parallel/split.hpp"
#include "engine/parallel/single.hpp"
#include "verify/support/rc_cases.hpp"
#include "verify/support/strategy_fixtures.hpp"

namespace dpt {
namespace {

using namespace dpt::test;

constexpr int kDpCases = 200;  // random MLPs up to 4 layers x 64 wide, batch <= 256, 8 devices

StrategyOptions dp_options(const MlpCase& c) {
  StrategyOptions o;
  o.kind = StrategyKind::data_parallel;
  o.loss = c.loss;
  return o;
}

void dp_equals_full_batch() {
  const MlpCase c = gen_mlp_case(256, 8);
  RC_LOG() << describe(c) << "\n";
  HostBackend backend(c.devices);
  const Batch b = make_batch(backend, c);
  const auto want = reference_grads(backend, c, b, 0, c.batch);
  RC_TAG(c.batch % c.devices == 0 ? "even split" : "uneven split");
  if (std::getenv("DPT_SHOW_CASES")) std::cerr << describe(c) << "\n";
  DataParallel dp(backend, dp_options(c), mlp_builder(c), momentum_sgd_builder());
  const StepResult r = dp.train_step(b.x, b.target);
  // Invariant: the primary's gradient is the full-batch gradient, whatever the split.
  const GradError err = gradient_error(grads_of(dp.module()), want, full_batch_scale(backend, c, b));
  RC_LOG() << err << "\n";
  RC_ASSERT(within_tolerance(err, c.dtype));
  // Invariant: replicas exist exactly for the chunks torch.chunk makes.
  const auto sizes = chunk_sizes(c.batch, c.devices);
  RC_ASSERT(dp.replicas_last_step() == static_cast<int>(sizes.size()));
  std::vector<std::int64_t> per_device(static_cast<size_t>(c.devices), 0);
  std::copy(sizes.begin(), sizes.end(), per_device.begin());
  RC_ASSERT(r.samples_per_device == per_device);
}

TEST(DataParallel, GradientEqualsFullBatchGradient) {
  DPT_EXPECT_PROPERTY("DP gradient == single-device full-batch gradient", kDpCases,
                      [] { dp_equals_full_batch(); });
}

TEST(DataParallel, PlantedBugLostReplicaGradientIsCaught) {
  const ScopedFault planted(Fault::dp_reduce_skips_last_replica);
  DPT_EXPECT_COUNTEREXAMPLE("reduce-add that loses the last replica's gradient", kDpCases, [] { dp_equals_full_batch(); });
}

TEST(DataParallel, PlantedBugDroppedChunkIsCaught) {
  const ScopedFault planted(Fault::dp_scatter_drops_last_chunk);
  DPT_EXPECT_COUNTEREXAMPLE("scatter that drops the last chunk", kDpCases, [] { dp_equals_full_batch(); });
}

// Several steps of DP and of the single-device strategy on the same batches.
void dp_parameters_track_single() {
  const MlpCase c = gen_mlp_case(64, 8, 16);
  RC_LOG() << describe(c) << "\n";
  HostBackend backend(c.devices);
  StrategyOptions single_o = dp_options(c);
  single_o.kind = StrategyKind::single;
  auto single = make_single_strategy(backend, single_o, mlp_builder(c), momentum_sgd_builder());
  DataParallel dp(backend, dp_options(c), mlp_builder(c), momentum_sgd_builder());
  for (int step = 0; step < 3; ++step) {
    const Batch b = make_batch(backend, c, static_cast<std::uint64_t>(step));
    const StepResult rs = single->train_step(b.x, b.target);
    const StepResult rd = dp.train_step(b.x, b.target);
    // Invariant: after every step the primary's parameters match the single-device
    // run's (momentum SGD, so errors would compound), and so does the loss.
    const auto reference = values_of(single->module());
    const GradError err = gradient_error(values_of(dp.module()), reference, norms_of(reference));
    RC_LOG() << "step " << step << " parameters: " << err << "\n";
    RC_ASSERT(within_tolerance(err, c.dtype));
    RC_ASSERT(std::abs(rd.loss - rs.loss) <= tolerance(c.dtype) * std::max(1.0, std::abs(rs.loss)));
  }
}

TEST(DataParallel, ParametersAfterSeveralStepsMatchSingleDevice) {
  DPT_EXPECT_PROPERTY("DP parameters == single-device parameters after 3 steps", 60,
                      [] { dp_parameters_track_single(); });
}

TEST(DataParallel, PlantedBugInStepsIsCaught) {
  const ScopedFault planted(Fault::dp_reduce_skips_last_replica);
  DPT_EXPECT_COUNTEREXAMPLE("DP steps with a lost replica gradient", 30, [] { dp_parameters_track_single(); });
}

TEST(DataParallel, LessonSplitUsesThreeOfFourDevices) {
  MlpCase c;
  c.spec.widths = {3, 4, 2};
  c.batch = 5;
  c.devices = 4;
  HostBackend backend(4);
  const Batch b = make_batch(backend, c);
  DataParallel dp(backend, dp_options(c), mlp_builder(c), momentum_sgd_builder());
  const StepResult r = dp.train_step(b.x, b.target);
  EXPECT_EQ(r.samples_per_device, (std::vector<std::int64_t>{2, 2, 1, 0}));
  EXPECT_EQ(dp.replicas_last_step(), 3);
}

TEST(DataParallel, RejectsBadOptions) {
  MlpCase c;
  c.spec.widths = {3, 2};
  HostBackend backend(2);
  StrategyOptions o = dp_options(c);
  o.dim = 1;
  EXPECT_THROW(DataParallel(backend, o, mlp_builder(c), momentum_sgd_builder()), std::invalid_argument);
  o = dp_options(c);
  o.device_ids = {0, 0};
  EXPECT_THROW(DataParallel(backend, o, mlp_builder(c), momentum_sgd_builder()), std::invalid_argument);
  o.device_ids = {0, 2};
  EXPECT_THROW(DataParallel(backend, o, mlp_builder(c), momentum_sgd_builder()), std::invalid_argument);
  o.device_ids = {1, 0};
  o.output_device = 1;
  DataParallel dp(backend, o, mlp_builder(c), momentum_sgd_builder());
  EXPECT_EQ(&dp.module().device(), &backend.device(1));
  c.batch = 4;
  const Batch b = make_batch(backend, c);
  EXPECT_NO_THROW(dp.train_step(b.x, b.target));
  Tensor empty = Tensor::empty(backend.host_memory(), {0, 3}, DType::f64);
  EXPECT_THROW(dp.train_step(empty, empty), std::invalid_argument);
}

TEST(DataParallel, WorkerExceptionReachesTheCaller) {
  // An input one column too wide fails inside every replica's forward, on the
  // parallel_apply workers; the exception must come back to the caller.
  MlpCase c;
  c.spec.widths = {3, 2};
  c.batch = 4;
  HostBackend backend(2);
  DataParallel dp(backend, dp_options(c), mlp_builder(c), momentum_sgd_builder());
  MlpCase wide = c;
  wide.spec.widths = {4, 2};
  const Batch b = make_batch(backend, wide);
  EXPECT_THROW(dp.train_step(b.x, b.target), std::invalid_argument);
}

// ---- determinism ---------------------------------------------------------------------
std::vector<std::vector<double>> train_three_steps(StrategyKind kind, const MlpCase& c, const ModelBuilder& build) {
  HostBackend backend(c.devices);
  StrategyOptions o;
  o.kind = kind;
  o.loss = c.loss;
  if (kind == StrategyKind::single) o.device_ids = {0};
  auto s = make_strategy(backend, o, build, momentum_sgd_builder());
  for (int step = 0; step < 3; ++step) {
    const Batch b = make_batch(backend, c, static_cast<std::uint64_t>(step));
    s->train_step(b.x, b.target);
  }
  return values_of(s->module());
}

void same_seed_same_bits(StrategyKind kind, bool planted_random_init) {
  MlpCase c = gen_mlp_case(32, 4, 12);
  if (kind == StrategyKind::ddp) c.batch = std::max<std::int64_t>(c.batch, c.devices) / c.devices * c.devices;
  RC_LOG() << describe(c) << "\n";
  // The planted bug: initialisation from a nondeterministic source.
  const ModelBuilder build = planted_random_init
                                 ? ModelBuilder([c](Device& d) { return make_mlp(c.spec, d, c.dtype, std::random_device{}()); })
                                 : mlp_builder(c);
  // Invariant: two runs from the same seed end with bitwise-identical parameters.
  RC_ASSERT(train_three_steps(kind, c, build) == train_three_steps(kind, c, build));
}

TEST(Determinism, SameSeedGivesIdenticalBitsForEachStrategy) {
  for (StrategyKind k : {StrategyKind::single, StrategyKind::data_parallel, StrategyKind::ddp})
    DPT_EXPECT_PROPERTY(std::string("determinism: ") + strategy_kind_name(k), 15, [k] { same_seed_same_bits(k, false); });
}

TEST(Determinism, PlantedNondeterministicInitIsCaught) {
  for (StrategyKind k : {StrategyKind::single, StrategyKind::data_parallel, StrategyKind::ddp})
    DPT_EXPECT_COUNTEREXAMPLE(std::string("random init: ") + strategy_kind_name(k), 15, [k] { same_seed_same_bits(k, true); });
}

// ---- state dicts ----------------------------------------------------------------------
SafetensorsFile as_file(const StateDict& sd) {
  SafetensorsFile f;
  f.path = "<state dict in memory>";
  for (const auto& [name, t] : sd) f.tensors.push_back(safetensors_tensor_from(name, t));
  return f;
}

// Invariant: the wrapper's keys are "module." + the wrapped model's keys, in order,
// holding the same values.
void wrapper_keys_are_prefixed(Strategy& s, const StateDict& wrapped) {
  const StateDict inner = model_state_dict(s.module());
  ASSERT_EQ(wrapped.size(), inner.size());
  for (size_t i = 0; i < inner.size(); ++i) {
    EXPECT_EQ(wrapped[i].first, "module." + inner[i].first);
    EXPECT_EQ(tensor_to_f64_vector(wrapped[i].second), tensor_to_f64_vector(inner[i].second));
  }
}

TEST(StateDict, WrappersCarryModulePrefixAndLoadAfterStripping) {
  MlpCase c;
  c.spec.widths = {3, 5, 2};
  c.batch = 4;
  for (StrategyKind kind : {StrategyKind::data_parallel, StrategyKind::ddp}) {
    HostBackend backend(2);
    StrategyOptions o;
    o.kind = kind;
    auto s = make_strategy(backend, o, mlp_builder(c), momentum_sgd_builder());
    const Batch b = make_batch(backend, c);
    s->train_step(b.x, b.target);
    const StateDict sd = s->state_dict();
    wrapper_keys_are_prefixed(*s, sd);
    const SafetensorsFile file = as_file(sd);
    MlpCase other = c;
    other.seed = 99;
    Sequential plain = make_mlp(other.spec, backend.device(0), other.dtype, other.seed);
    // A strict load into an unwrapped model fails, listing missing and unexpected keys.
    try {
      load_state_dict(plain, file);
      ADD_FAILURE() << "strict load of a module.-prefixed state dict succeeded";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("Missing key(s)"), std::string::npos) << what;
      EXPECT_NE(what.find("\"0.weight\""), std::string::npos) << what;
      EXPECT_NE(what.find("Unexpected key(s)"), std::string::npos) << what;
      EXPECT_NE(what.find("\"module.0.weight\""), std::string::npos) << what;
    }
    // Stripping the prefix loads it, and module()'s own state dict loads as is.
    LoadOptions strip;
    strip.strip_prefix = "module.";
    load_state_dict(plain, file, strip);
    EXPECT_EQ(values_of(plain), values_of(s->module()));
    Sequential plain2 = make_mlp(other.spec, backend.device(0), other.dtype, other.seed);
    load_state_dict(plain2, as_file(model_state_dict(s->module())));
    EXPECT_EQ(values_of(plain2), values_of(s->module()));
  }
}

TEST(StateDict, PlantedUnprefixedStateDictIsCaught) {
  // The check above applied to a wrapper that forgets the prefix must fail.
  MlpCase c;
  c.spec.widths = {3, 2};
  HostBackend backend(2);
  StrategyOptions o;
  o.kind = StrategyKind::data_parallel;
  auto s = make_strategy(backend, o, mlp_builder(c), momentum_sgd_builder());
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    wrapper_keys_are_prefixed(*s, model_state_dict(s->module()));
  }
  EXPECT_GT(failures.size(), 0);
}

}  // namespace
}  // namespace dpt
