// DDP properties: equal local batches give every rank the single-device full-batch
// gradient and bitwise-identical parameters after every step; uneven ones give the
// average of per-rank means (PyTorch's result) and, in weighted mode, the full-batch
// gradient; bucketed all-reduce equals per-tensor all-reduce; bucket assignment
// invariants; no_sync accumulation. Each property also runs against a planted bug.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <atomic>
#include <random>
#include <set>

#include "engine/core/fault_injection.hpp"
#include "engine/parallel/ddp/bucket_assignment.hpp"
#include "engine/parallel/ddp/ddp.hpp"
#include "engine/parallel/ddp/reducer.hpp"
#include "engine/core/fault_communicator.hpp"
#include "engine/host/host_communicator.hpp"
#include "engine/parallel/split.hpp"
#include "verify/support/rc_cases.hpp"
#include "verify/support/strategy_fixtures.hpp"

namespace dpt {
namespace {

using namespace dpt::test;
using Grads = std::vector<std::vector<double>>;

constexpr int kDdpCases = 100;  // each case runs up to 8 rank threads for 3 steps

StrategyOptions ddp_options(const MlpCase& c, UnevenMode uneven = UnevenMode::pytorch) {
  StrategyOptions o;
  o.kind = StrategyKind::ddp;
  o.loss = c.loss;
  o.uneven = uneven;
  return o;
}

// Each rank initialises from its own seed, so equal parameters prove the broadcast
// from rank 0 (rank 0 is on device 0 and uses the reference's seed).
ModelBuilder per_rank_init(const MlpCase& c) {
  return [c](Device& d) { return make_mlp(c.spec, d, c.dtype, c.seed + static_cast<std::uint64_t>(d.index())); };
}

Grads scaled_sum(const std::vector<Grads>& parts, double scale) {
  Grads out = parts.at(0);
  for (auto& t : out) std::fill(t.begin(), t.end(), 0.0);
  for (const Grads& g : parts)
    for (size_t t = 0; t < g.size(); ++t)
      for (size_t i = 0; i < g[t].size(); ++i) out[t][i] += g[t][i];
  for (auto& t : out)
    for (auto& v : t) v *= scale;
  return out;
}

// ---- equal local batches ----------------------------------------------------------
void ddp_even_matches_single() {
  MlpCase c = gen_mlp_case(16, 8, 24);
  c.batch = c.devices * *rc::gen::inRange<std::int64_t>(1, 17);  // equal local batches
  RC_LOG() << describe(c) << "\n";
  HostBackend backend(c.devices);
  DistributedDataParallel ddp(backend, ddp_options(c), per_rank_init(c), momentum_sgd_builder());
  for (int step = 0; step < 3; ++step) {
    const Batch b = make_batch(backend, c, static_cast<std::uint64_t>(step));
    const Grads want = step == 0 ? reference_grads(backend, c, b, 0, c.batch) : Grads{};
    const std::vector<double> scale = step == 0 ? full_batch_scale(backend, c, b) : std::vector<double>{};
    const StepResult r = ddp.train_step(b.x, b.target);
    RC_ASSERT(r.warnings.empty());
    for (int rank = 0; rank < c.devices; ++rank) {
      // Invariant: every rank's averaged gradient is the full-batch gradient.
      if (step == 0) {
        RC_LOG() << "rank " << rank << "\n" << error_report(grads_of(ddp.rank_module(rank)), want);
        RC_ASSERT(within_tolerance(gradient_error(grads_of(ddp.rank_module(rank)), want, scale), c.dtype));
      }
      // Invariant: after every step all ranks hold bitwise-identical parameters,
      // and identical bucket assignments.
      RC_ASSERT(values_of(ddp.rank_module(rank)) == values_of(ddp.rank_module(0)));
      RC_ASSERT(ddp.reducer(rank).buckets().size() == ddp.reducer(0).buckets().size());
      for (size_t k = 0; k < ddp.reducer(0).buckets().size(); ++k)
        RC_ASSERT(ddp.reducer(rank).buckets()[k].indices == ddp.reducer(0).buckets()[k].indices);
    }
  }
}

TEST(Ddp, EqualLocalBatchesGiveFullBatchGradientAndIdenticalRanks) {
  DPT_EXPECT_PROPERTY("DDP even: full-batch gradient, identical ranks", kDdpCases, [] { ddp_even_matches_single(); });
}

TEST(Ddp, PlantedBugNoDivisionByWorldSizeIsCaught) {
  const ScopedFault planted(Fault::ddp_skip_divide);
  DPT_EXPECT_COUNTEREXAMPLE("reducer that forgets to divide by the world size", kDdpCases,
                            [] { ddp_even_matches_single(); });
}

TEST(Ddp, PlantedBugNoInitialBroadcastIsCaught) {
  const ScopedFault planted(Fault::ddp_skip_initial_broadcast);
  DPT_EXPECT_COUNTEREXAMPLE("DDP without the broadcast from rank 0", kDdpCases, [] { ddp_even_matches_single(); });
}

// ---- uneven local batches ---------------------------------------------------------
MlpCase gen_uneven_case() {
  MlpCase c = gen_mlp_case(64, 6, 24);
  c.devices = *rc::gen::inRange(2, 7);
  c.batch = *rc::gen::inRange<std::int64_t>(c.devices, 65);
  // torch.chunk must give every rank a chunk, and the chunks must differ.
  RC_PRE(static_cast<int>(chunk_sizes(c.batch, c.devices).size()) == c.devices && c.batch % c.devices != 0);
  return c;
}

// `mode` is what DDP runs; `expect` is the mode whose result the property expects.
void ddp_uneven_result(UnevenMode mode, UnevenMode expect) {
  const MlpCase c = gen_uneven_case();
  RC_LOG() << describe(c) << "\n";
  HostBackend backend(c.devices);
  const Batch b = make_batch(backend, c);
  Grads want;
  std::vector<double> scale;
  const auto sizes = chunk_sizes(c.batch, c.devices);
  if (expect == UnevenMode::pytorch) {
    // Independently: each rank's slice on one device, its mean-loss gradient, averaged.
    const auto offsets = chunk_offsets(sizes);
    std::vector<Grads> per_rank;
    for (size_t r = 0; r < sizes.size(); ++r) per_rank.push_back(reference_grads(backend, c, b, offsets[r], sizes[r]));
    want = scaled_sum(per_rank, 1.0 / c.devices);
    // Sample i on rank r enters with weight 1 / (W n_r).
    scale = summand_scale(backend, c, b, [&](std::int64_t i) {
      const std::int64_t r = i / sizes[0];  // torch.chunk: all chunks but the last have sizes[0] rows
      return double(c.devices) * mean_divisor(c, sizes[static_cast<size_t>(r)]);
    });
  } else {
    want = reference_grads(backend, c, b, 0, c.batch);
    scale = full_batch_scale(backend, c, b);
  }
  DistributedDataParallel ddp(backend, ddp_options(c, mode), mlp_builder(c), momentum_sgd_builder());
  const StepResult r = ddp.train_step(b.x, b.target);
  // Invariant: pytorch mode gives the average of per-rank means, weighted mode the
  // full-batch gradient, on every rank.
  for (int rank = 0; rank < c.devices; ++rank) {
    const GradError err = gradient_error(grads_of(ddp.rank_module(rank)), want, scale);
    RC_LOG() << "rank " << rank << " " << err << "\n" << error_report(grads_of(ddp.rank_module(rank)), want);
    RC_ASSERT(within_tolerance(err, c.dtype));
  }
  // Invariant: the biased (pytorch) mode says so; the weighted mode has nothing to report.
  RC_ASSERT(r.warnings.size() == (mode == UnevenMode::pytorch ? 1u : 0u));
  if (mode == UnevenMode::pytorch) RC_ASSERT(r.warnings[0].find("uneven local batches") != std::string::npos);
}

TEST(Ddp, UnevenPytorchModeAveragesPerRankMeans) {
  DPT_EXPECT_PROPERTY("DDP uneven (pytorch): average of per-rank means", kDdpCases,
                      [] { ddp_uneven_result(UnevenMode::pytorch, UnevenMode::pytorch); });
}

TEST(Ddp, UnevenWeightedModeGivesFullBatchGradient) {
  DPT_EXPECT_PROPERTY("DDP uneven (weighted): full-batch gradient", kDdpCases,
                      [] { ddp_uneven_result(UnevenMode::weighted, UnevenMode::weighted); });
}

TEST(Ddp, PlantedBugBiasIsMeasurable) {
  // The two expectations differ: PyTorch's result is not the full-batch gradient
  // (the bias is real), and weighted mode is not PyTorch's result.
  DPT_EXPECT_COUNTEREXAMPLE("pytorch mode checked against the full batch", kDdpCases,
                            [] { ddp_uneven_result(UnevenMode::pytorch, UnevenMode::weighted); });
  DPT_EXPECT_COUNTEREXAMPLE("weighted mode checked against pytorch's average", kDdpCases,
                            [] { ddp_uneven_result(UnevenMode::weighted, UnevenMode::pytorch); });
}

TEST(Ddp, LessonUnevenExampleWarnsAndEmptyRankIsRejected) {
  MlpCase c;
  c.spec.widths = {3, 4, 2};
  c.batch = 5;
  c.devices = 2;
  HostBackend backend(2);
  const Batch b = make_batch(backend, c);
  DistributedDataParallel ddp(backend, ddp_options(c), mlp_builder(c), momentum_sgd_builder());
  const StepResult r = ddp.train_step(b.x, b.target);
  EXPECT_EQ(r.samples_per_device, (std::vector<std::int64_t>{3, 2}));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("[3, 2]"), std::string::npos) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find("weighted"), std::string::npos) << r.warnings[0];
  // 6 rows on 4 ranks: torch.chunk gives 2,2,2 and rank 3 would have nothing.
  HostBackend four(4);
  MlpCase c4 = c;
  c4.batch = 6;
  const Batch b4 = make_batch(four, c4);
  DistributedDataParallel ddp4(four, ddp_options(c4), mlp_builder(c4), momentum_sgd_builder());
  try {
    ddp4.train_step(b4.x, b4.target);
    ADD_FAILURE() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("leaving rank 3 without samples"), std::string::npos) << e.what();
  }
}

