// Building the SimGrid platform from a HardwareSpec: see platform.hpp for the layout.
#include "sim/net/platform.hpp"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>

#include "engine/core/fault_injection.hpp"

namespace sg4 = simgrid::s4u;
using Dir = sg4::LinkInRoute::Direction;

namespace dpt::sim {

namespace {

using Path = std::vector<sg4::LinkInRoute>;

void append(Path& p, const Path& q) { p.insert(p.end(), q.begin(), q.end()); }

// Everything one node's routing needs, built once per node.
struct NodeLinks {
  std::vector<sg4::Link*> gpu_pcie;      // by local GPU (split duplex: UP = towards the root)
  std::vector<int> gpu_switch;           // switch index or -1 (directly on socket 0's root complex)
  std::vector<sg4::Link*> sw_uplink;     // by switch
  std::vector<sg4::Link*> nic_pcie;      // by NIC
  std::vector<int> nic_switch;           // switch index or -1
  std::vector<sg4::Link*> nic_ib;        // by NIC (UP = towards the fabric)
  std::vector<sg4::Link*> gpu_nvswitch;  // by local GPU (UP = towards the switch), empty without NVSwitch
  std::vector<sg4::Link*> mem;           // by socket (SHARED)
  sg4::Link* upi = nullptr;              // between sockets 0 and 1 (UP = 0 -> 1)
  std::map<std::pair<int, int>, sg4::Link*> nvl;  // (a, b) with a < b; UP = a -> b
};

// SimGrid 3.32 checks every new host's and link's name against every zone reachable from
// the root (a recursive search), and sealing a zone scans every reachable host: with one
// zone per node, building 4,096 nodes took minutes. A zone built detached (no parent yet,
// the parent's models copied so it can create hosts and links) is invisible to both
// scans; it is attached (set_parent) once its content exists, and sealed while its own
// parent is still detached, so each scan sees only the few zones already attached.
sg4::NetZone* detached_zone(sg4::NetZone* zone, const sg4::NetZone* models_from) {
  auto* impl = zone->get_impl();
  const auto* from = models_from->get_impl();
  impl->set_network_model(from->get_network_model());
  impl->set_cpu_pm_model(from->get_cpu_pm_model());
  impl->set_cpu_vm_model(from->get_cpu_vm_model());
  impl->set_disk_model(from->get_disk_model());
  impl->set_host_model(from->get_host_model());
  return zone;
}


}  // namespace

// Computes the node-local routes; a friend of Platform so it can fill its tables.
struct PlatformBuilder {
  Platform& pf;
  const HardwareSpec& hw;

  int switch_socket(int sw) const { return sw < 0 ? 0 : hw.pcie.switches[sw].socket; }

  // GPU g's path up to its socket's root complex, and the reverse.
  Path gpu_up(const NodeLinks& L, int g) const {
    Path p{{L.gpu_pcie[g], Dir::UP}};
    if (L.gpu_switch[g] >= 0) p.emplace_back(L.sw_uplink[L.gpu_switch[g]], Dir::UP);
    return p;
  }
  Path gpu_down(const NodeLinks& L, int g) const {
    Path p;
    if (L.gpu_switch[g] >= 0) p.emplace_back(L.sw_uplink[L.gpu_switch[g]], Dir::DOWN);
    p.emplace_back(L.gpu_pcie[g], Dir::DOWN);
    return p;
  }
  Path nic_up(const NodeLinks& L, int n) const {
    Path p{{L.nic_pcie[n], Dir::UP}};
    if (L.nic_switch[n] >= 0) p.emplace_back(L.sw_uplink[L.nic_switch[n]], Dir::UP);
    return p;
  }
  Path nic_down(const NodeLinks& L, int n) const {
    Path p;
    if (L.nic_switch[n] >= 0) p.emplace_back(L.sw_uplink[L.nic_switch[n]], Dir::DOWN);
    p.emplace_back(L.nic_pcie[n], Dir::DOWN);
    return p;
  }
  // Crossing between sockets (empty when the same socket).
  Path socket_cross(const NodeLinks& L, int from, int to) const {
    if (from == to) return {};
    return {{L.upi, from < to ? Dir::UP : Dir::DOWN}};
  }

  int nic_of_gpu(int g) const { return pf.nic_of_gpu(g); }

  // Peer-to-peer is possible over PCIe when allowed and both GPUs share a root complex.
  bool pcie_p2p(const NodeLinks& L, int a, int b) const {
    return hw.pcie.peer_to_peer && switch_socket(L.gpu_switch[a]) == switch_socket(L.gpu_switch[b]);
  }

  Path gpu_to_gpu(const NodeLinks& L, int a, int b) const {
    // NCCL_P2P_DISABLE=1 (HardwareSpec::nccl_p2p_disable): NCCL diverts every GPU pair
    // through the CPU, so the node's GPU-to-GPU flows take the staged route below.
    const bool links = !hw.nccl_p2p_disable || fault_active(Fault::nccl_p2p_disable_ignored);
    if (links && hw.nvlink && hw.nvlink->links_between(a, b) > 0) {
      sg4::Link* l = L.nvl.at({std::min(a, b), std::max(a, b)});
      return {{l, a < b ? Dir::UP : Dir::DOWN}};
    }
    if (links && hw.nvswitch) return {{L.gpu_nvswitch[a], Dir::UP}, {L.gpu_nvswitch[b], Dir::DOWN}};
    const int sa = L.gpu_switch[a], sb = L.gpu_switch[b];
    const int ka = switch_socket(sa), kb = switch_socket(sb);
    if (links && pcie_p2p(L, a, b)) {
      if (sa >= 0 && sa == sb) return {{L.gpu_pcie[a], Dir::UP}, {L.gpu_pcie[b], Dir::DOWN}};
      Path p = gpu_up(L, a);
      append(p, gpu_down(L, b));
      return p;
    }
    // Staged through host memory: the data is written to and read from pinned host memory.
    Path p = gpu_up(L, a);
    p.emplace_back(L.mem[ka], Dir::NONE);
    append(p, socket_cross(L, ka, kb));
    if (kb != ka) p.emplace_back(L.mem[kb], Dir::NONE);
    append(p, gpu_down(L, b));
    return p;
  }

