// Host communicators: a real ring all-reduce (reduce-scatter then all-gather) over
// shared memory between rank threads, plus broadcast, reduce, all_gather,
// reduce_scatter and barrier. Every collective honours its timeout and fails on
// every rank with a CollectiveError, never a hang.
#pragma once
#include <memory>
#include <vector>

#include "engine/core/communicator.hpp"

namespace dpt {

// `world_size` communicators sharing one group; rank r is element r.
std::vector<std::unique_ptr<Communicator>> make_host_ring_communicators(int world_size);

}  // namespace dpt
