// NCCL's schedules as pure functions of the platform and the ranks: NVLink cycles on
// nodes without NVSwitch, rings aligned with the NICs across nodes, double binary trees
// (see collectives.hpp for what each returns).
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/collective_exact.hpp"
#include "sim/collectives/collectives.hpp"

namespace dpt::sim {

namespace {
std::vector<std::vector<int>> nvlink_cycles(const NvlinkSpec& nv, const std::vector<int>& gpus);

// The NVLink cycles through one node's ranks (GPU local indices, in rank order) when the
// node has NVLink pairs and no NVSwitch; empty otherwise.
std::vector<std::vector<int>> node_nvlink_cycles(const Platform& p, const std::vector<int>& rank_gpus) {
  if (!p.hardware().nvlink || p.hardware().nvswitch || nodes_spanned(p, rank_gpus) != 1) return {};
  std::vector<int> gpus;
  for (int g : rank_gpus) gpus.push_back(p.local_index(g));
  std::sort(gpus.begin(), gpus.end());
  return nvlink_cycles(*p.hardware().nvlink, gpus);
}
}  // namespace

// ---- schedules -------------------------------------------------------------------------------

namespace {

// A Hamiltonian cycle through `gpus` (local indices) over NVLink pairs, if one exists;
// small nodes only (depth-first search over at most 16 GPUs).
std::optional<std::vector<int>> nvlink_cycle(const NvlinkSpec& nv, const std::vector<int>& gpus) {
  const int n = static_cast<int>(gpus.size());
  if (n < 3 || n > 16) return std::nullopt;
  std::vector<int> path{gpus[0]};
  std::vector<bool> used(n, false);
  used[0] = true;
  std::function<bool()> dfs = [&]() -> bool {
    if (static_cast<int>(path.size()) == n) return nv.links_between(path.back(), path.front()) > 0;
    for (int i = 1; i < n; ++i) {
      if (used[i] || nv.links_between(path.back(), gpus[i]) == 0) continue;
      used[i] = true;
      path.push_back(gpus[i]);
      if (dfs()) return true;
      path.pop_back();
      used[i] = false;
    }
    return false;
  };
  if (dfs()) return path;
  return std::nullopt;
}

// Directed NVLink pair (from GPU, to GPU) -> channels routed over it so far.
using NvlinkUse = std::map<std::pair<int, int>, int>;

// The Hamiltonian path over the NVLink pairs through every GPU of `gpus`, from `from` to
// `to`, that loads its busiest hop least, as NCCL's search reserves each channel's
// bandwidth on the links it takes: each hop's load is (channels already on it in its
// direction + 1) / the pair's links, the hops taken `reversed` when the channel runs the
// path backwards; ties go to the least summed load, then to the first found. The chosen
// path's hops are added to `use`. nullopt if there is none; the search stops after
// 2,000,000 hops tried (a full search on DGX-1's 8 GPUs tries a few thousand).
std::optional<std::vector<int>> nvlink_path(const NvlinkSpec& nv, const std::vector<int>& gpus, int from, int to,
                                            bool reversed, NvlinkUse& use) {
  const int n = static_cast<int>(gpus.size());
  if (n < 2 || n > 16) return std::nullopt;
  auto load = [&](int a, int b) {
    const auto key = reversed ? std::make_pair(b, a) : std::make_pair(a, b);
    const auto it = use.find(key);
    return static_cast<double>((it == use.end() ? 0 : it->second) + 1) / nv.links_between(a, b);
  };
  std::vector<int> path{from}, best;
  double best_max = 0, best_sum = 0;
  long expanded = 0;  // hops tried
  std::vector<bool> used(static_cast<size_t>(n), false);
  for (int i = 0; i < n; ++i) used[static_cast<size_t>(i)] = gpus[static_cast<size_t>(i)] == from;
  std::function<void(double, double)> dfs = [&](double mx, double sum) {
    if (best.size() == static_cast<size_t>(n) && (mx > best_max || (mx == best_max && sum >= best_sum))) return;
    if (static_cast<int>(path.size()) == n) {
      if (path.back() != to) return;
      best = path, best_max = mx, best_sum = sum;
      return;
    }
    for (int i = 0; i < n && expanded < 2000000; ++i) {
      const int g = gpus[static_cast<size_t>(i)];
      if (used[static_cast<size_t>(i)] || nv.links_between(path.back(), g) == 0) continue;
      if (g == to && static_cast<int>(path.size()) + 1 < n) continue;  // `to` comes last
      const double l = load(path.back(), g);
      ++expanded;
      used[static_cast<size_t>(i)] = true;
      path.push_back(g);
      dfs(std::max(mx, l), sum + l);
      path.pop_back();
      used[static_cast<size_t>(i)] = false;
    }
  };
  dfs(0.0, 0.0);
  if (best.empty()) return std::nullopt;
  for (size_t k = 0; k + 1 < best.size(); ++k)
    ++use[reversed ? std::make_pair(best[k + 1], best[k]) : std::make_pair(best[k], best[k + 1])];
  return best;
}

// The most link-disjoint Hamiltonian cycles over the NVLink pairs (each takes one link
// of every pair it uses), as NCCL's ring search uses all of a GPU's links: DGX-1V's six
// links per GPU give three. Up to 8 GPUs every cycle through gpus[0] is enumerated
// (at most 7!/2) and the largest disjoint set searched; beyond, cycles are taken one
// after another (nvlink_cycle over the links left).
std::vector<std::vector<int>> nvlink_cycles(const NvlinkSpec& nv, const std::vector<int>& gpus) {
  const int n = static_cast<int>(gpus.size());
  std::map<std::pair<int, int>, int> cap;  // (lo, hi) GPU pair -> links
  for (const auto& pr : nv.pairs) cap[{std::min(pr.a, pr.b), std::max(pr.a, pr.b)}] += pr.links;
  auto key = [](int a, int b) { return std::make_pair(std::min(a, b), std::max(a, b)); };
  auto take = [&](const std::vector<int>& cyc, int d) {
    for (size_t i = 0; i < cyc.size(); ++i) cap[key(cyc[i], cyc[(i + 1) % cyc.size()])] += d;
  };
  auto fits = [&](const std::vector<int>& cyc) {
    std::map<std::pair<int, int>, int> need;
    for (size_t i = 0; i < cyc.size(); ++i) ++need[key(cyc[i], cyc[(i + 1) % cyc.size()])];
    for (const auto& [k, v] : need)
      if (cap[k] < v) return false;
    return true;
  };
  if (n < 3) return {};
  if (n > 8) {
    std::vector<std::vector<int>> out;
    NvlinkSpec left = nv;
    while (out.size() < 8) {
      auto cyc = nvlink_cycle(left, gpus);
      if (!cyc) break;
      for (size_t i = 0; i < cyc->size(); ++i) {
        const auto k = key((*cyc)[i], (*cyc)[(i + 1) % cyc->size()]);
        for (auto& pr : left.pairs)
          if (key(pr.a, pr.b) == k) --pr.links;
      }
      out.push_back(std::move(*cyc));
    }
    return out;
  }
  // Every Hamiltonian cycle through gpus[0], each once (second < last vertex).
  std::vector<std::vector<int>> all;
  std::vector<int> path{gpus[0]};
  std::vector<bool> used(n, false);
  used[0] = true;
  std::function<void()> walk = [&]() {
    if (static_cast<int>(path.size()) == n) {
      if (cap[key(path.back(), path.front())] > 0 && path[1] < path.back()) all.push_back(path);
      return;
    }
    for (int i = 1; i < n; ++i) {
      if (used[i] || cap[key(path.back(), gpus[i])] == 0) continue;
      used[i] = true;
      path.push_back(gpus[i]);
      walk();
      path.pop_back();
      used[i] = false;
    }
  };
  walk();
  // The largest set of cycles within the link counts (depth-first, cycles in order). A
  // cycle takes two links of every GPU, so no set is larger than the fewest links any
  // GPU has, halved; the search stops there, or after 100,000 steps with the best so far.
  size_t bound = 8;
  for (int g : gpus) {
    int links = 0;
    for (int h : gpus)
      if (h != g) links += cap[key(g, h)];
    bound = std::min(bound, static_cast<size_t>(links / 2));
  }
  std::vector<std::vector<int>> best, chosen;
  long steps = 0;
  std::function<void(size_t)> pick = [&](size_t from) {
    if (chosen.size() > best.size()) best = chosen;
    for (size_t i = from; i < all.size() && best.size() < bound && ++steps < 100000; ++i) {
      if (!fits(all[i])) continue;
      take(all[i], -1);
      chosen.push_back(all[i]);
      pick(i + 1);
      chosen.pop_back();
      take(all[i], +1);
    }
  };
  pick(0);
  return best;
}

}  // namespace

namespace {
// NIC -> the local GPU indices on that NIC's PCIe switch that use it (the platform's rule:
// a GPU takes its switch's NICs by position). Empty when no switch lists NICs.
std::map<int, std::vector<int>> rail_gpus(const HardwareSpec& hw) {
  std::map<int, std::vector<int>> out;
  for (const auto& sw : hw.pcie.switches)
    for (size_t i = 0; i < sw.gpus.size() && !sw.nics.empty(); ++i)
      out[sw.nics[i % sw.nics.size()]].push_back(sw.gpus[i]);
  return out;
}

// NCCL's rail-aligned ring through one node when some of its GPUs have no NIC of their own
// (fewer NICs than GPUs, or a GPU sharing its NIC): channel c enters and leaves the node through GPUs on the PCIe
// switch of one NIC, NIC c mod (rails here), so that no inter-node byte crosses the CPU and
// the channels (NCCL's ring graph's, each on its own NIC while there are NICs left) spread
// evenly over the NICs. Entry first, the other ranks in ring order, exit last; a NIC with
// one GPU exits through the next NIC's GPU.
// Empty (use the rotation) when every GPU has a NIC of its own or no switch lists NICs.
std::vector<int> rail_order(const Platform& p, const std::vector<int>& rank_gpus, const std::vector<int>& ranks,
                            const std::map<int, std::vector<int>>& rails, int c, NvlinkUse& use) {
  std::vector<std::vector<int>> here;  // per NIC with GPUs among these ranks: those ranks
  size_t railed = 0;
  for (const auto& [nic, gpus] : rails) {
    std::vector<int> rs;
    for (int r : ranks)
      if (std::find(gpus.begin(), gpus.end(), p.local_index(rank_gpus[r])) != gpus.end()) rs.push_back(r);
    railed += rs.size();
    if (!rs.empty()) here.push_back(std::move(rs));
  }
  const bool own_nics =
      railed == ranks.size() && std::all_of(here.begin(), here.end(), [](const auto& rs) { return rs.size() == 1; });
  if (here.empty() || own_nics || ranks.size() < 2) return {};
  const size_t q = fault_active(Fault::net_rails_one_nic) ? 0 : static_cast<size_t>(c) % here.size();
  const int entry = here[q].front();
  const int exit_rank = here[q].size() > 1 ? here[q].back() : here[(q + 1) % here.size()].front();
  // On direct NVLink (no switch), a path over NVLink pairs from the entry to the exit
  // through every rank that loads its links least given the node's channels before it,
  // as NCCL's search keeps its rings on NVLink and spreads them over the links (odd
  // channels run reversed: ring_orders); else the others in ring order.
  const HardwareSpec& hw = p.hardware();
  if (hw.nvlink && !hw.nvswitch && exit_rank != entry && !fault_active(Fault::ring_nvlink_paths_unbalanced)) {
    std::vector<int> gpus;
    for (int r : ranks) gpus.push_back(p.local_index(rank_gpus[r]));
    if (auto path = nvlink_path(*hw.nvlink, gpus, p.local_index(rank_gpus[entry]), p.local_index(rank_gpus[exit_rank]),
                                c % 2 == 1, use)) {
      std::vector<int> order;
      for (int g : *path)
        for (int r : ranks)
          if (p.local_index(rank_gpus[r]) == g) order.push_back(r);
      return order;
    }
  }
  std::vector<int> order{entry};
  for (int r : ranks)
    if (r != entry && r != exit_rank) order.push_back(r);
  if (exit_rank != entry) order.push_back(exit_rank);
  if (hw.nvlink && !hw.nvswitch)  // later channels balance against this one's NVLink hops too
    for (size_t k = 0; k + 1 < order.size(); ++k) {
      const int a = p.local_index(rank_gpus[order[k]]), b = p.local_index(rank_gpus[order[k + 1]]);
      if (hw.nvlink->links_between(a, b) > 0) ++use[c % 2 == 1 ? std::make_pair(b, a) : std::make_pair(a, b)];
    }
  return order;
}
}  // namespace

std::vector<std::vector<int>> ring_orders(const Platform& p, const std::vector<int>& rank_gpus, int channels) {
  // Ranks grouped by node, nodes in order of first appearance.
  std::vector<int> node_order;
  std::map<int, std::vector<int>> by_node;  // node -> ranks
  for (int r = 0; r < static_cast<int>(rank_gpus.size()); ++r) {
    const int node = p.node_of_gpu(rank_gpus[r]);
    if (!by_node.count(node)) node_order.push_back(node);
    by_node[node].push_back(r);
  }
  // One node on direct NVLink: channel c runs cycle (c / 2) mod k, odd channels reversed.
  if (node_order.size() == 1) {
    const auto cycles = node_nvlink_cycles(p, rank_gpus);
    if (!cycles.empty()) {
      std::vector<std::vector<int>> orders;
      for (int c = 0; c < channels; ++c) {
        std::vector<int> order;
        for (int g : cycles[static_cast<size_t>(c / 2) % cycles.size()])
          for (int r = 0; r < static_cast<int>(rank_gpus.size()); ++r)
            if (p.local_index(rank_gpus[r]) == g) order.push_back(r);
        if (c % 2 == 1) std::reverse(order.begin(), order.end());
        orders.push_back(std::move(order));
      }
      return orders;
    }
  }
  // Within a node: the NVLink cycle if there is one, else GPU order.
  std::map<int, std::vector<int>> local;  // node -> ranks in ring order
  for (int node : node_order) {
    std::vector<int> ranks = by_node[node];
    std::sort(ranks.begin(), ranks.end(), [&](int a, int b) { return rank_gpus[a] < rank_gpus[b]; });
    if (p.hardware().nvlink && !p.hardware().nvswitch) {
      std::vector<int> gpus;
      for (int r : ranks) gpus.push_back(p.local_index(rank_gpus[r]));
      if (auto cyc = nvlink_cycle(*p.hardware().nvlink, gpus)) {
        std::vector<int> ordered;
        for (int g : *cyc)
          for (int r : ranks)
            if (p.local_index(rank_gpus[r]) == g) ordered.push_back(r);
        ranks = ordered;
      }
    }
    local[node] = ranks;
  }
  const auto rails = rail_gpus(p.hardware());
  std::map<int, NvlinkUse> nvlink_use;  // per node: its channels' NVLink hops so far
  std::vector<std::vector<int>> orders;
  for (int c = 0; c < channels; ++c) {
    std::vector<int> order;
    for (int node : node_order) {
      const auto& ranks = local[node];
      if (node_order.size() > 1) {
        auto railed = rail_order(p, rank_gpus, ranks, rails, c, nvlink_use[node]);
        if (!railed.empty()) {
          order.insert(order.end(), railed.begin(), railed.end());
          continue;
        }
      }
      const int m = static_cast<int>(ranks.size());
      // Rotating by c + (c mod 2) moves the GPU (and so the NIC) through which the ring
      // leaves and enters each node; odd channels then run their ring reversed. With as
      // many channels as NICs every NIC carries one channel out and one in.
      int rot = node_order.size() > 1 ? (c + c % 2) % m : 0;
      if (fault_active(Fault::net_rails_one_nic)) rot = 0;  // planted: every channel on one rail
      for (int i = 0; i < m; ++i) order.push_back(ranks[(i + rot) % m]);
    }
    if (c % 2 == 1) std::reverse(order.begin(), order.end());
    orders.push_back(std::move(order));
  }
  return orders;
}

std::array<TreeShape, 2> double_binary_tree(int n) {
  if (n < 1) throw std::invalid_argument(fmt::format("double_binary_tree: n must be positive, got {}", n));
  // Tree 0 is NCCL's ncclGetBtree: the root is 0; index r >= 1 with lowest set bit b has
  // parent (r ^ b) | (b << 1), or r ^ b when that is out of range. For 14 items:
  // 0 -> 8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 13; 2 -> 1, 3; ...
  TreeShape t0;
  t0.root = 0;
  t0.parent.assign(n, -1);
  t0.children.assign(n, {});
  for (int r = 1; r < n; ++r) {
    const int bit = r & -r;
    int up = (r ^ bit) | (bit << 1);
    if (up >= n) up = r ^ bit;
    t0.parent[r] = up;
  }
  // Tree 1 is ncclGetDtree's second tree: tree 0 shifted by one (n odd) or mirrored
  // (n even), so that no index is interior in both.
  auto map = [n](int r) { return n % 2 == 1 ? (r + 1) % n : n - 1 - r; };
  TreeShape t1;
  t1.parent.assign(n, -1);
  t1.children.assign(n, {});
  t1.root = map(t0.root);
  for (int r = 0; r < n; ++r)
    if (t0.parent[r] >= 0) t1.parent[map(r)] = map(t0.parent[r]);
  for (TreeShape* t : {&t0, &t1})
    for (int r = 0; r < n; ++r)
      if (t->parent[r] >= 0) t->children[t->parent[r]].push_back(r);
  return {t0, t1};
}

namespace {
// A tree channel's children lists from its parents (in rank order).
void fill_children(TreeChannel& tc) {
  tc.children.assign(tc.parent.size(), {});
  for (size_t r = 0; r < tc.parent.size(); ++r)
    if (tc.parent[r] >= 0) tc.children[static_cast<size_t>(tc.parent[r])].push_back(static_cast<int>(r));
}
}  // namespace

std::vector<TreeChannel> tree_channels(const Platform& p, const std::vector<int>& rank_gpus, int channels) {
  const auto chains = node_chains(p, rank_gpus);
  const int nodes = static_cast<int>(chains.size());
  if (nodes < 2) throw std::invalid_argument("tree needs ranks on at least 2 nodes");
  const auto trees = double_binary_tree(nodes);
  // Per node: its chain's positions by the NIC their GPUs cross nodes through, NICs in order.
  std::vector<std::vector<std::vector<int>>> by_nic(static_cast<size_t>(nodes));
  for (int v = 0; v < nodes; ++v) {
    std::map<int, std::vector<int>> positions;
    const auto& ch = chains[static_cast<size_t>(v)];
    for (size_t i = 0; i < ch.size(); ++i) positions[p.nic_of_gpu(p.local_index(rank_gpus[ch[i]]))].push_back(static_cast<int>(i));
    for (auto& [nic, at] : positions) by_nic[static_cast<size_t>(v)].push_back(std::move(at));
  }
  std::vector<TreeChannel> out;
  for (int c = 0; c < channels; ++c) {
    TreeChannel tc;
    tc.tree = c % 2;
    tc.parent.assign(rank_gpus.size(), -1);
    // Node v's chain rotated so that pair j = c / 2 (channels 2j and 2j + 1, trees 0 and 1)
    // has its head (first), and so its inter-node traffic, on NIC j mod (the node's NICs):
    // the head is the ((j / NICs) mod its GPUs)-th of that NIC's GPUs along the chain, so
    // with a NIC per GPU pair j's head is the GPU of NIC j (GPU j on DGX nodes). NCCL duplicates each tree graph channel for the
    // second tree (connect.cc), so every NIC carries both trees: a node interior in one
    // is a leaf in the other, and its NICs' loads even out.
    const bool one_tree = fault_active(Fault::tree_one_tree_per_nic);  // planted: channel c on head c
    auto chain = [&](int v) {
      const auto& ch = chains[static_cast<size_t>(v)];
      const auto& nics = by_nic[static_cast<size_t>(v)];
      const int m = static_cast<int>(ch.size());
      const int j = one_tree ? c : c / 2;
      const auto& on = nics[static_cast<size_t>(j) % nics.size()];
      const int turn = on[static_cast<size_t>(j) / nics.size() % on.size()];
      std::vector<int> r(m);
      for (int i = 0; i < m; ++i) r[i] = ch[(i + turn) % m];
      return r;
    };
    for (int v = 0; v < nodes; ++v) {
      const auto ch = chain(v);
      for (size_t q = 1; q < ch.size(); ++q) tc.parent[ch[q]] = ch[q - 1];
      const int pv = trees[tc.tree].parent[v];
      if (pv >= 0) tc.parent[ch[0]] = chain(pv)[0];
    }
    tc.root = chain(trees[tc.tree].root)[0];
    fill_children(tc);
    out.push_back(std::move(tc));
  }
  return out;
}

std::vector<std::vector<int>> nvls_heads(const Platform& p, const std::vector<int>& rank_gpus) {
  std::vector<std::vector<int>> out;
  const int nics = p.hardware().network ? p.hardware().network->nics_per_node : 0;
  for (const auto& chain : node_chains(p, rank_gpus)) {
    std::vector<int> heads;
    for (int j = 0; j < nics; ++j)
      for (int r : chain)
        if (p.nic_of_gpu(p.local_index(rank_gpus[r])) == j) {
          heads.push_back(r);
          break;
        }
    if (heads.empty()) heads.push_back(chain.front());  // no NIC of its own: NCCL finds no head
    out.push_back(std::move(heads));
  }
  return out;
}

std::vector<TreeChannel> nvls_tree_channels(const Platform& p, const std::vector<int>& rank_gpus, int channels) {
  const auto chains = node_chains(p, rank_gpus);
  const int nodes = static_cast<int>(chains.size());
  if (nodes < 2) throw std::invalid_argument("nvls_tree needs ranks on at least 2 nodes");
  const auto heads = nvls_heads(p, rank_gpus);
  const auto trees = double_binary_tree(nodes);
  // Planted: every channel's head is the node's first, so one NIC carries all inter-node traffic.
  const bool one_head = fault_active(Fault::nvls_tree_one_head);
  auto head = [&](int v, int c) {
    const auto& h = heads[static_cast<size_t>(v)];
    return one_head ? h.front() : h[static_cast<size_t>(c / 2) % h.size()];
  };
  std::vector<TreeChannel> out;
  for (int c = 0; c < channels; ++c) {
    TreeChannel tc;
    tc.tree = c % 2;
    tc.parent.assign(rank_gpus.size(), -1);
    for (int v = 0; v < nodes; ++v) {
      const int hv = head(v, c);
      for (int r : chains[static_cast<size_t>(v)])
        if (r != hv) tc.parent[static_cast<size_t>(r)] = hv;
      const int pv = trees[static_cast<size_t>(tc.tree)].parent[static_cast<size_t>(v)];
      if (pv >= 0) tc.parent[static_cast<size_t>(hv)] = head(pv, c);
    }
    tc.root = head(trees[static_cast<size_t>(tc.tree)].root, c);
    fill_children(tc);
    out.push_back(std::move(tc));
  }
  return out;
}

}  // namespace dpt::sim