  // A node's endpoints: GPU hosts (computing at the f32 peak: the device model charges
  // kernels itself), one host per CPU socket, the NVSwitch endpoint, the InfiniBand router.
  struct NodeHosts {
    std::vector<sg4::Host*> gpus, cpus;
    sg4::Host* nvs = nullptr;
    simgrid::kernel::routing::NetPoint* ib = nullptr;
  };
  NodeHosts create_node_hosts(sg4::NetZone* zone, const std::string& pre, int k) {
    NodeHosts h;
    const int n = hw.gpus_per_node;
    h.gpus.resize(n), h.cpus.resize(hw.host.sockets);
    for (int g = 0; g < n; ++g) h.gpus[g] = zone->create_host(pre + fmt::format("gpu{}", g), hw.gpu.peak_flops.f32)->seal();
    const int cores_per_socket = std::max(1, hw.host.cores / hw.host.sockets);
    for (int s = 0; s < hw.host.sockets; ++s)
      h.cpus[s] = zone->create_host(pre + fmt::format("cpu{}", s), 1e9)->set_core_count(cores_per_socket)->seal();
    if (hw.nvswitch) h.nvs = zone->create_host(pre + "nvswitch", 1e9)->seal();
    std::vector<sg4::Host*>& hosts = pf.node_hosts_[k];
    hosts = h.gpus;
    hosts.insert(hosts.end(), h.cpus.begin(), h.cpus.end());
    if (h.nvs) hosts.push_back(h.nvs);
    pf.hosts_per_node_ = static_cast<int>(hosts.size());  // the same on every node
    for (size_t i = 0; i < hosts.size(); ++i)
      hosts[i]->set_data(reinterpret_cast<void*>(static_cast<std::uintptr_t>(k * hosts.size() + i + 1)));
    if (hw.network) h.ib = zone->create_router(pre + "ib");
    return h;
  }

  // A node's links, their directions listed in creation order in node_links_[k] (the
  // order is the same on every node: translated_route relies on it).
  NodeLinks create_node_links(sg4::NetZone* zone, const std::string& pre, int k) {
    const int n = hw.gpus_per_node;
    const double eff_pcie = hw.efficiency.pcie, eff_p2p = hw.efficiency.p2p;
    NodeLinks L;
    L.gpu_switch = pf.gpu_switch_;
    const BytesPerSecond lane = pcie_lane_bandwidth(hw.pcie.generation);
    const BytesPerSecond pcie_bw = lane * hw.pcie.lanes * eff_pcie;
    std::vector<sg4::Link*>& links = pf.node_links_[k];
    auto duplex = [&](const std::string& name, BytesPerSecond bw, Seconds lat) -> sg4::Link* {
      sg4::SplitDuplexLink* d = zone->create_split_duplex_link(pre + name, bw);
      sg4::Link* sealed = d->set_latency(lat)->seal();
      links.push_back(d->get_link_up());
      links.push_back(d->get_link_down());
      pf.register_link(d->get_link_up());
      pf.register_link(d->get_link_down());
      return sealed;
    };
    for (int g = 0; g < n; ++g) L.gpu_pcie.push_back(duplex(fmt::format("gpu{}.pcie", g), pcie_bw, hw.pcie.latency_s));
    for (size_t s = 0; s < hw.pcie.switches.size(); ++s)
      L.sw_uplink.push_back(
          duplex(fmt::format("sw{}.uplink", s), lane * hw.pcie.switches[s].uplink_lanes * eff_pcie, 0.0));
    for (int s = 0; s < hw.host.sockets; ++s) {
      L.mem.push_back(zone->create_link(pre + fmt::format("cpu{}.mem", s), hw.host.memory_bandwidth)
                          ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
                          ->seal());
      links.push_back(L.mem.back());
      pf.register_link(L.mem.back());
    }
    if (hw.host.sockets > 1) L.upi = duplex("upi", hw.host.inter_socket_bandwidth, 0.0);
    if (hw.nvswitch)
      for (int g = 0; g < n; ++g)
        L.gpu_nvswitch.push_back(duplex(fmt::format("gpu{}.nvswitch", g),
                                        hw.nvswitch->links_per_gpu * hw.nvswitch->link_bandwidth * eff_p2p,
                                        hw.nvswitch->latency_s));
    if (hw.nvlink)
      for (const auto& p : hw.nvlink->pairs) {
        const int a = std::min(p.a, p.b), b = std::max(p.a, p.b);
        L.nvl[{a, b}] = duplex(fmt::format("nvl{}-{}", a, b), p.links * hw.nvlink->link_bandwidth * eff_p2p,
                               hw.nvlink->latency_s);
      }
    if (hw.network) {
      const int nics = hw.network->nics_per_node;
      L.nic_switch.assign(nics, -1);
      for (size_t s = 0; s < hw.pcie.switches.size(); ++s)
        for (int nic : hw.pcie.switches[s].nics) L.nic_switch[nic] = static_cast<int>(s);
      for (int j = 0; j < nics; ++j) {
        L.nic_pcie.push_back(duplex(fmt::format("nic{}.pcie", j), pcie_bw, hw.pcie.latency_s));
        L.nic_ib.push_back(duplex(fmt::format("nic{}.ib", j), hw.network->nic_bandwidth * hw.efficiency.nic,
                                  hw.network->latency_s / 2));
      }
    }
    return L;
  }

