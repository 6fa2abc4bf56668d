// Symmetric ranks (predict.hpp, PredictConfig::symmetric_ranks): a multi-node
// shape-only DDP prediction simulates node 0's ranks only and lets them stand for
// every node's. These tests compare it with the full simulation of every rank on
// the real cluster hardware files, and show that the comparison catches a planted
// bug (the collectives timed for node 0's ranks alone).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <map>
#include <sstream>

#include <rapidcheck/detail/Configuration.h>

#include "engine/core/fault_injection.hpp"
#include "engine/nn/model.hpp"
#include "sim/net/hardware.hpp"
#include "sim/twin/predict.hpp"

namespace dpt {
namespace {

const std::string kHardwareDir = std::string(DPT_SOURCE_DIR) + "/scenarios/hardware";

struct Case {
  std::string hardware;
  MlpSpec spec;
  int nodes = 2;
  int gpus_per_node = 8;
  std::int64_t batch_per_device = 8;
  double bucket_cap_mb = 25.0;
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  os << c.hardware << " " << c.nodes << " nodes x " << c.gpus_per_node << " GPUs, widths [";
  for (auto w : c.spec.widths) os << w << " ";
  return os << "], batch " << c.batch_per_device << "/rank, buckets " << c.bucket_cap_mb << " MB";
}

PredictConfig config_of(const Case& c, bool symmetric) {
  PredictConfig p;
  p.strategy = StrategyKind::ddp;
  p.devices = c.nodes * c.gpus_per_node;
  p.nodes = c.nodes;
  p.batch_per_device = c.batch_per_device;
  p.bucket_cap_mb = c.bucket_cap_mb;
  p.numeric = false;
  p.model_name = "mlp";
  p.input_features = c.spec.widths.front();
  p.output_features = c.spec.widths.back();
  p.single_device_baseline = false;
  p.symmetric_ranks = symmetric;
  return p;
}

StepReport predict(const Case& c, const PredictConfig& config) {
  const sim::HardwareSpec hw = sim::load_hardware(c.hardware, kHardwareDir);
  const MlpSpec spec = c.spec;
  return predict_step(hw, [spec](Device& d) { return make_mlp(spec, d, DType::f32, 7); }, config);
}

// Cases with more ranks than the collectives' exact formulation takes (so the full
// simulation times them in the large-N formulation too): 2-4 nodes of 4 or 8 GPUs.
rc::Gen<Case> gen_case() {
  return rc::gen::exec([] {
    Case c;
    c.hardware = *rc::gen::element(std::string("dgx-a100-cluster"), std::string("dgx-h100-cluster"));
    const int layers = *rc::gen::inRange(1, 4);
    c.spec.widths.push_back(*rc::gen::inRange(8, 1024));
    for (int i = 0; i < layers; ++i) c.spec.widths.push_back(*rc::gen::inRange(8, 1024));
    c.gpus_per_node = *rc::gen::element(4, 8);
    c.nodes = *rc::gen::inRange(c.gpus_per_node == 8 ? 2 : 3, 5);
    c.batch_per_device = *rc::gen::inRange(1, 128);
    c.bucket_cap_mb = *rc::gen::element(0.25, 1.0, 25.0);
    return c;
  });
}

// Invariant: on a homogeneous cluster every DDP rank does the same work at the same
// times, so simulating node 0's ranks alone predicts the same step time, the same
// per-device peak memory and breakdown, and the same InfiniBand traffic as simulating
// every rank. (Step times agree to rounding: the same events, fewer actors.)
void check_symmetric_equals_full(const Case& c) {
  RC_TAG(c.nodes);
  PredictConfig sym = config_of(c, true);
  RC_ASSERT(symmetric_ranks_apply(sym));
  const StepReport s = predict(c, sym);
  const StepReport f = predict(c, config_of(c, false));
  RC_ASSERT(s.simulated_devices == std::optional<int>(c.gpus_per_node));
  RC_ASSERT(!f.simulated_devices.has_value());
  RC_ASSERT(s.step_time_s.has_value() && f.step_time_s.has_value());
  RC_LOG() << c << ": step symmetric " << *s.step_time_s << " s, full " << *f.step_time_s << " s\n";
  RC_ASSERT(std::abs(*s.step_time_s - *f.step_time_s) <= 1e-9 * *f.step_time_s);
  RC_ASSERT(s.devices_detail.size() == f.devices_detail.size());
  for (size_t i = 0; i < f.devices_detail.size(); ++i) {
    RC_ASSERT(s.devices_detail[i].device == f.devices_detail[i].device);
    RC_ASSERT(s.devices_detail[i].peak_memory_bytes == f.devices_detail[i].peak_memory_bytes);
    RC_ASSERT(s.devices_detail[i].memory_breakdown_bytes == f.devices_detail[i].memory_breakdown_bytes);
  }
  // InfiniBand links carry only the collectives' traffic.
  std::map<std::string, Bytes> ib_full, ib_sym;
  for (const auto& l : f.links)
    if (l.name.find("ib") != std::string::npos) ib_full[l.name] = l.bytes;
  for (const auto& l : s.links)
    if (l.name.find("ib") != std::string::npos) ib_sym[l.name] = l.bytes;
  RC_ASSERT(!ib_full.empty());
  RC_ASSERT(ib_sym == ib_full);
}

template <typename F> rc::detail::TestResult run_property(F property, int cases) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = cases;
  return rc::detail::checkTestable(property, rc::detail::TestMetadata{}, params);
}

TEST(SimSymmetricRanks, NodeZeroStandsForEveryNodeExactly) {
  const auto result = run_property([] { check_symmetric_equals_full(*gen_case()); }, 6);
  std::ostringstream why;
  rc::detail::printResultMessage(result, why);
  EXPECT_TRUE(result.is<rc::detail::SuccessResult>()) << why.str();
}

TEST(SimSymmetricRanks, PlantedBugCollectivesTimedForNodeZeroAloneIsCaught) {
  const ScopedFault planted(Fault::predict_symmetric_node0_only);
  const auto result = run_property([] { check_symmetric_equals_full(*gen_case()); }, 6);
  EXPECT_TRUE(result.is<rc::detail::FailureResult>()) << "the planted bug went unnoticed";
}

TEST(SimSymmetricRanks, AppliesOnlyToMultiNodeShapeOnlyDdpWithEqualBatches) {
  Case c;
  c.hardware = "dgx-h100-cluster";
  c.spec.widths = {16, 16};
  c.nodes = 4;
  PredictConfig p = config_of(c, true);
  EXPECT_TRUE(symmetric_ranks_apply(p));
  PredictConfig off = p;
  off.symmetric_ranks = false;
  EXPECT_FALSE(symmetric_ranks_apply(off));
  PredictConfig numeric = p;
  numeric.numeric = true;
  EXPECT_FALSE(symmetric_ranks_apply(numeric)) << "numeric collectives need every rank's data";
  PredictConfig dp = p;
  dp.strategy = StrategyKind::data_parallel;
  EXPECT_FALSE(symmetric_ranks_apply(dp));
  PredictConfig one_node = p;
  one_node.nodes = 1;
  one_node.devices = 8;
  EXPECT_FALSE(symmetric_ranks_apply(one_node));
  PredictConfig uneven = p;
  uneven.batch_per_device.reset();
  uneven.batch_global = 33;  // 32 ranks: DistributedSampler pads, torch.chunk gives unequal batches
  EXPECT_FALSE(symmetric_ranks_apply(uneven));
  PredictConfig even = uneven;
  even.batch_global = 64;
  EXPECT_TRUE(symmetric_ranks_apply(even));
}

}  // namespace
}  // namespace dpt
