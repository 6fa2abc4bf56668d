// Platform: a HardwareSpec built into SimGrid (S4U, 3.32) in code.
//
// Layout (names are stable; reports and traces use them):
//   hosts    n{k}.gpu{g}       one per GPU (global GPU index = k * gpus_per_node + g)
//            n{k}.cpu{s}       one per CPU socket (host memory, host dispatch actors)
//            n{k}.nvswitch     the NVSwitch as an endpoint (in-switch reduction), when present
//   links    n{k}.gpu{g}.pcie        GPU <-> its PCIe switch or root complex   (SPLITDUPLEX)
//            n{k}.sw{i}.uplink       PCIe switch <-> root complex              (SPLITDUPLEX)
//            n{k}.nic{j}.pcie        NIC <-> its PCIe switch                   (SPLITDUPLEX)
//            n{k}.nic{j}.ib          NIC <-> InfiniBand switch                 (SPLITDUPLEX)
//            n{k}.nvl{a}-{b}         NVLink bundle between GPUs a < b          (SPLITDUPLEX)
//            n{k}.gpu{g}.nvswitch    GPU <-> NVSwitch port                     (SPLITDUPLEX)
//            n{k}.cpu{s}.mem         host memory of a socket                   (SHARED)
//            n{k}.upi                between sockets                           (SPLITDUPLEX)
//            leaf{l}.uplink          fat-tree leaf <-> spine                   (SPLITDUPLEX)
//            pod{p}.uplink           three-level fat-tree pod <-> core         (SPLITDUPLEX)
//   SimGrid names a split-duplex link's directions "<name>_UP" and "<name>_DOWN".
// Each node is a full zone whose routes this code computes (NVLink if the pair has
// links, else NVSwitch, else PCIe peer-to-peer when allowed, else staged through
// host memory); nodes hang off star zones (one InfiniBand switch, or leaves of a
// fat-tree: under one spine level, or, past switch_radix leaves, in pods of spines under
// a core level; see fat_tree_shape), entering and leaving through each GPU's own NIC
// (rail). Link bandwidths are datasheet rates times the efficiency fields.
//
// The network is configured for an exact alpha-beta model: network/model:CM02,
// network/crosstraffic:0, network/TCP-gamma:0 (see sim_process.hpp, which creates
// the Engine). A transfer of n bytes on an otherwise idle route then takes
// sum(latency) + n / min(bandwidth).
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <simgrid/s4u.hpp>

#include "engine/core/units.hpp"
#include "sim/net/hardware.hpp"

namespace dpt::sim {

// Bytes carried by one link direction; busy_s = bytes / bandwidth is the time the
// link would need at full rate, so busy_s / elapsed is its utilisation.
struct LinkUsage {
  std::string link;          // SimGrid link name, e.g. "n0.gpu3.pcie_UP"
  BytesPerSecond bandwidth;  // effective bandwidth of the link (after efficiency)
  Bytes bytes = 0;
  Seconds busy_s = 0;
};

// Bytes per link direction of some traffic pattern (e.g. one large-N collective), by the
// link's Platform::link_id.
using LinkBytes = std::vector<std::pair<int, Bytes>>;

// A route between two hosts as SimGrid resolves it.
struct RouteInfo {
  // nullptr for a link of a mirrored node (PlatformOptions::mirror_nodes): its id is set.
  std::vector<simgrid::s4u::Link*> links;
  std::vector<int> link_ids;             // per link: its Platform::link_id (-1: none), kept with the route
  Seconds latency_s = 0;                 // sum of the links' latencies
  BytesPerSecond bottleneck_bandwidth = 0;  // min of the links' bandwidths (inf when empty)
};

// The switch levels of a fat_tree network, as Platform::build lays them out. Each leaf
// (nodes_per_leaf nodes, every rail) has one uplink to the spine; with switch_radix
// given and more leaves than one spine switch reaches (switch_radix, all its ports
// down), the spines give half their ports to a core level: pods of switch_radix / 2
// leaves, each with one uplink to the core. Otherwise pods == 1 (two levels, no pod zone).
struct FatTreeShape {
  int leaves = 0;
  int leaves_per_pod = 0;
  int pods = 0;
  BytesPerSecond leaf_uplink_bandwidth = 0;  // per direction, after the NIC efficiency
  BytesPerSecond pod_uplink_bandwidth = 0;   // per direction (three levels only)
};
// Throws std::invalid_argument when the spec's network is not a fat_tree.
FatTreeShape fat_tree_shape(const HardwareSpec& hw);

// Dense indices, in first-met order, for the links of routes: by the platform's link ids
// (an array) where the links have one, else by address (a map). What an unordered_map
// from link to index gives, without hashing the common case.
class LinkIndexer {
 public:
  explicit LinkIndexer(const class Platform* p);  // nullptr: every link by address
  // The link's index, and whether this call gave it (first meeting).
  std::pair<int, bool> index(const simgrid::s4u::Link* l);
  // The same for a link whose Platform::link_id is `id` (RouteInfo::link_ids): no look-up
  // in the link itself, which at 32,768 GPUs is a cache miss per incidence.
  std::pair<int, bool> index(const simgrid::s4u::Link* l, int id);
  int size() const { return next_; }

