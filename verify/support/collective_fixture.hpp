// Shared by the twin's collective tests (nccl_model, sim_collectives, fluid_sim):
// the repository's hardware library, and one collective started on every rank of
// a CollectiveGroup inside a simulation's setup.
#pragma once
#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <simgrid/s4u/Actor.hpp>

#include "sim/collectives/collectives.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"
#include "verify/support/test_files.hpp"

namespace dpt::test {

// A `bytes` all-reduce of f32 elements (at least one).
inline CollectiveCall all_reduce_bytes(Bytes bytes) {
  CollectiveCall c;
  c.op = CollectiveOp::all_reduce;
  c.element_bytes = 4;
  c.count = std::max<Elements>(1, bytes / 4);
  return c;
}

// The library's dgx-h100-cluster with `nodes` nodes.
inline sim::HardwareSpec h100_nodes(int nodes) {
  return sim::with_nodes(sim::load_hardware("dgx-h100-cluster", kHardwareLibrary), nodes);
}

// The first `per_node` GPUs of each of `nodes` nodes of an 8-GPU-per-node platform.
inline std::vector<int> ranks_of(int nodes, int per_node) {
  std::vector<int> gpus;
  for (int v = 0; v < nodes; ++v)
    for (int g = 0; g < per_node; ++g) gpus.push_back(v * 8 + g);
  return gpus;
}

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
