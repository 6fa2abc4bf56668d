// Symmetric ranks (predict.hpp, PredictConfig::symmetric_ranks): a multi-node
// shape-only DDP prediction simulates node 0's ranks only and lets them stand for
// every node's. These tests compare it with the full simulation of every rank on
// the real cluster hardware files, and show that the comparison catches a planted
// bug (the collectives timed for node 0's ranks alone).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/core/fault_injection.hpp"
#include "engine/nn/model.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/predict.hpp"
#include "sim/twin/sim_process.hpp"
#include "verify/support/rc_property.hpp"

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
  bool three_level = false;  // the fat-tree cut small enough that these few nodes span pods under a core
};

// dgx-h100-cluster with one node per leaf and 4-port switches: past 4 leaves the
// platform has three switch levels (pods of 2 leaves under a core), so a handful of
// nodes, which the every-rank simulation affords, crosses leaf, spine and core.
sim::HardwareSpec three_level_hardware(int nodes) {
  sim::HardwareSpec hw = sim::with_nodes(sim::load_hardware("dgx-h100-cluster", kHardwareDir), nodes);
  hw.network->nodes_per_leaf = 1;
  hw.network->switch_radix = 4;
  hw.network->oversubscription = 2.0;
  hw.network->core_oversubscription = 2.0;
  sim::validate_hardware(hw);
  return hw;
}

