// Gradient accumulation with DDP (ddp_accumulated_step): K micro-batches under
// no_sync then one synchronised backward. Properties, each with a planted bug:
// the accumulated gradient equals one full-batch step, and a step issues 1/K of
// the all-reduces that K synchronised steps issue.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <memory>

#include "engine/core/fault_injection.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/host/host_communicator.hpp"
#include "engine/parallel/ddp/accumulate.hpp"
#include "verify/support/forwarding_communicator.hpp"
#include "verify/support/rc_cases.hpp"
#include "verify/support/strategy_fixtures.hpp"

namespace dpt {
namespace {

using namespace dpt::test;

// Forwards to an owned communicator and counts the all-reduces issued (shared
// counter, so the test reads it after the strategy took the communicators).
class CountingCommunicator : public ForwardingCommunicator {
 public:
  CountingCommunicator(std::unique_ptr<Communicator> inner, std::shared_ptr<int> count)
      : ForwardingCommunicator(std::move(inner)), count_(std::move(count)) {}
  std::string backend_name() const override { return "counting"; }
  WorkPtr all_reduce(Tensor& t, const AllReduceOptions& o) override {
    if (rank() == 0) ++*count_;
    return ForwardingCommunicator::all_reduce(t, o);
  }

 private:
  std::shared_ptr<int> count_;
};

std::vector<std::unique_ptr<Communicator>> counting_ring(int world, const std::shared_ptr<int>& count) {
  std::vector<std::unique_ptr<Communicator>> out;
  for (auto& c : make_host_ring_communicators(world))
    out.push_back(std::make_unique<CountingCommunicator>(std::move(c), count));
  return out;
}

StrategyOptions options(const MlpCase& c, int k) {
  StrategyOptions o;
  o.kind = StrategyKind::ddp;
  o.loss = c.loss;
  o.accumulate = k;
  return o;
}

// A case in f64 whose batch is K micro-batches of `devices` x m samples.
MlpCase gen_case(int& k) {
  MlpCase c = gen_mlp_case(1, 4, 16);
  c.dtype = DType::f64;
  k = *rc::gen::inRange(1, 5);
  c.batch = static_cast<std::int64_t>(k) * c.devices * *rc::gen::inRange<std::int64_t>(1, 5);
  RC_LOG() << describe(c) << " accumulate " << k << "\n";
  return c;
}

// Invariant: K accumulated micro-batches give every rank the gradient of one
// single-device step on their concatenation, within 1e-12 relative to the
// summation scale (f64).
void accumulation_equals_full_batch() {
  int k = 1;
  const MlpCase c = gen_case(k);
  HostBackend backend(c.devices);
  const Batch b = make_batch(backend, c);
  const auto want = reference_grads(backend, c, b, 0, c.batch);
  const std::vector<double> scale = full_batch_scale(backend, c, b);
  DistributedDataParallel ddp(backend, options(c, k), mlp_builder(c), sgd_builder());
  ddp_accumulated_step(ddp, k, b.x, b.target);
  for (int rank = 0; rank < c.devices; ++rank) {
    RC_LOG() << "rank " << rank << "\n" << error_report(grads_of(ddp.rank_module(rank)), want);
    RC_ASSERT(within_tolerance(gradient_error(grads_of(ddp.rank_module(rank)), want, scale), DType::f64));
  }
}

TEST(Accumulate, KMicroBatchesEqualOneFullBatchStep) {
  DPT_EXPECT_PROPERTY("accumulation equals the full batch", 40, [] { accumulation_equals_full_batch(); });
}

TEST(Accumulate, PlantedBugLossNotDividedByKIsCaught) {
  const ScopedFault planted(Fault::ddp_accumulate_undivided);
  DPT_EXPECT_COUNTEREXAMPLE("accumulation without loss / K", 40, [] { accumulation_equals_full_batch(); });
}

// Invariant: an accumulated step over K micro-batches issues exactly the
// all-reduces of one synchronised step (one per bucket), i.e. 1/K of what K
// synchronised steps over the same micro-batches issue.
void one_all_reduce_per_k_backward_passes() {
  int k = 1;
  const MlpCase c = gen_case(k);
  HostBackend backend(c.devices);
  const Batch b = make_batch(backend, c);
  const std::int64_t micro = c.batch / k;
  auto synced = std::make_shared<int>(0), accumulated = std::make_shared<int>(0);
  {
    DistributedDataParallel ddp(backend, options(c, 1), mlp_builder(c), sgd_builder(), counting_ring(c.devices, synced));
    ddp.train_step(b.x.slice_rows(0, micro), b.target.slice_rows(0, micro));  // buckets rebuilt after step 1
    *synced = 0;
    for (int i = 0; i < k; ++i) ddp.train_step(b.x.slice_rows(i * micro, micro), b.target.slice_rows(i * micro, micro));
  }
  DistributedDataParallel ddp(backend, options(c, k), mlp_builder(c), sgd_builder(), counting_ring(c.devices, accumulated));
  ddp_accumulated_step(ddp, k, b.x, b.target);  // buckets rebuilt after the first synchronised pass
  *accumulated = 0;
  ddp_accumulated_step(ddp, k, b.x, b.target);
  RC_LOG() << "synchronised steps: " << *synced << " all-reduces, accumulated: " << *accumulated << "\n";
  RC_ASSERT(*synced > 0);
  RC_ASSERT(*accumulated * k == *synced);
}

TEST(Accumulate, OneAllReducePerKBackwardPasses) {
  DPT_EXPECT_PROPERTY("all-reduce count 1/K", 30, [] { one_all_reduce_per_k_backward_passes(); });
}

TEST(Accumulate, PlantedBugAllReduceInsideNoSyncIsCaught) {
  const ScopedFault planted(Fault::ddp_sync_inside_no_sync);
  DPT_EXPECT_COUNTEREXAMPLE("no_sync that all-reduces", 30, [] { one_all_reduce_per_k_backward_passes(); });
}

TEST(Accumulate, ABatchThatDoesNotSplitIntoKMicroBatchesIsRejected) {
  MlpCase c;
  c.spec.widths = {3, 4, 2};
  c.batch = 6;
  HostBackend backend(2);
  const Batch b = make_batch(backend, c);
  DistributedDataParallel ddp(backend, options(c, 4), mlp_builder(c), sgd_builder());
  try {
    ddp_accumulated_step(ddp, 4, b.x, b.target);
    FAIL() << "6 samples in 4 micro-batches accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("a batch of 6 does not split into 4 equal micro-batches"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dpt