  // GPU g's paths to the fabric through its NIC (rail) and back: straight through a
  // shared PCIe switch with GPUDirect RDMA, else up to the root complex, and through host
  // memory without GPUDirect RDMA (planted fault net_gdr_ignored: as if it were there).
  std::pair<Path, Path> gpu_fabric_paths(const NodeLinks& L, int g) const {
    const int nic = nic_of_gpu(g);
    const int gs = switch_socket(L.gpu_switch[g]), ns = switch_socket(L.nic_switch[nic]);
    Path out, in;
    const bool staged = !hw.network->gpu_direct_rdma && !fault_active(Fault::net_gdr_ignored);
    if (!staged && L.gpu_switch[g] >= 0 && L.gpu_switch[g] == L.nic_switch[nic]) {
      out = {{L.gpu_pcie[g], Dir::UP}, {L.nic_pcie[nic], Dir::DOWN}};
      in = {{L.nic_pcie[nic], Dir::UP}, {L.gpu_pcie[g], Dir::DOWN}};
    } else {
      out = gpu_up(L, g);
      append(out, socket_cross(L, gs, ns));
      if (staged) out.emplace_back(L.mem[ns], Dir::NONE);
      append(out, nic_down(L, nic));
      in = nic_up(L, nic);
      if (staged) in.emplace_back(L.mem[ns], Dir::NONE);
      append(in, socket_cross(L, ns, gs));
      append(in, gpu_down(L, g));
    }
    out.emplace_back(L.nic_ib[nic], Dir::UP);
    in.insert(in.begin(), sg4::LinkInRoute(L.nic_ib[nic], Dir::DOWN));
    return {out, in};
  }

  // The node's routes, one direction at a time (they are not symmetric link lists).
  void add_node_routes(sg4::NetZone* zone, const NodeHosts& h, const NodeLinks& L) const {
    const int n = hw.gpus_per_node;
    auto route = [&](simgrid::kernel::routing::NetPoint* a, simgrid::kernel::routing::NetPoint* b, const Path& p) {
      zone->add_route(a, b, nullptr, nullptr, p, false);
    };
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b) route(h.gpus[a]->get_netpoint(), h.gpus[b]->get_netpoint(), gpu_to_gpu(L, a, b));
    for (int g = 0; g < n; ++g) {
      const int gs = switch_socket(L.gpu_switch[g]);
      for (int s = 0; s < hw.host.sockets; ++s) {
        Path up = gpu_up(L, g);
        append(up, socket_cross(L, gs, s));
        up.emplace_back(L.mem[s], Dir::NONE);
        route(h.gpus[g]->get_netpoint(), h.cpus[s]->get_netpoint(), up);
        Path down{{L.mem[s], Dir::NONE}};
        append(down, socket_cross(L, s, gs));
        append(down, gpu_down(L, g));
        route(h.cpus[s]->get_netpoint(), h.gpus[g]->get_netpoint(), down);
      }
      if (h.nvs) {
        route(h.gpus[g]->get_netpoint(), h.nvs->get_netpoint(), {{L.gpu_nvswitch[g], Dir::UP}});
        route(h.nvs->get_netpoint(), h.gpus[g]->get_netpoint(), {{L.gpu_nvswitch[g], Dir::DOWN}});
      }
      if (h.ib) {
        const auto [out, in] = gpu_fabric_paths(L, g);
        route(h.gpus[g]->get_netpoint(), h.ib, out);
        route(h.ib, h.gpus[g]->get_netpoint(), in);
      }
    }
    for (int s = 0; s < hw.host.sockets; ++s) {
      for (int t = 0; t < hw.host.sockets; ++t)
        if (s != t) route(h.cpus[s]->get_netpoint(), h.cpus[t]->get_netpoint(), socket_cross(L, s, t));
      if (h.ib) {
        // Host memory to the fabric through NIC 0 (host-staged inter-node traffic).
        const int ns = switch_socket(L.nic_switch[0]);
        Path out{{L.mem[s], Dir::NONE}};
        append(out, socket_cross(L, s, ns));
        append(out, nic_down(L, 0));
        out.emplace_back(L.nic_ib[0], Dir::UP);
        Path in{{L.nic_ib[0], Dir::DOWN}};
        append(in, nic_up(L, 0));
        append(in, socket_cross(L, ns, s));
        in.emplace_back(L.mem[s], Dir::NONE);
        route(h.cpus[s]->get_netpoint(), h.ib, out);
        route(h.ib, h.cpus[s]->get_netpoint(), in);
      }
    }
  }

  // A switch group (leaf or pod) as a star zone whose router reaches the level above over
  // one uplink: leaving the group a route takes the uplink's DOWN direction (centre to
  // router), entering it UP. The router sits in a zone of its own inside the group:
  // SimGrid resolves a route from a host in a child zone to a router placed directly in
  // an ancestor zone as if the host were that zone's own member (it looked up whichever
  // member shared the host's index, and dropped the node's NIC links).
  std::pair<sg4::NetZone*, simgrid::kernel::routing::NetPoint*> switch_group(const sg4::NetZone* root,
                                                                            const std::string& name,
                                                                            BytesPerSecond up_bw,
                                                                            std::vector<std::array<sg4::Link*, 2>>& uplinks) {
    sg4::NetZone* z = detached_zone(sg4::create_star_zone(name), root);
    sg4::NetZone* sw = detached_zone(sg4::create_empty_zone(name + ".switch"), root);
    auto* router = sw->create_router(name + ".router");
    sw->set_parent(z);
    sw->seal();
    sg4::SplitDuplexLink* duplex = z->create_split_duplex_link(name + ".uplink", up_bw);
    sg4::Link* uplink = duplex->set_latency(hw.network->latency_s / 2)->seal();
    pf.register_link(duplex->get_link_up());
    pf.register_link(duplex->get_link_down());
    uplinks.push_back({duplex->get_link_up(), duplex->get_link_down()});
    z->add_route(sw->get_netpoint(), nullptr, router, nullptr, {{uplink, Dir::UP}}, true);
    return {z, router};
  }

  // A mirrored node (PlatformOptions::mirror_nodes): its link directions get their ids,
  // in the order node 0's were created, and nothing else is built.
  void mirror_node(int k) {
    const size_t per_node = pf.node_links_[0].size();
    pf.node_links_[k].assign(per_node, nullptr);
    pf.node_hosts_[k].assign(static_cast<size_t>(pf.hosts_per_node_), nullptr);
    pf.cpu_hosts_[k].assign(static_cast<size_t>(hw.host.sockets), nullptr);
    pf.node_link_base_[k] = static_cast<int>(pf.links_.size());
    for (size_t i = 0; i < per_node; ++i) pf.register_link(nullptr);
  }