 private:
  const class Platform* p_;
  std::vector<int> by_id_;  // per platform link id: its index or -1
  std::unordered_map<const simgrid::s4u::Link*, int> others_;
  int next_ = 0;
};

struct PlatformOptions {
  // Nodes that no route needs SimGrid for are built without it: every node but node 0 and
  // the representatives that routes between nodes are carried over from (node 1, the first
  // node of leaf 1, the first node of pod 1). Such a mirrored node has no zone, hosts or
  // SimGrid links: its hosts are nullptr (gpu_host, cpu_host, nvswitch_host), its links
  // have ids but no object (link_by_id and node_link give nullptr, RouteInfo::links holds
  // nullptr where link_ids holds the id), and link_name, link_bandwidth and link_latency
  // give what node 0's link at the same position has, under the node's own name. Routes
  // to and from its GPUs come from gpu_route and gpu_route_link_ids. For symmetric-rank
  // predictions, which run actors on node 0 only: at 32,768 GPUs SimGrid's ~262,000 link
  // directions were a third of the prediction's time and most of its memory.
  bool mirror_nodes = false;
};

class Platform {
 public:
  // Builds the platform into `engine`, which must have no platform yet (one per process;
  // see sim_process.hpp). Throws std::invalid_argument if the spec is invalid.
  static std::unique_ptr<Platform> build(simgrid::s4u::Engine& engine, const HardwareSpec& hw,
                                         const PlatformOptions& options = {});

  const HardwareSpec& hardware() const { return hw_; }
  int gpu_count() const { return hw_.gpu_count(); }
  int node_of_gpu(int gpu) const { return gpu / hw_.gpus_per_node; }
  int local_index(int gpu) const { return gpu % hw_.gpus_per_node; }

  // nullptr for a mirrored node's host (PlatformOptions::mirror_nodes).
  simgrid::s4u::Host* gpu_host(int gpu) const;                   // throws std::out_of_range
  simgrid::s4u::Host* cpu_host(int node, int socket = 0) const;  // throws std::out_of_range
  // The socket whose root complex GPU `gpu`'s PCIe path ends in (host memory for its copies).
  simgrid::s4u::Host* cpu_host_of_gpu(int gpu) const;
  // The node's NVSwitch endpoint, or nullptr when the node has no NVSwitch.
  simgrid::s4u::Host* nvswitch_host(int node) const;
  bool has_in_switch_reduction() const;  // NVSwitch present with in_switch_reduction
  // The NIC (0..nics_per_node-1) a node's GPU `local_gpu` crosses nodes through (its rail):
  // a NIC on its own PCIe switch if any, else local_gpu mod NICs; -1 without network.
  int nic_of_gpu(int local_gpu) const;

  // The route from a to b (cached). Empty for a == b. Between two hosts of one node
  // other than node 0 it is node 0's route carried over (see node_links_ below).
  const RouteInfo& route(const simgrid::s4u::Host* a, const simgrid::s4u::Host* b) const;
  // route(gpu_host(gpu_a), gpu_host(gpu_b)) without reading the hosts (at 32,768 GPUs a
  // host's user data is a cache miss per look-up).
  const RouteInfo& gpu_route(int gpu_a, int gpu_b) const;
  // gpu_route(gpu_a, gpu_b).link_ids into `ids`, without keeping the route where it is
  // carried over (traffic shapes cross ~10^6 GPU pairs once each at 32,768 GPUs).
  void gpu_route_link_ids(int gpu_a, int gpu_b, std::vector<int>& ids) const;
  // nullptr for a mirrored node's link.
  const simgrid::s4u::Link* link_by_id(int id) const { return links_.at(static_cast<size_t>(id)); }
  // The link's name, bandwidth and latency by id, a mirrored node's link included
  // (PlatformOptions::mirror_nodes). Throws std::out_of_range for an id not built here.
  std::string link_name(int id) const;
  BytesPerSecond link_bandwidth(int id) const;
  Seconds link_latency(int id) const;
  // Whether node k is mirrored (built without SimGrid).
  bool mirrored(int node) const { return !mirrored_.empty() && mirrored_.at(static_cast<size_t>(node)); }
  // How many routes route() has asked SimGrid for (the rest were carried over).
  std::int64_t simgrid_route_lookups() const { return simgrid_route_lookups_; }
  // SimGrid's own look-up of the route, uncached: what route() must equal.
  RouteInfo simgrid_route(const simgrid::s4u::Host* a, const simgrid::s4u::Host* b) const;
  std::vector<std::string> route_link_names(const simgrid::s4u::Host* a, const simgrid::s4u::Host* b) const;
  // True when GPUs a and b copy directly (NVLink, NVSwitch, or PCIe P2P), false when
  // copies are staged through host memory.
  bool peer_to_peer(int gpu_a, int gpu_b) const;

