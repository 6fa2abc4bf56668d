// Mirrored nodes (PlatformOptions::mirror_nodes): a platform that builds only node 0 and
// the representatives of carried-over routes in SimGrid, and every other node as link ids,
// gives what the fully built platform gives, bit for bit: every link's name, bandwidth,
// latency and place among its node's links; every route between GPUs (link ids, latency,
// bottleneck); and the large-N collectives' times (estimate and replay) and traffic, link
// by link, down to the link-usage report. Shown to fail on a planted bug (a mirrored link
// taking node 0's link one position on as its counterpart).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/collectives/large_n/dispatch.hpp"
#include "sim/collectives/large_n/replay.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_process.hpp"
#include "verify/support/test_files.hpp"

namespace dpt::sim {
namespace {

namespace fs = std::filesystem;
using dpt::test::kHardwareLibrary;

// Everything a prediction reads from the platform, one line per figure, doubles in hex
// (exact). Reads only what a mirrored platform can give: GPUs by index, links by id.
std::string fingerprint(Platform& p) {
  std::ostringstream o;
  const int links = p.link_count();
  o << "links " << links << "\n";
  for (int id = 0; id < links; ++id) {
    const auto [node, position] = p.node_link_position_of_id(id);
    o << fmt::format("link {} {} {:a} {:a} {} {}\n", id, p.link_name(id), p.link_bandwidth(id), p.link_latency(id),
                     node, position);
  }
  const int n = p.gpu_count();
  // Each pair twice, in both orders of look-up: routes carried over before and after
  // their representatives were looked up.
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const int a = pass == 0 ? n - 1 - i : i, b = pass == 0 ? n - 1 - j : j;  // a == b too: no link
        const RouteInfo& r = p.gpu_route(a, b);
        std::vector<int> ids;
        p.gpu_route_link_ids(a, b, ids);
        o << fmt::format("route {} {} {:a} {:a} [{}]{}\n", a, b, r.latency_s, r.bottleneck_bandwidth,
                         fmt::join(r.link_ids, " "), ids == r.link_ids ? "" : " ids differ");
      }
  std::vector<int> gpus(static_cast<size_t>(n));
  for (int g = 0; g < n; ++g) gpus[static_cast<size_t>(g)] = g;
  std::vector<CollectiveAlgorithm> algorithms{CollectiveAlgorithm::ring, CollectiveAlgorithm::tree};
  if (p.has_in_switch_reduction()) algorithms.push_back(CollectiveAlgorithm::nvls_tree);
  CollectiveSettings s;
  for (const auto algorithm : algorithms)
    for (const int channels : {2, p.hardware().gpus_per_node})
      for (const Elements count : {Elements{1} << 18, Elements{1} << 24}) {
        for (const auto op : {CollectiveOp::all_reduce, CollectiveOp::broadcast}) {
          if (op == CollectiveOp::broadcast && algorithm != CollectiveAlgorithm::ring) continue;
          const CollectiveCall call{op, count, 4, op == CollectiveOp::broadcast ? n / 2 + 1 : 0};
          CollectivePlan plan;
          plan.algorithm = algorithm;
          plan.channels = channels;
          plan.formulation = Formulation::large_n;
          for (const auto method : {LargeNMethod::estimate, LargeNMethod::automatic})
            o << fmt::format("time {} {} {} {} {}: {:a}\n", collective_algorithm_name(algorithm), collective_op_name(op),
                             count, channels, static_cast<int>(method),
                             collective_time_large_n(p, gpus, call, plan, s, method));
          std::map<std::string, Bytes> traffic;
          for (const auto& [id, bytes] : large_n_traffic(p, gpus, call, plan, s)) traffic[p.link_name(id)] += bytes;
          for (const auto& [name, bytes] : traffic) o << "traffic " << name << " " << bytes << "\n";
          account_large_n(p, gpus, call, plan, s);
        }
      }
  for (const auto& u : p.link_usage()) o << fmt::format("usage {} {} {:a}\n", u.link, u.bytes, u.busy_s);
  return o.str();
}

struct Built {
  std::string fingerprint;
  int simgrid_links = 0;        // links with a SimGrid object
  std::vector<int> mirrored;    // mirrored nodes
};

Built build_in_child(const HardwareSpec& hw, bool mirror) {
  const auto j = nlohmann::json::parse(run_in_child_process([&]() {
    auto engine = make_engine();
    PlatformOptions options;
    options.mirror_nodes = mirror;
    auto p = Platform::build(*engine, hw, options);
    nlohmann::json out;
    out["fingerprint"] = fingerprint(*p);
    int built = 0;
    for (int id = 0; id < p->link_count(); ++id) built += p->link_by_id(id) != nullptr;
    out["simgrid_links"] = built;
    std::vector<int> mirrored;
    for (int k = 0; k < hw.nodes; ++k)
      if (p->mirrored(k)) mirrored.push_back(k);
    out["mirrored"] = mirrored;
    engine.release();  // the child exits next; SimGrid needs no teardown
    return out.dump();
  }));
  return {j["fingerprint"].get<std::string>(), j["simgrid_links"].get<int>(), j["mirrored"].get<std::vector<int>>()};
}

// The first line where a and b differ ("" when equal).
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string l, m;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(x, l)), more_b = static_cast<bool>(std::getline(y, m));
    if (!more_a && !more_b) return "";
    if (!more_a || !more_b || l != m) return fmt::format("line {}: full '{}', mirrored '{}'", line, l, m);
  }
}