  // Builds node k's zone, detached (see detached_zone) when `models_from` is given, the
  // platform's only zone otherwise. The caller attaches and seals it.
  sg4::NetZone* build_node(const sg4::NetZone* models_from, int k) {
    const int n = hw.gpus_per_node;
    const std::string pre = fmt::format("n{}.", k);
    sg4::NetZone* zone = models_from ? detached_zone(sg4::create_full_zone(fmt::format("node{}", k)), models_from)
                                     : sg4::create_full_zone(fmt::format("node{}", k));
    const NodeHosts h = create_node_hosts(zone, pre, k);
    const NodeLinks L = create_node_links(zone, pre, k);
    add_node_routes(zone, h, L);
    for (int g = 0; g < n; ++g) pf.gpu_hosts_[k * n + g] = h.gpus[g];
    pf.cpu_hosts_[k] = h.cpus;
    pf.nvswitch_hosts_[k] = h.nvs;
    pf.node_zones_[k] = zone;
    pf.node_gateways_[k] = h.ib;
    return zone;
  }
};


namespace {
// The nodes a mirrored platform still builds in SimGrid: node 0 and the representatives
// of carry_across (node 1; under a fat-tree the first node of leaf 1 and of pod 1).
std::vector<char> mirrored_nodes(const HardwareSpec& hw) {
  std::vector<char> mirrored(static_cast<size_t>(hw.nodes), 1);
  std::vector<int> kept{0, 1};
  if (hw.network && hw.network->topology == FabricTopology::fat_tree) {
    const FatTreeShape shape = fat_tree_shape(hw);
    kept.push_back(hw.network->nodes_per_leaf);
    kept.push_back(shape.leaves_per_pod * hw.network->nodes_per_leaf);
  }
  for (int k : kept)
    if (k < hw.nodes) mirrored[static_cast<size_t>(k)] = 0;
  return mirrored;
}
}  // namespace

std::unique_ptr<Platform> Platform::build(sg4::Engine& engine, const HardwareSpec& hw, const PlatformOptions& options) {
  (void)engine;  // the platform goes into the process's only Engine
  validate_hardware(hw);
  std::unique_ptr<Platform> pf(new Platform(hw));
  if (options.mirror_nodes && hw.nodes > 1) pf->mirrored_ = mirrored_nodes(hw);
  const int n = hw.gpus_per_node;
  pf->gpu_switch_.assign(n, -1);
  for (size_t s = 0; s < hw.pcie.switches.size(); ++s)
    for (int g : hw.pcie.switches[s].gpus) pf->gpu_switch_[g] = static_cast<int>(s);
  pf->gpu_hosts_.assign(static_cast<size_t>(hw.gpu_count()), nullptr);
  pf->cpu_hosts_.assign(hw.nodes, {});
  pf->nvswitch_hosts_.assign(hw.nodes, nullptr);
  pf->node_zones_.assign(hw.nodes, nullptr);
  pf->node_gateways_.assign(hw.nodes, nullptr);
  pf->node_hosts_.assign(hw.nodes, {});
  pf->node_links_.assign(hw.nodes, {});
  pf->node_link_base_.assign(hw.nodes, -1);  // mirror_node sets a mirrored node's; index_node_links the others'
  PlatformBuilder b{*pf, hw};

  if (hw.nodes == 1) {
    b.build_node(nullptr, 0)->seal();
    pf->index_node_links();
    return pf;
  }
  const NetworkSpec& net = *hw.network;
  sg4::NetZone* root = sg4::create_star_zone("fabric");
  // A zone joins its parent star through its router (a node's: its InfiniBand router;
  // the links from there are inside the zone).
  auto join = [](sg4::NetZone* star, sg4::NetZone* zone, simgrid::kernel::routing::NetPoint* router) {
    zone->set_parent(star);
    star->add_route(zone->get_netpoint(), nullptr, router, nullptr, {}, true);
  };
  if (net.topology == FabricTopology::single_switch) {
    for (int k = 0; k < hw.nodes; ++k) {
      if (pf->mirrored(k)) {
        b.mirror_node(k);
        continue;
      }
      sg4::NetZone* node = b.build_node(root, k);
      join(root, node, pf->node_gateways_[k]);
    }
    root->seal();
    pf->index_node_links();
    return pf;
  }
  const FatTreeShape shape = fat_tree_shape(hw);
  pf->nodes_per_leaf_ = net.nodes_per_leaf;
  pf->leaves_per_pod_ = shape.leaves_per_pod;
  auto group = [&](const std::string& name, BytesPerSecond up_bw, std::vector<std::array<sg4::Link*, 2>>& uplinks) {
    return b.switch_group(root, name, up_bw, uplinks);
  };
  std::vector<std::pair<sg4::NetZone*, simgrid::kernel::routing::NetPoint*>> top;  // joined to the root last
  for (int pod = 0; pod < shape.pods; ++pod) {
    std::pair<sg4::NetZone*, simgrid::kernel::routing::NetPoint*> p{nullptr, nullptr};
    if (shape.pods > 1) p = group(fmt::format("pod{}", pod), shape.pod_uplink_bandwidth, pf->pod_uplinks_);
    for (int l = pod * shape.leaves_per_pod; l < std::min(shape.leaves, (pod + 1) * shape.leaves_per_pod); ++l) {
      const auto [leaf, router] = group(fmt::format("leaf{}", l), shape.leaf_uplink_bandwidth, pf->leaf_uplinks_);
      for (int k = l * net.nodes_per_leaf; k < std::min(hw.nodes, (l + 1) * net.nodes_per_leaf); ++k) {
        if (pf->mirrored(k)) {
          b.mirror_node(k);
          continue;
        }
        sg4::NetZone* node = b.build_node(root, k);  // sets node_gateways_[k]
        join(leaf, node, pf->node_gateways_[k]);
        node->seal();
      }
      if (p.first) {
        join(p.first, leaf, router);
        leaf->seal();
      } else {
        top.emplace_back(leaf, router);
      }
    }
    if (p.first) top.push_back(p);
  }
  for (const auto& [zone, router] : top) join(root, zone, router);
  root->seal();
  pf->index_node_links();
  return pf;
}