// ---- no_sync ------------------------------------------------------------------------
void no_sync_accumulates() {
  MlpCase c = gen_mlp_case(8, 4, 16);
  c.batch = c.devices * *rc::gen::inRange<std::int64_t>(1, 9);
  RC_LOG() << describe(c) << "\n";
  HostBackend backend(c.devices);
  const Batch b1 = make_batch(backend, c, 1), b2 = make_batch(backend, c, 2);
  const Grads want = scaled_sum({reference_grads(backend, c, b1, 0, c.batch), reference_grads(backend, c, b2, 0, c.batch)}, 1.0);
  std::vector<double> scale = full_batch_scale(backend, c, b1);
  const std::vector<double> scale2 = full_batch_scale(backend, c, b2);
  for (size_t t = 0; t < scale.size(); ++t) scale[t] += scale2[t];
  DistributedDataParallel ddp(backend, ddp_options(c), mlp_builder(c), momentum_sgd_builder());
  ddp.no_sync_step(b1.x, b1.target);
  ddp.train_step(b2.x, b2.target);
  // Invariant: gradients accumulated under no_sync and synchronised by the next
  // step equal the sum of the two full-batch gradients, on every rank.
  for (int rank = 0; rank < c.devices; ++rank)
    RC_ASSERT(within_tolerance(gradient_error(grads_of(ddp.rank_module(rank)), want, scale), c.dtype));
}

