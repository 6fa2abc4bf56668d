// The exact (message-level) formulation of the collectives: every message of the
// schedule is a SimGrid comm on the modelled links. Internal to sim/: the public entry
// point is CollectiveGroup (collectives.hpp).
#pragma once
#include <deque>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include <simgrid/s4u.hpp>

#include "sim/collectives/collectives.hpp"
#include "sim/net/platform.hpp"

namespace dpt::sim {

// Point-to-point connections between ranks (or a rank and the NVSwitch), like NCCL's:
// a sender starts a comm on the modelled route and posts it on the connection; the
// receiver takes it from there and waits for it. Both sides block only on SimGrid
// activities and semaphores.
class ExactTransport {
 public:
  // A connection: call index, stream (which part of which algorithm), source, destination
  // (rank, or -1 for the NVSwitch) and channel.
  using Key = std::tuple<int, int, int, int, int>;

  explicit ExactTransport(Platform& p) : platform_(p) {}
  // `arrives_not_before`: the earliest time the receiver may take the message as arrived
  // (the flow bound SimGrid does not apply itself; 0: none). recv_bounded returns it.
  simgrid::s4u::CommPtr send(const Key& key, simgrid::s4u::Host* from, simgrid::s4u::Host* to, Bytes n,
                             Seconds arrives_not_before = 0);
  // Blocks until the matching send was started; returns its comm (to wait on).
  simgrid::s4u::CommPtr recv(const Key& key);
  // The same with the send's arrives_not_before.
  std::pair<simgrid::s4u::CommPtr, Seconds> recv_bounded(const Key& key);
  // Ring orders for a rank set and channel count, computed once.
  const std::vector<std::vector<int>>& ring_orders_cached(const std::vector<int>& rank_gpus, int channels);
  // Per channel and ring position: how long that hop's flow of `chunk_wire_bytes` takes to
  // drain when one step of every channel loads the links (the large-N phase load,
  // flow_drain_with), i.e. how often a channel's sends can follow one another on a link it
  // shares with the other channels; and whether every hop of every channel is alike (the
  // same route latency and drain: a node on NVSwitch or a PCIe switch), where the channels
  // keep step with one another by symmetry. Computed once per (channels, chunk, bound).
  struct RingHops {
    std::vector<std::vector<Seconds>> drain;
    bool alike = false;
  };
  const RingHops& ring_hops(const std::vector<int>& rank_gpus, int channels, Bytes chunk_wire_bytes,
                            BytesPerSecond cap_bytes_per_s);

 private:
  struct Box {
    std::deque<std::pair<simgrid::s4u::CommPtr, Seconds>> comms;  // with arrives_not_before
    simgrid::s4u::SemaphorePtr posted;
  };
  Box& box(const Key& key);
  Platform& platform_;
  std::map<Key, Box> boxes_;
  std::map<int, std::vector<std::vector<int>>> orders_;  // by channel count
  std::map<std::tuple<int, Bytes, BytesPerSecond>, RingHops> hops_;
};

// Runs call number `call_index` of a group for `rank` message by message; returns when
// the collective finished on this rank. Called from the rank's actor.
void run_exact(ExactTransport& t, Platform& p, const std::vector<int>& rank_gpus, int rank, int call_index,
               const CollectiveCall& call, const CollectivePlan& plan, const CollectiveSettings& settings);

// Intra-node chains (ring order within each node) and the node order, as tree and the
// large-N model use them: chains[v] are the ranks of the v-th node spanned.
std::vector<std::vector<int>> node_chains(const Platform& p, const std::vector<int>& rank_gpus);

// Elements per pipeline piece for this element size.
Elements pipeline_piece_elements(const CollectiveSettings& s, Bytes element_bytes);
// The plan's piece (CollectivePlan::piece_bytes) when it has one, else the settings'; in
// elements of `element_bytes` scaled by `wire_factor` (the large-N formulation counts
// wire bytes).
Elements pipeline_piece_elements(const CollectivePlan& plan, const CollectiveSettings& s, Bytes element_bytes,
                                 double wire_factor = 1.0);

}  // namespace dpt::sim