FatTreeShape fat_tree_shape(const HardwareSpec& hw) {
  if (!hw.network || hw.network->topology != FabricTopology::fat_tree)
    throw std::invalid_argument(fmt::format("hardware '{}': fat_tree_shape needs a fat_tree network", hw.name));
  const NetworkSpec& net = *hw.network;
  FatTreeShape s;
  s.leaves = (hw.nodes + net.nodes_per_leaf - 1) / net.nodes_per_leaf;
  // A spine switch with all its ports down reaches switch_radix leaves (one per rail
  // plane); beyond that, spines give half their ports to a core level and a pod holds
  // switch_radix / 2 leaves.
  s.leaves_per_pod = net.switch_radix > 0 && s.leaves > net.switch_radix ? net.switch_radix / 2 : s.leaves;
  s.pods = (s.leaves + s.leaves_per_pod - 1) / s.leaves_per_pod;
  const BytesPerSecond link_rate = net.switch_link_rate.value_or(net.nic_bandwidth) * hw.efficiency.nic;
  // A leaf's uplinks: one port per node and rail, divided by the oversubscription.
  s.leaf_uplink_bandwidth = net.nodes_per_leaf * net.nics_per_node * link_rate / net.oversubscription;
  s.pod_uplink_bandwidth = s.leaves_per_pod * s.leaf_uplink_bandwidth / net.core_oversubscription;
  return s;
}

sg4::Host* Platform::gpu_host(int gpu) const { return gpu_hosts_.at(static_cast<size_t>(gpu)); }
sg4::Host* Platform::cpu_host(int node, int socket) const { return cpu_hosts_.at(node).at(socket); }
sg4::Host* Platform::cpu_host_of_gpu(int gpu) const {
  const int sw = gpu_switch_.at(static_cast<size_t>(local_index(gpu)));
  return cpu_host(node_of_gpu(gpu), sw < 0 ? 0 : hw_.pcie.switches[sw].socket);
}
sg4::Host* Platform::nvswitch_host(int node) const { return nvswitch_hosts_.at(node); }
int Platform::nic_of_gpu(int local_gpu) const {
  const int sw = gpu_switch_.at(static_cast<size_t>(local_gpu));
  if (sw >= 0) {
    const auto& s = hw_.pcie.switches[static_cast<size_t>(sw)];
    if (!s.nics.empty()) {
      const auto pos = std::find(s.gpus.begin(), s.gpus.end(), local_gpu) - s.gpus.begin();
      return s.nics[static_cast<size_t>(pos) % s.nics.size()];
    }
  }
  return hw_.network ? local_gpu % hw_.network->nics_per_node : -1;
}

bool Platform::has_in_switch_reduction() const { return hw_.nvswitch && hw_.nvswitch->in_switch_reduction; }

int Platform::host_index(const sg4::Host* h) const {
  if (!h) throw std::invalid_argument("route: no host (a mirrored node's hosts are not built: look up GPUs by index)");
  const int i = static_cast<int>(reinterpret_cast<std::uintptr_t>(h->get_data<void>())) - 1;
  assert(i < 0 || node_hosts_[static_cast<size_t>(i / hosts_per_node_)][static_cast<size_t>(i % hosts_per_node_)] == h);
  return i;
}

const RouteInfo& Platform::route(const sg4::Host* a, const sg4::Host* b) const {
  return route_indexed(host_index(a), host_index(b), a, b);
}

const RouteInfo& Platform::gpu_route(int gpu_a, int gpu_b) const {
  const int gpn = hw_.gpus_per_node, h = hosts_per_node_;  // a node's GPUs are its first hosts
  return route_indexed((gpu_a / gpn) * h + gpu_a % gpn, (gpu_b / gpn) * h + gpu_b % gpn, gpu_host(gpu_a), gpu_host(gpu_b));
}

const RouteInfo& Platform::route_indexed(int ia, int ib, const sg4::Host* a, const sg4::Host* b) const {
  const int h = hosts_per_node_;
  if (ia < 0 || ib < 0) throw std::invalid_argument("route: a host this platform did not build");
  // SimGrid's look-up, where no route is carried over: a mirrored node has none to give.
  auto looked_up = [&] {
    if (ia == ib) {  // a host to itself: no link, as SimGrid's look-up gives it
      RouteInfo none;
      none.bottleneck_bandwidth = std::numeric_limits<double>::infinity();
      return none;
    }
    if (!a || !b)
      throw std::logic_error(fmt::format("route between host indices {} and {}: a mirrored node's route that no "
                                         "built node's carries over", ia, ib));
    ++simgrid_route_lookups_;
    return with_link_ids(simgrid_route(a, b));
  };
  if (ia / h == ib / h) {
    if (node_routes_.empty()) node_routes_.assign(node_hosts_.size() * static_cast<size_t>(h) * h, nullptr);
    const int k = ia / h;
    const RouteInfo*& kept = node_routes_[(static_cast<size_t>(k) * h + ia % h) * h + ib % h];
    if (kept) return *kept;
    auto carried = k > 0 && ia != ib ? translated_route(k, ia % h, ib % h) : std::nullopt;
    kept = &node_route_store_.emplace_back(carried ? std::move(*carried) : looked_up());
    return *kept;
  }
  const std::int64_t key = static_cast<std::int64_t>(ia) * static_cast<std::int64_t>(node_hosts_.size()) * h + ib;
  auto it = cross_routes_.find(key);
  if (it != cross_routes_.end()) return it->second;
  const int gpn = hw_.gpus_per_node;
  std::optional<RouteInfo> carried;
  if (ia % h < gpn && ib % h < gpn) carried = translated_cross_route(ia / h, ia % h, ib / h, ib % h);
  return cross_routes_.emplace(key, carried ? std::move(*carried) : looked_up()).first->second;
}