  // Starts a transfer of n bytes from host a to host b as a SimGrid comm and records
  // the bytes on every link of the route. Call only from inside an actor.
  simgrid::s4u::CommPtr transfer_async(simgrid::s4u::Host* from, simgrid::s4u::Host* to, Bytes n);
  // Blocks the calling actor (in simulated time) until n bytes went from a to b.
  void transfer(simgrid::s4u::Host* from, simgrid::s4u::Host* to, Bytes n);
  // Records traffic that a formulation accounts for without simulating it message by
  // message (the large-N collective model): n bytes on each link of the route.
  void account(const simgrid::s4u::Host* from, const simgrid::s4u::Host* to, Bytes n);
  // Records a precomputed pattern once more; repeating the same pattern (DDP's equal
  // buckets) costs one counter increment, not one update per link.
  void account_pattern(const std::shared_ptr<const LinkBytes>& pattern);

  // Per link direction that carried traffic, sorted by name.
  std::vector<LinkUsage> link_usage() const;

  // Every link direction the platform built has a dense id, 0..link_count()-1, kept in
  // the link's user data: counters and incidences over a 32,768-GPU platform's ~262,000
  // links index arrays by it instead of hashing link addresses.
  int link_count() const { return static_cast<int>(links_.size()); }
  // The link's dense id, or -1 for a link this platform did not build.
  int link_id(const simgrid::s4u::Link* l) const;
  void reset_link_usage();
  // Where link l sits among its node's links (built alike on every node, in the same
  // order): {node, position}, or {-1, -1} for a link outside the nodes (the fabric's) or
  // one this platform did not build. node_link(k, position) is the link there.
  std::pair<int, int> node_link_position(const simgrid::s4u::Link* l) const { return position_of_id(raw_link_id(l)); }
  // The same by link id (a mirrored node's link has no object to pass).
  std::pair<int, int> node_link_position_of_id(int id) const { return position_of_id(id); }
  const simgrid::s4u::Link* node_link(int node, int position) const;
  int links_per_node() const { return node_links_.empty() ? 0 : static_cast<int>(node_links_[0].size()); }

  // Effective rates used to build the links (datasheet x efficiency), per direction.
  BytesPerSecond pcie_link_bandwidth() const;
  BytesPerSecond nvlink_link_bandwidth() const;   // one link; 0 without NVLink
  BytesPerSecond nvswitch_port_bandwidth() const; // links_per_gpu links; 0 without NVSwitch
  BytesPerSecond nic_bandwidth() const;           // one NIC; 0 without network

 private:
  explicit Platform(HardwareSpec hw) : hw_(std::move(hw)) {}
  friend struct PlatformBuilder;