std::ostream& operator<<(std::ostream& os, const Case& c) {
  os << c.hardware << " " << c.nodes << " nodes x " << c.gpus_per_node << " GPUs, widths [";
  for (auto w : c.spec.widths) os << w << " ";
  return os << "], batch " << c.batch_per_device << "/rank, buckets " << c.bucket_cap_mb << " MB"
            << (c.three_level ? ", three-level fat-tree" : "");
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
  const sim::HardwareSpec hw =
      c.three_level ? three_level_hardware(c.nodes) : sim::load_hardware(c.hardware, kHardwareDir);
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

// Cases on the three-level fat-tree: 5-6 nodes of 4 GPUs, so ranks span three pods.
[[maybe_unused]] rc::Gen<Case> gen_three_level_case() {
  return rc::gen::exec([] {
    Case c = *gen_case();
    c.hardware = "dgx-h100-cluster";
    c.three_level = true;
    c.gpus_per_node = 4;
    c.nodes = *rc::gen::inRange(5, 7);
    return c;
  });
}

// Cases of 64-256 GPUs (8-32 nodes of 8), on the two-level or the three-level tree, with
// layers up to 4096 wide so that buckets reach 25 MB: at these sizes the collectives are
// timed by the large-N fast paths (estimates, cached rank sets, folded ring steps) that
// 32,768 GPUs rely on, and the every-rank simulation still takes a few seconds.
[[maybe_unused]] rc::Gen<Case> gen_large_case() {
  return rc::gen::exec([] {
    Case c = *gen_case();
    c.hardware = "dgx-h100-cluster";
    c.gpus_per_node = 8;
    c.nodes = *rc::gen::element(8, 16, 32);
    c.three_level = *rc::gen::arbitrary<bool>();
    c.spec.widths = {*rc::gen::inRange(1024, 4097), *rc::gen::inRange(1024, 4097), *rc::gen::inRange(8, 1025)};
    c.bucket_cap_mb = *rc::gen::element(1.0, 25.0);
    return c;
  });
}

using test::run_property;

#ifdef DPT_SYMMETRIC_LARGE_CASES
// Built as sim_symmetric_large_test (label slow): ~10 s of CPU per case.
TEST(SimSymmetricRanks, NodeZeroStandsForEveryNodeAtUpTo256Gpus) {
  const auto result = run_property([] { check_symmetric_equals_full(*gen_large_case()); }, 3);
  std::ostringstream why;
  rc::detail::printResultMessage(result, why);
  EXPECT_TRUE(result.is<rc::detail::SuccessResult>()) << why.str();
}

TEST(SimSymmetricRanks, PlantedBugIsCaughtAtUpTo256Gpus) {
  const ScopedFault planted(Fault::predict_symmetric_node0_only);
  const auto result = run_property([] { check_symmetric_equals_full(*gen_large_case()); }, 3);
  EXPECT_TRUE(result.is<rc::detail::FailureResult>()) << "the planted bug went unnoticed";
}
#else

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

TEST(SimSymmetricRanks, NodeZeroStandsForEveryNodeOnAThreeLevelFatTree) {
  const auto result = run_property([] { check_symmetric_equals_full(*gen_three_level_case()); }, 3);
  std::ostringstream why;
  rc::detail::printResultMessage(result, why);
  EXPECT_TRUE(result.is<rc::detail::SuccessResult>()) << why.str();
}

TEST(SimSymmetricRanks, PlantedBugIsCaughtOnAThreeLevelFatTree) {
  const ScopedFault planted(Fault::predict_symmetric_node0_only);
  const auto result = run_property([] { check_symmetric_equals_full(*gen_three_level_case()); }, 3);
  EXPECT_TRUE(result.is<rc::detail::FailureResult>()) << "the planted bug went unnoticed";
}


// Invariant: in the three-level platform a route between nodes crosses exactly the
// switch levels that separate them: within a leaf no uplink, within a pod the two
// leaves' uplinks, across pods the leaf and pod uplinks on both sides, leaving in one
// direction and entering in the other; a pod uplink carries its leaves' uplink
// bandwidth over the core oversubscription.
TEST(SimSymmetricRanks, ThreeLevelFatTreeRoutesCrossLeafSpineAndCore) {
  sim::HardwareSpec hw = three_level_hardware(12);
  hw.network->nodes_per_leaf = 2;  // 6 leaves > radix 4: three levels, pods of 2 leaves
  sim::validate_hardware(hw);
  const sim::FatTreeShape shape = sim::fat_tree_shape(hw);
  EXPECT_EQ(shape.leaves, 6);
  EXPECT_EQ(shape.leaves_per_pod, 2);
  EXPECT_EQ(shape.pods, 3);
  // 2 nodes x 8 rails of 400 Gb/s (50 GB/s) at 95 %, over the leaf oversubscription of 2.
  const double leaf_up = 2 * 8 * 50e9 * 0.95 / 2.0;
  EXPECT_DOUBLE_EQ(shape.leaf_uplink_bandwidth, leaf_up);
  EXPECT_DOUBLE_EQ(shape.pod_uplink_bandwidth, 2 * leaf_up / 2.0);
  const std::string out = sim::run_in_child_process([&]() {
    auto engine = sim::make_engine();
    auto p = sim::Platform::build(*engine, hw);
    auto names = [&](int node_a, int node_b) {
      return p->route_link_names(p->gpu_host(node_a * 8), p->gpu_host(node_b * 8));
    };
    nlohmann::json j{{"same_leaf", names(0, 1)}, {"same_pod", names(0, 2)}, {"across_pods", names(0, 11)}};
    engine.release();  // the child exits next; SimGrid needs no teardown
    return j.dump();
  });
  const auto j = nlohmann::json::parse(out);
  // Uplinks on a route: link name without its direction -> direction.
  auto uplinks = [](const nlohmann::json& route) {
    std::map<std::string, std::string> found;
    for (const auto& l : route) {
      const std::string name = l.get<std::string>();
      const auto at = name.find(".uplink_");
      if (at != std::string::npos) found[name.substr(0, at)] = name.substr(at + 8);
    }
    return found;
  };
  EXPECT_TRUE(uplinks(j["same_leaf"]).empty()) << j["same_leaf"];
  const auto pod = uplinks(j["same_pod"]);
  ASSERT_EQ(pod.size(), 2u) << j["same_pod"];
  ASSERT_TRUE(pod.count("leaf0") && pod.count("leaf1")) << j["same_pod"];
  EXPECT_NE(pod.at("leaf0"), pod.at("leaf1")) << j["same_pod"];
  const auto far = uplinks(j["across_pods"]);
  ASSERT_EQ(far.size(), 4u) << j["across_pods"];
  ASSERT_TRUE(far.count("leaf0") && far.count("pod0") && far.count("pod2") && far.count("leaf5")) << j["across_pods"];
  EXPECT_EQ(far.at("leaf0"), far.at("pod0"));
  EXPECT_EQ(far.at("leaf5"), far.at("pod2"));
  EXPECT_NE(far.at("leaf0"), far.at("leaf5"));
  // Both ends keep their own NIC links (the route leaves and enters through GPU 0's rail).
  auto has = [](const nlohmann::json& route, const std::string& link) {
    return std::find(route.begin(), route.end(), link) != route.end();
  };
  for (const char* key : {"same_leaf", "same_pod", "across_pods"})
    EXPECT_TRUE(has(j[key], "n0.nic0.ib_UP")) << key << ": " << j[key];
  EXPECT_TRUE(has(j["same_pod"], "n2.nic0.ib_DOWN")) << j["same_pod"];
  EXPECT_TRUE(has(j["across_pods"], "n11.nic0.ib_DOWN")) << j["across_pods"];
}

// Bad fat-tree figures are errors naming the file, line and key.
TEST(SimSymmetricRanks, FatTreeSwitchFiguresAreValidated) {
  std::ifstream in(kHardwareDir + "/dgx-h100-cluster.yaml");
  std::stringstream text;
  text << in.rdbuf();
  const std::string good = text.str();
  ASSERT_NE(good.find("switch_radix: 64"), std::string::npos);
  auto error_of = [&](const std::string& from, const std::string& to) {
    std::string bad = good;
    bad.replace(bad.find(from), from.size(), to);
    try {
      sim::parse_hardware_yaml(bad, "cluster.yaml");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string odd = error_of("switch_radix: 64", "switch_radix: 63");
  EXPECT_NE(odd.find("cluster.yaml:"), std::string::npos) << odd;
  EXPECT_NE(odd.find("switch_radix"), std::string::npos) << odd;
  const std::string small = error_of("switch_radix: 64", "switch_radix: 16");  // 32 nodes per leaf
  EXPECT_NE(small.find("nodes_per_leaf"), std::string::npos) << small;
  const std::string core = error_of("switch_link_rate: 400 Gb/s", "core_oversubscription: 0.5");
  EXPECT_NE(core.find("core_oversubscription"), std::string::npos) << core;
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

#endif  // DPT_SYMMETRIC_LARGE_CASES

}  // namespace
}  // namespace dpt
