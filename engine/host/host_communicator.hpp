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

// Variants of the ring with a planted bug, so tests can show that their properties
// catch a broken collective. Never used outside tests.
enum class RingVariant {
  correct,
  skip_last_all_gather_step,  // the all-gather phase omits its last step: one chunk stays partial
};
std::vector<std::unique_ptr<Communicator>> make_host_ring_communicators(int world_size, RingVariant variant);

}  // namespace dpt