  HardwareSpec hw_;
  std::vector<const simgrid::s4u::Link*> links_;             // by dense id (see link_id); nullptr: a mirrored node's
  void register_link(simgrid::s4u::Link* l);                  // gives it the next id
  std::vector<char> mirrored_;                                // by node (empty: none mirrored)
  // The link with object that `id` stands for: itself, or node 0's at a mirrored link's position.
  const simgrid::s4u::Link* link_or_counterpart(int id) const;
  int raw_link_id(const simgrid::s4u::Link* l) const;         // link_id without planted faults
  std::vector<simgrid::s4u::Host*> gpu_hosts_;               // by global GPU index
  std::vector<std::vector<simgrid::s4u::Host*>> cpu_hosts_;  // [node][socket]
  std::vector<int> gpu_switch_;                              // by local GPU: PCIe switch index or -1
  std::vector<simgrid::s4u::Host*> nvswitch_hosts_;          // by node (nullptr if none)
  std::vector<simgrid::s4u::NetZone*> node_zones_;           // by node
  std::vector<simgrid::kernel::routing::NetPoint*> node_gateways_;  // by node: its InfiniBand router
  mutable std::unordered_map<std::int64_t, RouteInfo> cross_routes_;  // between nodes, by host indices
  // Every node is built alike (build_node): per node its hosts and link directions in
  // creation order, so a route between two hosts of node k > 0 is node 0's route between
  // the hosts at the same positions with each link replaced by node k's at the same
  // position: the same latencies summed in the same order (SimGrid's look-up cost
  // microseconds per pair, and a 32,768-GPU prediction looks up ~10^5 pairs).
  std::vector<std::vector<simgrid::s4u::Host*>> node_hosts_;
  std::vector<std::vector<simgrid::s4u::Link*>> node_links_;
  int hosts_per_node_ = 0;
  // A node host's index k * hosts_per_node_ + position, kept in the host's user data (as
  // index + 1); -1 for a host outside the nodes.
  int host_index(const simgrid::s4u::Host* h) const;
  // route() on the hosts' indices (host_index; -1 outside the nodes).
  const RouteInfo& route_indexed(int ia, int ib, const simgrid::s4u::Host* a, const simgrid::s4u::Host* b) const;
  std::optional<RouteInfo> translated_route(int node, int slot_a, int slot_b) const;
  // Routes within a node, by [node][position a][position b] (a 32,768-GPU prediction
  // looks up millions; hashing host pairs was most of the look-up), kept in a deque so
  // that references stay valid.
  // Across nodes: the fabric's switch levels (fat_tree only; see fat_tree_shape) and their
  // uplinks' directions {up, down}, by leaf and by pod, so that a route between GPUs of
  // nodes i and j is a representative route (from node 0 to a node standing in the same
  // relation to it: same leaf, same pod, other pod) with node 0's links replaced by node
  // i's, the other node's by node j's, and each uplink by the one at the same place above
  // i or j: the same latencies summed in the same order (SimGrid's look-up was a third of
  // a 32,768-GPU prediction's route time).
  int nodes_per_leaf_ = 0, leaves_per_pod_ = 0;  // 0: one switch (single_switch)
  std::vector<std::array<simgrid::s4u::Link*, 2>> leaf_uplinks_, pod_uplinks_;
  std::optional<RouteInfo> translated_cross_route(int node_a, int gpu_a, int node_b, int gpu_b) const;
  // Filled at the end of build (index_node_links; a mirrored node's base by mirror_node):
  std::vector<int> node_link_position_;  // by link id: node * links_per_node + position, or -1
  std::vector<int> node_link_base_;      // by node: its first link's id where its links' ids run on, else -1
  void index_node_links();
  std::pair<int, int> position_of_id(int id) const;  // node_link_position by raw id
  mutable std::int64_t simgrid_route_lookups_ = 0;
  // Where each link of a carried-over route's base has its counterpart: place 0 node a's
  // link at `position`, 1 node b's, 2 (3) the uplink of node a's (b's) leaf in direction
  // `dir`, 4 (5) of its pod; -1 the base's own link kept (planted faults only). Worked out
  // once per base, so that carrying a route over touches no link object (and a planted
  // fault's state is read then: set it before the platform's first look-up).
  struct CarriedLink {
    std::int8_t place = 0;
    std::int8_t dir = 0;
    int position = 0;
  };
  using Carry = std::optional<std::vector<CarriedLink>>;  // none: a link without counterpart
  mutable std::vector<std::optional<Carry>> node_carry_;   // by node 0's position a * hosts_per_node_ + b
  mutable std::vector<std::optional<Carry>> cross_carry_;  // by (relation * gpus_per_node + GPU a) * gpus_per_node + GPU b
  RouteInfo carry_over(const RouteInfo& base, const std::vector<CarriedLink>& carry, int node_a, int node_b) const;
  std::pair<simgrid::s4u::Link*, int> carried_link(const RouteInfo& base, size_t j, const CarriedLink& c, int node_a,
                                                   int node_b) const;  // base's link j's counterpart and its id
  // The base route and its carry for node 0's positions (GPUs within a node) or for GPUs
  // across nodes; a null carry where none applies.
  std::pair<const RouteInfo*, const std::vector<CarriedLink>*> carry_within(int slot_a, int slot_b) const;
  std::pair<const RouteInfo*, const std::vector<CarriedLink>*> carry_across(int node_a, int gpu_a, int node_b,
                                                                           int gpu_b) const;
  RouteInfo with_link_ids(RouteInfo r) const;
  mutable std::vector<const RouteInfo*> node_routes_;
  mutable std::deque<RouteInfo> node_route_store_;
  std::vector<Bytes> link_bytes_;  // by link id (transfers and account)
  std::map<const LinkBytes*, std::pair<std::shared_ptr<const LinkBytes>, std::int64_t>> patterns_;  // pattern, times
};

}  // namespace dpt::sim