TEST(Ddp, NoSyncAccumulatesThenSynchronises) {
  DPT_EXPECT_PROPERTY("DDP no_sync accumulation", 25, [] { no_sync_accumulates(); });
}

TEST(Ddp, PlantedBugInNoSyncIsCaught) {
  const ScopedFault planted(Fault::ddp_skip_divide);
  DPT_EXPECT_COUNTEREXAMPLE("no_sync with a reducer that does not divide", 25, [] { no_sync_accumulates(); });
}

TEST(Ddp, FailedAllReduceSurfacesOnTheCaller) {
  MlpCase c;
  c.spec.widths = {3, 4, 2};
  c.batch = 4;
  HostBackend backend(2);
  const Batch b = make_batch(backend, c);
  FaultPlan plan;
  plan.rank = 1;
  plan.collective_index = 1;  // one coalesced parameter broadcast at construction, then the first all-reduce
  plan.cause = "NIC down";
  auto comms = wrap_with_faults(make_host_ring_communicators(2), plan);
  DistributedDataParallel ddp(backend, ddp_options(c), mlp_builder(c), momentum_sgd_builder(), std::move(comms));
  try {
    ddp.train_step(b.x, b.target);
    ADD_FAILURE() << "expected CollectiveError";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(e.collective(), "all_reduce");
    EXPECT_NE(std::string(e.what()).find("NIC down"), std::string::npos) << e.what();
  }
}