RouteInfo Platform::with_link_ids(RouteInfo r) const {
  r.link_ids.clear();
  for (const auto* l : r.links) r.link_ids.push_back(link_id(l));
  return r;
}

std::pair<sg4::Link*, int> Platform::carried_link(const RouteInfo& base, size_t j, const CarriedLink& c, int node_a,
                                                  int node_b) const {
  sg4::Link* l = base.links[j];
  int id = -1;
  if (c.place < 0) {
    id = raw_link_id(l);
  } else if (c.place < 2) {
    const size_t k = static_cast<size_t>(c.place == 0 ? node_a : node_b);
    l = node_links_[k][static_cast<size_t>(c.position)];
    id = node_link_base_[k] >= 0 ? node_link_base_[k] + c.position : raw_link_id(l);
  } else {
    const bool leaf = c.place < 4;
    const int group = (c.place % 2 == 0 ? node_a : node_b) / nodes_per_leaf_ / (leaf ? 1 : leaves_per_pod_);
    l = (leaf ? leaf_uplinks_ : pod_uplinks_)[static_cast<size_t>(group)][static_cast<size_t>(c.dir)];
    id = raw_link_id(l);  // few: they stay in cache
  }
  // As link_id gives it (planted: a split-duplex link's two directions share one id).
  if (id >= 0 && fault_active(Fault::platform_link_ids_shared_by_directions)) id &= ~1;
  return {l, id};
}

RouteInfo Platform::carry_over(const RouteInfo& base, const std::vector<CarriedLink>& carry, int node_a, int node_b) const {
  RouteInfo r = base;  // latency and bottleneck: the counterparts' figures, summed in the same order
  for (size_t j = 0; j < carry.size(); ++j) {
    if (carry[j].place < 0) continue;
    std::tie(r.links[j], r.link_ids[j]) = carried_link(base, j, carry[j], node_a, node_b);
  }
  return r;
}

RouteInfo Platform::simgrid_route(const sg4::Host* a, const sg4::Host* b) const {
  RouteInfo info;
  info.bottleneck_bandwidth = std::numeric_limits<double>::infinity();
  if (a != b) {
    double lat = 0;
    a->route_to(b, info.links, &lat);
    info.latency_s = lat;
    for (auto* l : info.links) info.bottleneck_bandwidth = std::min(info.bottleneck_bandwidth, l->get_bandwidth());
  }
  return info;
}

void Platform::gpu_route_link_ids(int gpu_a, int gpu_b, std::vector<int>& ids) const {
  const int gpn = hw_.gpus_per_node;
  const int node_a = gpu_a / gpn, node_b = gpu_b / gpn, pa = gpu_a % gpn, pb = gpu_b % gpn;
  const auto [base, carry] =
      node_a == node_b ? (node_a > 0 && pa != pb ? carry_within(pa, pb) : std::pair<const RouteInfo*, const std::vector<CarriedLink>*>{})
                       : carry_across(node_a, pa, node_b, pb);
  if (!carry) {
    const RouteInfo& r = gpu_route(gpu_a, gpu_b);
    ids.assign(r.link_ids.begin(), r.link_ids.end());
    return;
  }
  ids.resize(carry->size());
  for (size_t j = 0; j < carry->size(); ++j) ids[j] = carried_link(*base, j, (*carry)[j], node_a, node_b).second;
  if (std::find(ids.begin(), ids.end(), -1) != ids.end())
    throw std::logic_error(fmt::format("route from GPU {} to GPU {}: a carried link without an id", gpu_a, gpu_b));
}

// Node 0's route between the hosts at positions slot_a and slot_b, its links replaced by
// node k's at the same positions; none (SimGrid decides) unless every link of node 0's
// route is node 0's own.
std::pair<const RouteInfo*, const std::vector<Platform::CarriedLink>*> Platform::carry_within(int slot_a, int slot_b) const {
  const RouteInfo& base = route(node_hosts_[0][static_cast<size_t>(slot_a)], node_hosts_[0][static_cast<size_t>(slot_b)]);
  if (node_carry_.empty()) node_carry_.resize(static_cast<size_t>(hosts_per_node_) * hosts_per_node_);
  std::optional<Carry>& carry = node_carry_[static_cast<size_t>(slot_a) * hosts_per_node_ + slot_b];
  if (!carry) {
    std::vector<CarriedLink> c;
    const bool untranslated = fault_active(Fault::platform_route_node0_links);  // planted: node 0's links kept
    for (const auto* l : base.links) {
      const auto [node, slot] = position_of_id(raw_link_id(l));
      if (node != 0) break;
      c.push_back({static_cast<std::int8_t>(untranslated ? -1 : 0), 0, slot});
    }
    carry = c.size() == base.links.size() ? Carry(std::move(c)) : Carry();
  }
  return {&base, *carry ? &**carry : nullptr};
}

std::optional<RouteInfo> Platform::translated_route(int k, int slot_a, int slot_b) const {
  const auto [base, carry] = carry_within(slot_a, slot_b);
  if (!carry) return std::nullopt;
  return carry_over(*base, *carry, k, k);
}

// GPU gpu_a of node_a to GPU gpu_b of node_b (distinct nodes): see leaf_uplinks_. None
// (SimGrid decides) where a link of the representative route has no counterpart.
std::optional<RouteInfo> Platform::translated_cross_route(int node_a, int gpu_a, int node_b, int gpu_b) const {
  const auto [base, carry] = carry_across(node_a, gpu_a, node_b, gpu_b);
  if (!carry) return std::nullopt;
  return carry_over(*base, *carry, node_a, node_b);
}

