// The large-N formulation's fluid simulation (sim/collectives/large_n/fluid_sim.hpp)
// against SimGrid's own solver: the same transfers, with the same dependencies, on the
// same links of a platform built from a hardware file. SimGrid runs one comm per
// transfer (network/model:CM02 as make_engine configures it); the fluid simulation
// runs on the routes alone. Every transfer must end at the same time in both.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Semaphore.hpp>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/large_n/fluid_sim.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_process.hpp"
#include "verify/support/collective_fixture.hpp"
#include "verify/support/rc_cases.hpp"

namespace sg4 = simgrid::s4u;
using namespace dpt;
using namespace dpt::sim;

namespace {

using test::kHardwareLibrary;

// One transfer of a random DAG: endpoints are GPUs or their host memory (so routes mix
// NVLink/NVSwitch, PCIe and InfiniBand, with different latencies and hence different
// max-min weights), `after` the earlier transfers it waits for.
struct Transfer {
  int from = 0, to = 0;      // GPU index; negative: the host memory of GPU -1 - index
  Bytes bytes = 0;
  std::vector<int> after;
};

sg4::Host* endpoint(const Platform& p, int e) { return e >= 0 ? p.gpu_host(e) : p.cpu_host_of_gpu(-1 - e); }

// End times of every transfer from SimGrid (one comm each, started when the transfers it
// waits for ended) and from the fluid simulation, in one child process.
std::pair<std::vector<Seconds>, std::vector<Seconds>> simulate_both(const HardwareSpec& hw,
                                                                     const std::vector<Transfer>& ts) {
  const int n = static_cast<int>(ts.size());
  auto ends = std::make_shared<std::vector<Seconds>>(n, -1.0);
  const std::string out = run_simulation(
      hw,
      [&](Platform& p) {
        // done[i] is released once when transfer i ended; each waiter takes it and puts
        // it back at once, so every waiter passes at that same simulated time.
        std::vector<sg4::SemaphorePtr> done(n);
        for (int i = 0; i < n; ++i) done[i] = sg4::Semaphore::create(0);
        for (int i = 0; i < n; ++i) {
          const Transfer t = ts[i];
          sg4::Actor::create(fmt::format("t{}", i), endpoint(p, t.from), [&p, t, i, done, ends]() {
            for (int d : t.after) {
              done[d]->acquire();
              done[d]->release();
            }
            p.transfer_async(endpoint(p, t.from), endpoint(p, t.to), t.bytes)->wait();
            (*ends)[i] = sg4::Engine::get_clock();
            done[i]->release();
          });
        }
      },
      [&](Platform& p) {
        std::vector<FluidTransfer> fts(n);
        for (int i = 0; i < n; ++i) {
          fts[i].route = &p.route(endpoint(p, ts[i].from), endpoint(p, ts[i].to));
          fts[i].bytes = static_cast<double>(ts[i].bytes);
          for (int d : ts[i].after) {
            fts[d].then.push_back(i);
            ++fts[i].waits;
          }
        }
        nlohmann::json j;
        j["simgrid"] = *ends;
        j["fluid"] = fluid_sim_end_times(fts);
        return j.dump();
      });
  const auto j = nlohmann::json::parse(out);
  return {j["simgrid"].get<std::vector<Seconds>>(), j["fluid"].get<std::vector<Seconds>>()};
}

// Random DAGs of 1..40 transfers among `gpus` GPUs (and their host memory), 1 KiB
// .. 256 MiB each, each waiting for up to two earlier transfers.
rc::Gen<std::vector<Transfer>> random_dag(int gpus) {
  return rc::gen::exec([gpus]() {
    const int n = *rc::gen::inRange(1, 41);
    std::vector<Transfer> ts(n);
    for (int i = 0; i < n; ++i) {
      Transfer& t = ts[i];
      // A GPU to another GPU or to some GPU's host memory, or host memory to a GPU.
      const int a = *rc::gen::inRange(0, gpus);
      const int b = (a + 1 + *rc::gen::inRange(0, gpus - 1)) % gpus;
      const int kind = *rc::gen::inRange(0, 4);
      t.from = kind == 2 ? -1 - a : a;
      t.to = kind == 3 ? -1 - b : b;
      t.bytes = static_cast<Bytes>(std::ldexp(1.0, *rc::gen::inRange(10, 29)) * *rc::gen::inRange(100, 200) / 100);
      const int deps = i == 0 ? 0 : *rc::gen::inRange(0, 3);
      for (int k = 0; k < deps; ++k) {
        const int d = *rc::gen::inRange(0, i);
        if (std::find(t.after.begin(), t.after.end(), d) == t.after.end()) t.after.push_back(d);
      }
    }
    return ts;
  });
}

// Invariant: every transfer's end time in the fluid simulation equals SimGrid's within
// kRelTol relative (plus 1 ps, SimGrid's time resolution here). Both apply the same rule;
// what differs is floating-point order and the grouping of near-simultaneous events
// (SimGrid resolves 1e-12 s as make_engine sets surf/precision, the fluid simulation
// takes events 1e-9 relative apart together).
constexpr double kRelTol = 1e-9;
constexpr Seconds kAbsTol_s = 1e-12;

void fluid_matches_simgrid(const HardwareSpec& hw) {
  const auto ts = *random_dag(hw.gpu_count());
  const auto [sg, fl] = simulate_both(hw, ts);
  RC_ASSERT(sg.size() == ts.size());
  RC_ASSERT(fl.size() == ts.size());
  double worst = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    RC_ASSERT(sg[i] > 0);
    const double err = std::abs(fl[i] - sg[i]);
    worst = std::max(worst, err / sg[i]);
    if (err > kRelTol * sg[i] + kAbsTol_s)
      RC_FAIL(fmt::format("{} transfers on {}: transfer {} ends at {} s in SimGrid, {} s in the fluid simulation",
                          ts.size(), hw.name, i, sg[i], fl[i]));
  }
  if (std::getenv("DPT_PRINT_ERR")) std::fprintf(stderr, "FLUID %s n=%zu worst %.3e\n", hw.name.c_str(), ts.size(), worst);
}

}  // namespace

TEST(FluidSim, EndTimesEqualSimGridsOnAClusterOfTwoNodes) {
  const HardwareSpec hw = with_nodes(load_hardware("dgx-h100-cluster", kHardwareLibrary), 2);
  DPT_EXPECT_PROPERTY("fluid simulation = SimGrid CM02, random DAGs on 2 DGX H100 nodes", 300,
                      [&]() { fluid_matches_simgrid(hw); });
}

TEST(FluidSim, EndTimesEqualSimGridsOnPcieWithoutPeerToPeer) {
  const HardwareSpec hw = load_hardware("desktop-2gpu-pcie-nop2p", kHardwareLibrary);
  DPT_EXPECT_PROPERTY("fluid simulation = SimGrid CM02, random DAGs on 2 PCIe GPUs without P2P", 100,
                      [&]() { fluid_matches_simgrid(hw); });
}

// Planted fault: max-min shares that ignore CM02's 1/latency weights. Flows of different
// route latencies then split a saturated link evenly, and the property must notice.
TEST(FluidSim, PlantedUnweightedSharingIsCaught) {
  const HardwareSpec hw = with_nodes(load_hardware("dgx-h100-cluster", kHardwareLibrary), 2);
  ScopedFault fault(Fault::fluid_sim_unweighted_sharing);
  DPT_EXPECT_COUNTEREXAMPLE("fluid simulation with unweighted max-min sharing", 300,
                            [&]() { fluid_matches_simgrid(hw); });
}