// ---- Reducer: bucketed all-reduce == per-tensor all-reduce -------------------------
// Forwards to a communicator and counts the all-reduces issued.
class CountingCommunicator : public Communicator {
 public:
  explicit CountingCommunicator(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend_name() const override { return "counting"; }
  WorkPtr all_reduce(Tensor& t, const AllReduceOptions& o) override {
    ++all_reduces;
    return inner_.all_reduce(t, o);
  }
  WorkPtr broadcast(Tensor& t, const BroadcastOptions& o) override { return inner_.broadcast(t, o); }
  WorkPtr reduce(Tensor& t, const ReduceOptions& o) override { return inner_.reduce(t, o); }
  WorkPtr all_gather(Tensor& out, const Tensor& in, const AllGatherOptions& o) override { return inner_.all_gather(out, in, o); }
  WorkPtr reduce_scatter(Tensor& out, const Tensor& in, const ReduceScatterOptions& o) override {
    return inner_.reduce_scatter(out, in, o);
  }
  WorkPtr barrier(const BarrierOptions& o) override { return inner_.barrier(o); }
  int all_reduces = 0;

 private:
  Communicator& inner_;
};

void bucketed_equals_per_tensor() {
  const int world = *rc::gen::element(1, 2, 4, 8);  // powers of two: x(1/W) is exact
  const int count = *rc::gen::inRange(1, 9);
  std::vector<Elements> numels;
  for (int i = 0; i < count; ++i) numels.push_back(*rc::gen::inRange<Elements>(1, 3000));
  ReducerOptions ro;
  ro.bucket_cap_bytes = *rc::gen::inRange<Bytes>(1, 40000);
  ro.first_bucket_bytes = *rc::gen::inRange<Bytes>(1, 20000);
  ro.single_bucket_first_iteration = *rc::gen::arbitrary<bool>();
  ro.gradient_as_bucket_view = *rc::gen::arbitrary<bool>();
  const std::uint64_t seed = *rc::gen::arbitrary<std::uint64_t>();
  HostBackend backend(world);
  auto comms = make_host_ring_communicators(world);
  auto reference = make_host_ring_communicators(world);
  // Per rank: parameters (value and integer-valued grad) and a Reducer over them.
  std::vector<std::vector<Parameter>> params(static_cast<size_t>(world));
  std::vector<std::unique_ptr<CountingCommunicator>> counting;
  std::vector<std::unique_ptr<Reducer>> reducers;
  for (int r = 0; r < world; ++r) {
    for (int i = 0; i < count; ++i) {
      Parameter p;
      p.name = "p" + std::to_string(i);
      p.value = Tensor::zeros(backend.device(r), {numels[size_t(i)]}, DType::f32, MemoryCategory::parameters);
      p.grad = Tensor::zeros(backend.device(r), {numels[size_t(i)]}, DType::f32, MemoryCategory::gradients);
      params[size_t(r)].push_back(std::move(p));
    }
    std::vector<NamedParameter> named;
    for (auto& p : params[size_t(r)]) named.push_back({p.name, &p});
    counting.push_back(std::make_unique<CountingCommunicator>(*comms[size_t(r)]));
    reducers.push_back(std::make_unique<Reducer>(named, *counting.back(), ro));
  }
  for (int iteration = 0; iteration < 2; ++iteration) {  // the second one runs on rebuilt buckets
    std::vector<std::vector<std::vector<double>>> grads(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
      std::mt19937_64 gen(seed + 1000 * static_cast<std::uint64_t>(r) + static_cast<std::uint64_t>(iteration));
      for (int i = 0; i < count; ++i) {
        std::vector<double> g(static_cast<size_t>(numels[size_t(i)]));
        for (auto& v : g) v = double(static_cast<int>(gen() % 101) - 50);
        tensor_fill_from_f64(params[size_t(r)][size_t(i)].grad, g);
        grads[size_t(r)].push_back(g);
      }
    }
    // Expected: each tensor all-reduced on its own (through a separate group), times 1/W.
    std::vector<std::vector<Tensor>> per_tensor(static_cast<size_t>(world));
    backend.parallel_for(world, [&](int r) {
      for (int i = 0; i < count; ++i) {
        Tensor t = Tensor::empty(backend.device(r), {numels[size_t(i)]}, DType::f32);
        tensor_fill_from_f64(t, grads[size_t(r)][size_t(i)]);
        reference[size_t(r)]->all_reduce(t, {})->wait();
        per_tensor[size_t(r)].push_back(t);
      }
    });
    backend.parallel_for(world, [&](int r) {
      Reducer& red = *reducers[size_t(r)];
      CountingCommunicator& cc = *counting[size_t(r)];
      const auto& layout = red.buckets();
      std::set<size_t> done;
      const int before = cc.all_reduces;
      red.prepare_for_backward(true);
      for (int i = count - 1; i >= 0; --i) {  // backward order: last parameter first
        red.mark_ready(size_t(i));
        done.insert(size_t(i));
        // Invariant: bucket k is launched as soon as buckets 0..k are complete.
        int complete = 0;
        while (complete < int(layout.size()) &&
               std::all_of(layout[size_t(complete)].indices.begin(), layout[size_t(complete)].indices.end(),
                           [&](size_t j) { return done.count(j) > 0; }))
          ++complete;
        if (!fault_active(Fault::ddp_skip_last_bucket)) RC_ASSERT(cc.all_reduces - before == complete);
      }
      red.finalize();
    });
    for (int r = 0; r < world; ++r)
      for (int i = 0; i < count; ++i) {
        std::vector<double> want = tensor_to_f64_vector(per_tensor[size_t(r)][size_t(i)]);
        for (auto& v : want) v /= world;
        // Invariant: the bucketed result equals the per-tensor all-reduce, exactly.
        RC_ASSERT(tensor_to_f64_vector(params[size_t(r)][size_t(i)].grad) == want);
      }
  }
  // Invariant: after the first iteration the buckets were rebuilt in ready order.
  RC_ASSERT(reducers[0]->rebuilt());
}

TEST(Reducer, BucketedAllReduceEqualsPerTensorAllReduce) {
  DPT_EXPECT_PROPERTY("bucketed all-reduce == per-tensor all-reduce", 60, [] { bucketed_equals_per_tensor(); });
}

TEST(Reducer, PlantedBugSkippedBucketIsCaught) {
  const ScopedFault planted(Fault::ddp_skip_last_bucket);
  DPT_EXPECT_COUNTEREXAMPLE("reducer that never reduces its last bucket", 60, [] { bucketed_equals_per_tensor(); });
}

// ---- bucket assignment (pure) ---------------------------------------------------------
using AssignFn = std::function<std::vector<Bucket>(const std::vector<BucketTensor>&, const std::vector<Bytes>&, bool)>;

// Invariants of c10d's assignment: every tensor in exactly one bucket; one dtype per
// bucket; each bucket's size is the sum of its tensors and, without its last tensor,
// below the limit it was formed under (a cap is exceeded only by the tensor that
// closes the bucket, e.g. one larger than the cap); within a dtype, buckets keep the
// visiting order; limits advance from the first to the last, then stay.
void assignment_invariants(const AssignFn& assign) {
  const int count = *rc::gen::inRange(0, 40);
  std::vector<BucketTensor> tensors;
  for (int i = 0; i < count; ++i)
    tensors.push_back({static_cast<size_t>(i), *rc::gen::inRange<Bytes>(1, 3 * kMiB),
                       *rc::gen::element(DType::f32, DType::f32, DType::f64)});
  // Visit in reverse registration order, as DDP does at construction.
  std::reverse(tensors.begin(), tensors.end());
  const std::vector<Bytes> limits{*rc::gen::inRange<Bytes>(1, 2 * kMiB), *rc::gen::inRange<Bytes>(1, 8 * kMiB)};
  const std::vector<Bucket> buckets = assign(tensors, limits, false);
  std::map<size_t, const BucketTensor*> by_index;
  for (const auto& t : tensors) by_index[t.index] = &t;
  std::multiset<size_t> seen;
  std::map<DType, std::vector<size_t>> order_by_dtype;
  std::map<DType, int> buckets_by_dtype;
  for (const Bucket& b : buckets) {
    RC_ASSERT(!b.indices.empty());
    const DType dtype = by_index.at(b.indices[0])->dtype;
    Bytes size = 0;
    for (size_t i : b.indices) {
      seen.insert(i);
      RC_ASSERT(by_index.at(i)->dtype == dtype);
      size += by_index.at(i)->size_bytes;
      order_by_dtype[dtype].push_back(i);
    }
    RC_ASSERT(b.size_bytes == size);
    RC_ASSERT(size - by_index.at(b.indices.back())->size_bytes < b.limit_bytes);
    const int k = buckets_by_dtype[dtype]++;
    RC_ASSERT(b.limit_bytes == limits[std::min<size_t>(size_t(k), limits.size() - 1)]);
  }
  RC_ASSERT(seen.size() == tensors.size());
  for (const auto& t : tensors) RC_ASSERT(seen.count(t.index) == 1u);
  for (const auto& [dtype, order] : order_by_dtype) {
    std::vector<size_t> visit;
    for (const auto& t : tensors)
      if (t.dtype == dtype) visit.push_back(t.index);
    RC_ASSERT(order == visit);
  }
}

TEST(BucketAssignment, InvariantsHold) {
  DPT_EXPECT_PROPERTY("bucket assignment invariants", 1000, [] { assignment_invariants(compute_bucket_assignment_by_size); });
}

TEST(BucketAssignment, PlantedBugLostOpenBucketIsCaught) {
  // A variant that forgets the buckets still open at the end.
  const AssignFn lossy = [](const std::vector<BucketTensor>& t, const std::vector<Bytes>& l, bool s) {
    auto b = compute_bucket_assignment_by_size(t, l, s);
    if (!b.empty() && b.back().size_bytes < b.back().limit_bytes) b.pop_back();
    return b;
  };
  DPT_EXPECT_COUNTEREXAMPLE("assignment that drops the open bucket", 1000, [&] { assignment_invariants(lossy); });
}

TEST(BucketAssignment, PyTorchLayouts) {
  // 4 MiB, 0.5 MiB, 0.5 MiB, 30 MiB in ready order with PyTorch's limits {1 MiB, 25 MiB}:
  // the first tensor closes bucket 0 alone; the next two and the 30 MiB one fill
  // bucket 1 past 25 MiB (only its last tensor crosses the cap).
  const std::vector<BucketTensor> t{{3, 4 * kMiB, DType::f32}, {2, kMiB / 2, DType::f32},
                                    {1, kMiB / 2, DType::f32}, {0, 30 * kMiB, DType::f32}};
  const auto b = compute_bucket_assignment_by_size(t, {kDdpFirstBucketBytes, ddp_bucket_cap_bytes(25)}, false);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].indices, (std::vector<size_t>{3}));
  EXPECT_EQ(b[1].indices, (std::vector<size_t>{2, 1, 0}));
  EXPECT_EQ(b[1].limit_bytes, 25 * kMiB);
  EXPECT_THROW(ddp_bucket_cap_bytes(0), std::invalid_argument);
}