std::pair<const RouteInfo*, const std::vector<Platform::CarriedLink>*> Platform::carry_across(int node_a, int gpu_a,
                                                                                             int node_b, int gpu_b) const {
  const int nodes = static_cast<int>(node_hosts_.size());
  int relation = 0, rep = 1;  // one switch, or node_a and node_b under one leaf: node 1 (under node 0's)
  if (nodes_per_leaf_ > 0) {
    const int leaf_a = node_a / nodes_per_leaf_, leaf_b = node_b / nodes_per_leaf_;
    if (leaf_a != leaf_b) {
      relation = leaf_a / leaves_per_pod_ == leaf_b / leaves_per_pod_ ? 1 : 2;
      rep = relation == 1 ? nodes_per_leaf_ : leaves_per_pod_ * nodes_per_leaf_;
    }
  }
  if (rep >= nodes || (node_a == 0 && node_b == rep)) return {};  // the representative: SimGrid's
  const RouteInfo& base = route(node_hosts_[0][static_cast<size_t>(gpu_a)], node_hosts_[static_cast<size_t>(rep)][static_cast<size_t>(gpu_b)]);
  const int gpn = hw_.gpus_per_node;
  if (cross_carry_.empty()) cross_carry_.resize(3 * static_cast<size_t>(gpn) * gpn);
  std::optional<Carry>& carry = cross_carry_[(static_cast<size_t>(relation) * gpn + gpu_a) * gpn + gpu_b];
  if (!carry) {
    // Planted: only node 0's links replaced (the far node's and the uplinks kept).
    const bool near_only = fault_active(Fault::platform_cross_route_rep_links);
    std::vector<CarriedLink> c;
    for (const auto* l : base.links) {
      const auto [node, position] = position_of_id(raw_link_id(l));
      if (node == 0 || (node == rep && node >= 0)) {
        c.push_back({static_cast<std::int8_t>(near_only && node != 0 ? -1 : node == 0 ? 0 : 1), 0, position});
        continue;
      }
      if (node >= 0 || nodes_per_leaf_ == 0) break;
      // An uplink above node 0 or above the representative: the one at the same place
      // above node_a or node_b.
      std::optional<CarriedLink> up;
      const int rep_leaf = rep / nodes_per_leaf_, rep_pod = rep_leaf / leaves_per_pod_;
      auto find = [&](const std::vector<std::array<sg4::Link*, 2>>& ups, int group, std::int8_t place) {
        if (up || group >= static_cast<int>(ups.size())) return;
        for (int dir = 0; dir < 2; ++dir)
          if (ups[static_cast<size_t>(group)][static_cast<size_t>(dir)] == l)
            up = CarriedLink{static_cast<std::int8_t>(near_only ? -1 : place), static_cast<std::int8_t>(dir), 0};
      };
      find(leaf_uplinks_, 0, 2);
      if (rep_leaf != 0) find(leaf_uplinks_, rep_leaf, 3);
      find(pod_uplinks_, 0, 4);
      if (rep_pod != 0) find(pod_uplinks_, rep_pod, 5);
      if (!up) break;
      c.push_back(*up);
    }
    carry = c.size() == base.links.size() ? Carry(std::move(c)) : Carry();
  }
  return {&base, *carry ? &**carry : nullptr};
}

std::vector<std::string> Platform::route_link_names(const sg4::Host* a, const sg4::Host* b) const {
  std::vector<std::string> names;
  for (auto* l : route(a, b).links) names.push_back(l->get_name());
  return names;
}

const sg4::Link* Platform::link_or_counterpart(int id) const {
  const sg4::Link* l = links_.at(static_cast<size_t>(id));
  if (l) return l;
  const auto [node, position] = position_of_id(id);
  if (node < 0) throw std::logic_error(fmt::format("link id {}: neither built nor a mirrored node's", id));
  // Planted: the counterpart one position on.
  const int shift = fault_active(Fault::platform_mirror_counterpart_shifted) ? 1 : 0;
  return node_links_[0][static_cast<size_t>((position + shift) % links_per_node())];
}

std::string Platform::link_name(int id) const {
  const sg4::Link* l = links_.at(static_cast<size_t>(id));
  if (l) return l->get_name();
  // Node 0's link at the same position, "n0.<rest>", under the node's prefix.
  const std::string base = link_or_counterpart(id)->get_name();
  return fmt::format("n{}.{}", position_of_id(id).first, base.substr(base.find('.') + 1));
}

BytesPerSecond Platform::link_bandwidth(int id) const { return link_or_counterpart(id)->get_bandwidth(); }
Seconds Platform::link_latency(int id) const { return link_or_counterpart(id)->get_latency(); }

bool Platform::peer_to_peer(int gpu_a, int gpu_b) const {
  if (node_of_gpu(gpu_a) != node_of_gpu(gpu_b)) return true;  // GPUDirect RDMA across nodes
  // nccl_p2p_disable: the node's GPU-to-GPU routes are staged (gpu_to_gpu), so the driver's
  // copies run as staged copies too (the simplification HardwareSpec::nccl_p2p_disable names).
  if (hw_.nccl_p2p_disable && !fault_active(Fault::nccl_p2p_disable_ignored)) return false;
  return gpu_peer_access(hw_, local_index(gpu_a), local_index(gpu_b));
}

sg4::CommPtr Platform::transfer_async(sg4::Host* from, sg4::Host* to, Bytes n) {
  if (n < 0) throw std::invalid_argument(fmt::format("transfer of {} bytes (negative)", n));
  account(from, to, n);
  return sg4::Comm::sendto_async(from, to, static_cast<uint64_t>(n));
}

void Platform::transfer(sg4::Host* from, sg4::Host* to, Bytes n) { transfer_async(from, to, n)->wait(); }

void Platform::account(const sg4::Host* from, const sg4::Host* to, Bytes n) {
  if (link_bytes_.empty()) link_bytes_.assign(links_.size(), -1);  // -1: untouched
  for (const int id : route(from, to).link_ids) {
    if (id < 0) throw std::logic_error("account: a route link without an id");
    Bytes& b = link_bytes_[static_cast<size_t>(id)];
    b = std::max<Bytes>(b, 0) + n;
  }
}

