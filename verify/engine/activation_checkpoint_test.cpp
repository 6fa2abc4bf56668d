// Activation checkpointing on the host (Sequential::set_checkpoint): recomputing a
// segment's forward in backward runs the same kernels on the same inputs, so the
// gradients are bit-identical to the run without checkpointing; checkpointed
// segments free their saved activations.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "engine/core/fault_injection.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/parallel/ddp/ddp.hpp"
#include "verify/support/rc_cases.hpp"
#include "verify/support/strategy_fixtures.hpp"

namespace dpt {
namespace {

using namespace dpt::test;

struct CheckpointRun {
  std::vector<std::vector<double>> grads;
};

CheckpointRun run_with(const MlpCase& c, size_t segment_layers) {
  HostBackend backend(c.devices);
  const Batch b = make_batch(backend, c);
  StrategyOptions o;
  o.kind = StrategyKind::ddp;
  o.loss = c.loss;
  const ModelBuilder base = mlp_builder(c);
  DistributedDataParallel ddp(
      backend, o,
      [&](Device& d) {
        Sequential m = base(d);
        m.set_checkpoint(segment_layers);
        return m;
      },
      sgd_builder());
  ddp.train_step(b.x, b.target);
  return CheckpointRun{grads_of(ddp.rank_module(0))};
}

// Invariant: gradients with checkpointing (segments of 1-3 layers) equal those
// without, bit for bit. (Peak memory is checked in the twin, hooks_twin_test: on the
// host, rank 0's peak activation memory varied between runs of one case.)
TEST(ActivationCheckpoint, GradientsAreBitIdentical) {
  DPT_EXPECT_PROPERTY("checkpointing leaves the gradients unchanged", 25, [] {
    MlpCase c = gen_mlp_case(1, 3, 16);
    c.batch = c.devices * *rc::gen::inRange<std::int64_t>(1, 6);  // every rank gets samples
    const size_t seg = static_cast<size_t>(*rc::gen::inRange(1, 4));
    RC_LOG() << describe(c) << " segments of " << seg << "\n";
    const CheckpointRun plain = run_with(c, 0), ckpt = run_with(c, seg);
    RC_LOG() << error_report(ckpt.grads, plain.grads);
    RC_ASSERT(ckpt.grads == plain.grads);
  });
}

}  // namespace
}  // namespace dpt