TEST(Ddp, FirstIterationUsesOneBucketThenRebuildsInReadyOrder) {
  MlpCase c;
  c.spec.widths = {8, 512, 512, 4};  // 2.weight is 1 MiB in f32
  c.dtype = DType::f32;
  c.batch = 4;
  HostBackend backend(2);
  StrategyOptions o = ddp_options(c);
  o.bucket_cap_mb = 0.0005;  // 524 bytes: after the 1 MiB first bucket, one tensor per bucket
  DistributedDataParallel ddp(backend, o, mlp_builder(c), momentum_sgd_builder());
  EXPECT_EQ(ddp.reducer(0).buckets().size(), 1u);  // PyTorch 1.13, find_unused_parameters=False
  const Batch b = make_batch(backend, c);
  ddp.train_step(b.x, b.target);
  EXPECT_TRUE(ddp.reducer(0).rebuilt());
  // Gradients become ready from the last layer back: 4.weight, 4.bias, 2.weight, ...
  EXPECT_EQ(ddp.reducer(0).ready_order(), (std::vector<size_t>{4, 5, 2, 3, 0, 1}));
  // The first bucket closes once it reaches 1 MiB, at 2.weight; the rest exceed 524 bytes alone.
  ASSERT_EQ(ddp.reducer(0).buckets().size(), 4u);
  EXPECT_EQ(ddp.reducer(0).buckets()[0].indices, (std::vector<size_t>{4, 5, 2}));
  EXPECT_EQ(ddp.reducer(0).buckets()[1].indices, (std::vector<size_t>{3}));
}

}  // namespace
}  // namespace dpt