void Platform::account_pattern(const std::shared_ptr<const LinkBytes>& pattern) {
  auto& slot = patterns_[pattern.get()];
  slot.first = pattern;
  ++slot.second;
}

void Platform::register_link(sg4::Link* l) {
  links_.push_back(l);  // nullptr: a mirrored node's
  if (l) l->set_data(reinterpret_cast<void*>(static_cast<std::uintptr_t>(links_.size())));  // id + 1: 0 is "none"
}

int Platform::raw_link_id(const sg4::Link* l) const {
  if (!l) return -1;  // a mirrored node's link: its id is only in the route's link_ids
  const auto stored = reinterpret_cast<std::uintptr_t>(l->get_data<void>());
  if (stored == 0 || stored > links_.size() || links_[stored - 1] != l) return -1;
  return static_cast<int>(stored - 1);
}

int Platform::link_id(const sg4::Link* l) const {
  const int id = raw_link_id(l);
  if (id < 0) return -1;
  // Planted: a split-duplex link's two directions share one id.
  return fault_active(Fault::platform_link_ids_shared_by_directions) ? id & ~1 : id;
}

void Platform::index_node_links() {
  node_link_position_.assign(links_.size(), -1);
  const int per_node = links_per_node();
  for (size_t k = 0; k < node_links_.size(); ++k) {
    if (mirrored(static_cast<int>(k))) {  // its ids run on from node_link_base_[k] (mirror_node)
      for (int i = 0; i < per_node; ++i)
        node_link_position_[static_cast<size_t>(node_link_base_[k] + i)] = static_cast<int>(k) * per_node + i;
      continue;
    }
    bool consecutive = !node_links_[k].empty();
    for (size_t i = 0; i < node_links_[k].size(); ++i) {
      const int own = raw_link_id(node_links_[k][i]);
      if (own >= 0) node_link_position_[static_cast<size_t>(own)] = static_cast<int>(k) * per_node + static_cast<int>(i);
      consecutive = consecutive && own >= 0 && own == raw_link_id(node_links_[k][0]) + static_cast<int>(i);
    }
    if (consecutive) node_link_base_[k] = raw_link_id(node_links_[k][0]);
  }
}

std::pair<int, int> Platform::position_of_id(int id) const {
  if (id < 0 || static_cast<size_t>(id) >= node_link_position_.size() || node_link_position_[static_cast<size_t>(id)] < 0)
    return {-1, -1};
  const int at = node_link_position_[static_cast<size_t>(id)], per_node = links_per_node();
  return {at / per_node, at % per_node};
}

const sg4::Link* Platform::node_link(int node, int position) const {
  return node_links_.at(static_cast<size_t>(node)).at(static_cast<size_t>(position));
}

LinkIndexer::LinkIndexer(const Platform* p) : p_(p) {
  if (p_) by_id_.assign(static_cast<size_t>(p_->link_count()), -1);
}

std::pair<int, bool> LinkIndexer::index(const sg4::Link* l) { return index(l, p_ ? p_->link_id(l) : -1); }

std::pair<int, bool> LinkIndexer::index(const sg4::Link* l, int id) {
  if (!p_) id = -1;
  int& slot = id >= 0 ? by_id_[static_cast<size_t>(id)] : others_.try_emplace(l, -1).first->second;
  if (slot >= 0) return {slot, false};
  slot = next_++;
  return {slot, true};
}

std::vector<LinkUsage> Platform::link_usage() const {
  // Dense by link id (a 32k-GPU fat-tree has ~262k links; hashing each pattern's entries
  // was most of this); links without an id in a map. Byte counts are integers, so the
  // order of the sums is immaterial; the output is sorted by name below.
  std::vector<Bytes> total(links_.size(), 0);
  std::vector<char> touched(links_.size(), 0);
  auto add = [&](int id, Bytes b) {
    if (id < 0 || static_cast<size_t>(id) >= links_.size())
      throw std::logic_error(fmt::format("link usage: traffic on link id {}, not one of this platform's", id));
    total[static_cast<size_t>(id)] += b;
    touched[static_cast<size_t>(id)] = 1;
  };
  for (size_t id = 0; id < link_bytes_.size(); ++id)
    if (link_bytes_[id] >= 0) add(static_cast<int>(id), link_bytes_[id]);
  for (const auto& [key, slot] : patterns_)
    for (const auto& [id, bytes] : *slot.first) add(id, bytes * slot.second);
  std::vector<LinkUsage> out;
  for (size_t i = 0; i < links_.size(); ++i) {
    if (!touched[i]) continue;
    LinkUsage u;
    u.link = link_name(static_cast<int>(i));
    u.bandwidth = link_bandwidth(static_cast<int>(i));
    u.bytes = total[i];
    u.busy_s = static_cast<double>(total[i]) / u.bandwidth;
    out.push_back(std::move(u));
  }
  std::sort(out.begin(), out.end(), [](const LinkUsage& a, const LinkUsage& b) { return a.link < b.link; });
  return out;
}

void Platform::reset_link_usage() {
  link_bytes_.clear();
  patterns_.clear();
}

BytesPerSecond Platform::pcie_link_bandwidth() const {
  return pcie_lane_bandwidth(hw_.pcie.generation) * hw_.pcie.lanes * hw_.efficiency.pcie;
}
BytesPerSecond Platform::nvlink_link_bandwidth() const {
  return hw_.nvlink ? hw_.nvlink->link_bandwidth * hw_.efficiency.p2p : 0.0;
}
BytesPerSecond Platform::nvswitch_port_bandwidth() const {
  return hw_.nvswitch ? hw_.nvswitch->links_per_gpu * hw_.nvswitch->link_bandwidth * hw_.efficiency.p2p : 0.0;
}
BytesPerSecond Platform::nic_bandwidth() const {
  return hw_.network ? hw_.network->nic_bandwidth * hw_.efficiency.nic : 0.0;
}

}  // namespace dpt::sim
