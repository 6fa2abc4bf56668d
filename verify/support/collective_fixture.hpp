// Shared by the twin's collective tests (nccl_model, sim_collectives, fluid_sim):
// the repository's hardware library, and one collective started on every rank of
// a CollectiveGroup inside a simulation's setup.
#pragma once
#include <filesystem>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <simgrid/s4u/Actor.hpp>

#include "sim/collectives/collectives.hpp"
#include "sim/net/platform.hpp"

namespace dpt::test {

// scenarios/hardware of the source tree: load_hardware(name, kHardwareLibrary).
inline const std::filesystem::path kHardwareLibrary =
    std::filesystem::path(DPT_SOURCE_DIR) / "scenarios" / "hardware";

// GPUs 0 .. n-1.
inline std::vector<int> first_gpus(int n) {
  std::vector<int> g(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) g[static_cast<size_t>(i)] = i;
  return g;
}

// A group over `gpus` with one actor per rank ("rank<r>" on its GPU) running `call`.
// The group outlives the actors: each holds a reference.
inline std::shared_ptr<sim::CollectiveGroup> start_collective(sim::Platform& p, const std::vector<int>& gpus,
                                                              const CollectiveCall& call,
                                                              const sim::CollectiveSettings& s) {
  auto group = std::make_shared<sim::CollectiveGroup>(p, gpus, s);
  for (int r = 0; r < group->size(); ++r)
    simgrid::s4u::Actor::create(fmt::format("rank{}", r), p.gpu_host(gpus[static_cast<size_t>(r)]),
                                [group, r, call]() { group->run(r, call); });
  return group;
}

}  // namespace dpt::test