struct Variant {
  std::string label;
  HardwareSpec hw;
  std::vector<int> built;  // the nodes a mirrored platform builds in SimGrid
};

// Every library file with a network on 6 nodes as shipped; the fat-trees also under
// switches of 4 ports on 10 nodes of 2 per leaf (5 leaves in 3 pods: nodes 0, 1, 2 and 4
// built), 11 nodes (the last leaf and pod partial) and 6 nodes of 1 per leaf (nodes 0, 1
// and 2 built); and a single switch of 5 nodes (nodes 0 and 1 built).
std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (const auto& name : list_hardware(kHardwareLibrary)) {
    const HardwareSpec shipped = load_hardware(name, kHardwareLibrary);
    if (!shipped.network) continue;
    HardwareSpec six = with_nodes(shipped, 6);
    std::vector<int> built{0, 1};
    if (six.network->topology == FabricTopology::fat_tree) {
      const FatTreeShape shape = fat_tree_shape(six);
      for (int k : {six.network->nodes_per_leaf, shape.leaves_per_pod * six.network->nodes_per_leaf})
        if (k < 6 && k > 1) built.push_back(k);
    }
    out.push_back({name + " on 6 nodes", six, built});
    if (shipped.network->topology != FabricTopology::fat_tree) continue;
    for (const auto& [nodes, per_leaf, kept] : {std::tuple{10, 2, std::vector<int>{0, 1, 2, 4}},
                                                std::tuple{11, 2, std::vector<int>{0, 1, 2, 4}},
                                                std::tuple{6, 1, std::vector<int>{0, 1, 2}}}) {
      HardwareSpec hw = with_nodes(shipped, nodes);
      hw.network->nodes_per_leaf = per_leaf;
      hw.network->switch_radix = 4;
      validate_hardware(hw);
      out.push_back({fmt::format("{} on {} nodes, {} per leaf, 4-port switches", name, nodes, per_leaf), hw, kept});
    }
    HardwareSpec single = with_nodes(shipped, 5);
    single.network->topology = FabricTopology::single_switch;
    validate_hardware(single);
    out.push_back({name + " on 5 nodes under one switch", single, {0, 1}});
  }
  return out;
}

// Variants whose mirrored platform differs from the full one (or builds other nodes).
int mirrored_differing(bool report) {
  int differing = 0;
  for (const auto& v : variants()) {
    const Built full = build_in_child(v.hw, false);
    Built mirrored;
    try {
      mirrored = build_in_child(v.hw, true);
    } catch (const std::exception& e) {  // a mirrored platform's figures the model rejects
      if (report) ADD_FAILURE() << v.label << ": " << e.what();
      ++differing;
      continue;
    }
    const std::string diff = first_difference(full.fingerprint, mirrored.fingerprint);
    std::vector<int> want_mirrored;
    for (int k = 0; k < v.hw.nodes; ++k)
      if (std::find(v.built.begin(), v.built.end(), k) == v.built.end()) want_mirrored.push_back(k);
    const bool fewer = mirrored.simgrid_links < full.simgrid_links;
    if (report) {
      EXPECT_TRUE(full.mirrored.empty()) << v.label;
      EXPECT_EQ(mirrored.mirrored, want_mirrored) << v.label;
      EXPECT_TRUE(fewer) << v.label << ": " << mirrored.simgrid_links << " SimGrid links mirrored, " << full.simgrid_links
                         << " full";
      EXPECT_EQ(diff, "") << v.label;
    }
    differing += !diff.empty();
  }
  return differing;
}

}  // namespace

// Invariant: a platform with mirrored nodes gives every link's name and figures, every
// route between GPUs and every large-N collective's time and traffic exactly as the fully
// built platform does, and builds only node 0 and the representatives in SimGrid.
TEST(MirroredPlatform, GivesTheFullPlatformsLinksRoutesTimesAndTraffic) { EXPECT_EQ(mirrored_differing(true), 0); }

TEST(MirroredPlatform, PlantedBugShiftedCounterpartIsCaught) {
  const ScopedFault planted(Fault::platform_mirror_counterpart_shifted);
  EXPECT_GT(mirrored_differing(false), 0) << "the planted bug went unnoticed";
}

}  // namespace dpt::sim
