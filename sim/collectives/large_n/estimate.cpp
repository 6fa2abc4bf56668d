// The estimates of the large-N formulation (see estimate.hpp).
#include "sim/collectives/large_n/estimate.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <unordered_set>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"

#include "sim/collectives/collective_exact.hpp"
#include "sim/collectives/large_n/phases.hpp"

namespace dpt::sim {

// The transfers of the first m pieces of a tree all-reduce, in a topological order:
// piece by piece, on every channel, the edges up (children before parents) and then down
// (parents before children). A transfer waits for its children's pieces on the way up,
// its parent's on the way down, and its own previous piece on the same edge (pipelined:
// its bytes follow that piece's, its gate, while its latency overlaps them; the slot of
// the piece NCCL_STEPS ahead is never waited for within a head of 3 pieces), so the
// transfers of the first q pieces are the first q x per_piece and wait on nothing after.
struct TreeEstimator::Head {
  int per_piece = 0;             // transfers per piece, all channels
  bool pipelined = false;
  std::vector<int> after_first;  // per transfer: its first entry in `after`; transfers + 1 entries
  std::vector<int> after;        // the transfers each one waits for
  std::vector<int> gate;         // pipelined: per transfer, the one its bytes follow (-1: none)
  std::vector<double> latency_s;
  LinkIncidence links;
  std::vector<double> load_scale;  // per link id: 1, or the rail fold's (see rail_fold)
};

namespace {
// A link's name as the platform gives it (platform.hpp): a link of node k is
// "n<k>.<kind><i>.<rest>" ("n12.gpu3.nvswitch_UP", "n0.nic7.ib_DOWN"), or another link of
// the node ("n0.upi_UP", "n0.nvl0-1_UP": no "<kind><i>." part, kind left empty); anything
// else ("leaf3.uplink_UP", "pod1.uplink_DOWN") is the fabric's.
struct LinkName {
  bool of_node = false;
  int node = -1, index = -1;
  std::string kind, rest;
};
LinkName parse_link_name(const std::string& name) {
  LinkName out;
  auto digit = [&](size_t i) { return i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); };
  auto alpha = [&](size_t i) { return i < name.size() && std::isalpha(static_cast<unsigned char>(name[i])); };
  size_t i = 1;
  if (name.empty() || name[0] != 'n' || !digit(i)) return out;
  while (digit(i)) ++i;
  if (i >= name.size() || name[i] != '.' || i - 1 > 6) return out;
  out.of_node = true;
  out.node = std::stoi(name.substr(1, i - 1));
  const size_t k = ++i;
  while (alpha(i)) ++i;
  const size_t d = i;
  while (digit(i)) ++i;
  if (d == k || i == d || i >= name.size() || name[i] != '.') return out;
  if (i - d > 6) return out;
  out.kind = name.substr(k, d - k);
  out.index = std::stoi(name.substr(d, i - d));
  out.rest = name.substr(i + 1);
  return out;
}
bool foldable_node_link(const LinkName& n) { return n.kind == "gpu" || n.kind == "nic"; }

// The rail fold of an incidence (see TreeEstimator): the links of one kind on one node
// that the turns by fold.step GPUs map onto each other (step 1: "n3.gpu5.nvswitch_UP" and
// "n3.gpu0.nvswitch_UP" both "n3.gpu*.nvswitch_UP"; step 2: even and odd GPUs apart) become
// one link id, loaded copies / (its links) times their sum; a fabric link copies times its
// own. `links_in_order`: the incidence's links (their Platform::link_id) by index.
void rail_fold(LinkIncidence& inc, const std::vector<int>& links_in_order, RailFold fold, const Platform& p,
               std::vector<double>& load_scale) {
  const HardwareSpec& hw = p.hardware();
  const int copies = fold.copies;
  // Planted: head 0's own loads only (no link merged, none multiplied).
  const bool unscaled = fault_active(Fault::nvls_tree_fold_unscaled);
  // A node link's class is (its node, its position's class): positions hold the same
  // kind of link on every node, so their names (node 0's) are parsed once, not per link.
  struct PositionClass {
    int id = -1;  // among the positions' classes; -1: not a GPU's or a NIC's link
    double per_node = 1;
  };
  const int per_node_links = p.links_per_node();
  std::vector<PositionClass> position_class(static_cast<size_t>(per_node_links));
  std::map<std::string, int> position_class_id;
  for (int i = 0; i < per_node_links; ++i) {
    const LinkName parsed = parse_link_name(p.node_link(0, i)->get_name());  // node 0 is always built
    if (!parsed.of_node || !foldable_node_link(parsed)) continue;
    const auto key = fmt::format("{}{}+{}k.{}", parsed.kind, parsed.index % fold.step, fold.step, parsed.rest);
    PositionClass& c = position_class[static_cast<size_t>(i)];
    c.id = position_class_id.emplace(key, static_cast<int>(position_class_id.size())).first->second;
    c.per_node = (parsed.kind == "gpu" ? hw.gpus_per_node : hw.network->nics_per_node) / fold.step;
  }
  const int classes_per_node = static_cast<int>(position_class_id.size());
  std::vector<int> node_class(static_cast<size_t>(hw.nodes) * static_cast<size_t>(std::max(classes_per_node, 1)), -1);
  std::map<std::string, int> class_id;  // the others' (the fabric's), by name
  std::vector<int> class_of(links_in_order.size());
  std::vector<double> bandwidth, scale;
  for (size_t l = 0; l < links_in_order.size(); ++l) {
    const auto [node, position] = p.node_link_position_of_id(links_in_order[l]);
    int* slot = nullptr;
    double per_node = 1;
    if (node >= 0 && !unscaled) {
      const PositionClass& c = position_class[static_cast<size_t>(position)];
      if (c.id < 0)
        throw std::logic_error(fmt::format("rail fold: link {} is neither a GPU's nor a NIC's", p.link_name(links_in_order[l])));
      slot = &node_class[static_cast<size_t>(node) * classes_per_node + c.id];
      per_node = c.per_node;
    } else {
      const std::string name = p.link_name(links_in_order[l]);
      if (!unscaled && parse_link_name(name).of_node)
        throw std::logic_error(fmt::format("rail fold: link {} is not among its node's links", name));
      slot = &class_id.emplace(name, -1).first->second;
    }
    if (*slot < 0) {
      *slot = static_cast<int>(bandwidth.size());
      bandwidth.push_back(inc.bandwidth[l]);
      scale.push_back(unscaled ? 1.0 : copies / per_node);
    } else if (bandwidth[static_cast<size_t>(*slot)] != inc.bandwidth[l]) {
      throw std::logic_error(fmt::format("rail fold: links of {}'s class differ in bandwidth", p.link_name(links_in_order[l])));
    }
    class_of[l] = *slot;
  }
  for (int& l : inc.link) l = class_of[static_cast<size_t>(l)];
  inc.bandwidth = std::move(bandwidth);
  regroup_by_link(inc);
  load_scale = std::move(scale);
}
}  // namespace

TreeEstimator::TreeEstimator(const Platform& p, std::vector<int> gpus, std::vector<TreeChannel> tcs, int head_pieces,
                             RailFold fold, int in_flight)
    : p_(p), gpus_(std::move(gpus)), tcs_(std::move(tcs)), head_pieces_(head_pieces), fold_(fold), in_flight_(in_flight) {
  // A pipelined head never waits for a buffer slot: its pieces are at most the slots.
  if (in_flight_ < 1 || (in_flight_ > 1 && in_flight_ < head_pieces_))
    throw std::invalid_argument(
        fmt::format("TreeEstimator: {} pieces in flight (1, or at least the head's {})", in_flight_, head_pieces_));
  if (fold_.copies < 1 || fold_.step < 1) throw std::invalid_argument("TreeEstimator: a rail fold needs copies and step of 1 or more");
  if (head_pieces_ < 1 || head_pieces_ > kHeadPieces)
    throw std::invalid_argument(fmt::format("TreeEstimator: head of {} pieces (allowed 1..{})", head_pieces_, kHeadPieces));
}
TreeEstimator::~TreeEstimator() = default;

const TreeEstimator::Head& TreeEstimator::head() {
  if (!head_) head_ = build_head(p_, gpus_, tcs_, head_pieces_, fold_, in_flight_ > 1);
  return *head_;
}

// Pipelined placement of the first e_count transfers (bytes, unshared latency + drain in
// `dur`): a transfer's bytes flow from the later of its latency paid (after the ones it
// waits for) and its gate's end, for its drain; the loads count each transfer over its
// bytes' span at its own rate (damped; up to 5 placements, fewer once the time settles:
// equal transfers that start together on a link converge to their shared drain more
// slowly than with their latency in it, as the unpipelined head's are). start/end: the
// bytes' span. Returns the last end.
Seconds TreeEstimator::place_pipelined(const std::vector<double>& bytes, const std::vector<double>& dur, int e_count,
                                       std::vector<double>& start, std::vector<double>& end) {
  const Head& h = head();
  const LinkIncidence& inc = h.links;
  // At most this many placements; fewer once the head's time moves by at most kSettled of itself.
  constexpr int kPipelinedPlacements = 5;
  constexpr double kSettled = 1e-3;
  std::vector<double> drain(static_cast<size_t>(e_count)), rate(drain.size()), load;
  start.assign(drain.size(), 0.0);
  end.assign(drain.size(), 0.0);
  for (int i = 0; i < e_count; ++i) drain[i] = dur[i] - h.latency_s[i];
  Seconds total = 0, previous = -1;
  for (int iter = 0; iter < kPipelinedPlacements; ++iter) {
    previous = total;
    total = 0;
    for (int i = 0; i < e_count; ++i) {
      double s = 0;
      for (int a = h.after_first[i]; a < h.after_first[i + 1]; ++a) s = std::max(s, end[h.after[a]]);
      s += h.latency_s[i];
      if (h.gate[i] >= 0) s = std::max(s, end[h.gate[i]]);
      start[i] = s;
      end[i] = s + drain[i];
      total = std::max(total, end[i]);
    }
    if (iter + 1 == kPipelinedPlacements || (iter > 0 && std::abs(total - previous) <= kSettled * total)) break;
    for (int i = 0; i < e_count; ++i) rate[i] = bytes[i] / std::max(drain[i], 1e-30);
    overlap_loads_prefix(inc, e_count, start, end, rate, load);
    for (int i = 0; i < e_count; ++i) {
      double d = 0;
      for (int k = inc.first[i]; k < inc.first[i + 1]; ++k)
        d = std::max(d, std::max(load[k] * h.load_scale[inc.link[k]], bytes[i]) / inc.bandwidth[inc.link[k]]);
      drain[i] = 0.5 * (drain[i] + d);
    }
  }
  return total;
}

// Pipelined, a head of m = 2 full pieces of `piece_bytes` (kPipelinedHeadPieces) placed
// once: its time, its last piece's increment (the end of piece m - 1 over that of piece
// m - 2), and piece 0's
// transfers on the link that bounds the period: each one's start and its share of the link
// per byte (the fold's scale over the link's bandwidth), and how long after the last of
// them ends piece 0's last transfer does.
const TreeEstimator::PipelinedHead& TreeEstimator::pipelined_head(Bytes piece_bytes) {
  if (auto it = pipelined_heads_.find(piece_bytes); it != pipelined_heads_.end()) return it->second;
  period(piece_bytes);
  const int link = period_link_.at(piece_bytes);
  const Head& h = head();
  const LinkIncidence& inc = h.links;
  const int m = std::min(head_pieces_, kPipelinedHeadPieces);
  const int e_count = m * h.per_piece;
  std::vector<double> bytes(static_cast<size_t>(e_count), static_cast<double>(piece_bytes)), dur(bytes.size()), start, end;
  for (int i = 0; i < e_count; ++i) {
    double drain = 0;
    for (int k = inc.first[i]; k < inc.first[i + 1]; ++k) drain = std::max(drain, bytes[i] / inc.bandwidth[inc.link[k]]);
    dur[i] = h.latency_s[i] + drain;
  }
  PipelinedHead out;
  out.pieces = m;
  out.total = place_pipelined(bytes, dur, e_count, start, end);
  std::vector<Seconds> piece_end(static_cast<size_t>(m), 0.0);
  for (int i = 0; i < e_count; ++i) piece_end[static_cast<size_t>(i / h.per_piece)] = std::max(piece_end[static_cast<size_t>(i / h.per_piece)], end[i]);
  out.marginal = m < 2 ? -1.0 : std::max(0.0, piece_end[static_cast<size_t>(m - 1)] - piece_end[static_cast<size_t>(m - 2)]);
  Seconds last = 0;
  for (int i = 0; i < h.per_piece; ++i)
    for (int k = inc.first[i]; k < inc.first[i + 1]; ++k)
      if (inc.link[k] == link) {
        out.streams.emplace_back(start[i], h.load_scale[link] / inc.bandwidth[link]);
        last = std::max(last, end[i]);
      }
  out.after = std::max(0.0, piece_end[0] - last);
  return pipelined_heads_.emplace(piece_bytes, std::move(out)).first->second;
}

// When a link is through with k pieces of each of its streams (stream j's piece i ready
// at s_j + i m, taking w_j of the link's time, the last piece w_last_j), served one after
// another as they come: the latest, over the instants t at which a piece becomes ready,
// of t plus the work of every piece ready at t or later.
static Seconds link_through(const std::vector<std::pair<Seconds, double>>& streams, Elements k, Seconds m, double full_bytes,
                     double last_bytes) {
  auto ready_from = [&](Seconds t, Seconds s) -> Elements {  // index of a stream's first piece ready at t or later
    if (t <= s) return 0;
    if (m <= 0) return k;
    const double i = std::ceil((t - s) / m - 1e-9);
    return i >= static_cast<double>(k) ? k : static_cast<Elements>(i);
  };
  Seconds through = 0;
  for (const auto& [s0, w0] : streams) {
    (void)w0;
    const Elements instants = m > 0 ? k : 1;
    for (Elements i = 0; i < instants; ++i) {
      const Seconds t = s0 + static_cast<double>(i) * m;
      double work = 0;
      for (const auto& [s, w] : streams) {
        const Elements from = ready_from(t, s);
        if (from >= k) continue;
        work += w * (static_cast<double>(k - 1 - from) * full_bytes + last_bytes);
      }
      through = std::max(through, t + work);
    }
  }
  return through;
}

// The time of the first pieces of a tree all-reduce (sizes in `pieces`): every transfer
// placed after the ones it waits for, each taking its latency plus its bytes times its
// share of its busiest link over that link's bandwidth. The share is the average number
// of transfers on the link during it, found by iterating from unshared durations
// (damped, four placements).
Seconds TreeEstimator::head_time(const std::vector<Bytes>& pieces) {
  if (auto it = head_times_.find(pieces); it != head_times_.end()) return it->second;
  const int m = static_cast<int>(pieces.size());
  if (m > head_pieces_)
    throw std::logic_error(fmt::format("TreeEstimator: a head of {} pieces on a graph of {}", m, head_pieces_));
  const Head& h = head();
  const LinkIncidence& inc = h.links;
  // The call's head is the graph's prefix; planted: the whole graph placed, the pieces
  // past the call's own given its last piece's size.
  const int e_count = fault_active(Fault::large_n_head_prefix_uncut) ? inc.transfers() : m * h.per_piece;
  std::vector<double> bytes(static_cast<size_t>(e_count)), dur(bytes.size()), start(bytes.size()),
      end(bytes.size()), rate(bytes.size()), load;
  for (int i = 0; i < e_count; ++i) {
    bytes[i] = static_cast<double>(pieces[static_cast<size_t>(std::min(i / h.per_piece, m - 1))]);
    double drain = 0;
    for (int k = inc.first[i]; k < inc.first[i + 1]; ++k) drain = std::max(drain, bytes[i] / inc.bandwidth[inc.link[k]]);
    dur[i] = h.latency_s[i] + drain;
  }
  Seconds total = 0;
  constexpr int kPlacements = 4;
  if (h.pipelined) {
    total = place_pipelined(bytes, dur, e_count, start, end);
    head_times_.emplace(pieces, total);
    return total;
  }
  for (int iter = 0; iter < kPlacements; ++iter) {
    total = 0;
    for (int i = 0; i < e_count; ++i) {
      double s = 0;
      for (int a = h.after_first[i]; a < h.after_first[i + 1]; ++a) s = std::max(s, end[h.after[a]]);
      start[i] = s;
      end[i] = s + dur[i];
      total = std::max(total, end[i]);
    }
    if (iter + 1 == kPlacements) break;  // the last placement's durations are not used
    // A transfer's load on a link: every transfer there, at its own rate, during this one.
    for (int i = 0; i < e_count; ++i) rate[i] = bytes[i] / std::max(dur[i], 1e-30);
    overlap_loads_prefix(inc, e_count, start, end, rate, load);
    for (int i = 0; i < e_count; ++i) {
      double drain = 0;
      for (int k = inc.first[i]; k < inc.first[i + 1]; ++k)
        drain = std::max(drain, std::max(load[k] * h.load_scale[inc.link[k]], bytes[i]) / inc.bandwidth[inc.link[k]]);
      dur[i] = 0.5 * (dur[i] + h.latency_s[i] + drain);
    }
  }
  head_times_.emplace(pieces, total);
  return total;
}

// The steady-state period with pieces of `piece_bytes`: every edge of every channel, up
// and down, busy at once (a phase: see phases.hpp); the head's piece 0 is those edges.
Seconds TreeEstimator::period(Bytes piece_bytes) {
  if (auto it = periods_.find(piece_bytes); it != periods_.end()) return it->second;
  const Head& h = head();
  const LinkIncidence& inc = h.links;
  if (period_count_.empty()) {
    period_count_.assign(static_cast<size_t>(inc.links()), 0.0);
    for (int k = 0; k < inc.first[h.per_piece]; ++k) period_count_[inc.link[k]] += 1;
    for (size_t l = 0; l < period_count_.size(); ++l) period_count_[l] *= h.load_scale[l];
  }
  const double b = static_cast<double>(piece_bytes);
  Seconds t = 0, busiest = -1;
  int busiest_link = -1;
  for (int i = 0; i < h.per_piece; ++i) {
    double drain = 0;
    for (int k = inc.first[i]; k < inc.first[i + 1]; ++k) {
      const int l = inc.link[k];
      const double d = b * period_count_[l] / inc.bandwidth[l];
      drain = std::max(drain, d);
      if (d > busiest) busiest = d, busiest_link = l;
    }
    // Pipelined, a hop's latency overlaps the pieces ahead of it unless it outlasts the
    // in_flight pieces' bytes (the buffer's slots all in flight).
    t = std::max(t, h.pipelined ? std::max(drain, (h.latency_s[i] + drain) / in_flight_) : h.latency_s[i] + drain);
  }
  periods_.emplace(piece_bytes, t);
  period_link_.emplace(piece_bytes, busiest_link);
  return t;
}

namespace {
// Pieces per channel of a tree call (channel 0 has the most), the first and the last
// piece's bytes.
struct TreePieces {
  Elements k = 0;
  Bytes full = 0, last = 0;
};
TreePieces tree_pieces(const CollectiveCall& call, int channels, Elements piece) {
  const Elements elems = ceil_div(call.count, channels);
  const Elements k = ceil_div(elems, piece);
  return {k, std::min(piece, elems) * call.element_bytes, (elems - (k - 1) * piece) * call.element_bytes};
}
}  // namespace

Seconds TreeEstimator::estimate(const CollectiveCall& call, Elements piece) {
  const auto [k, full, last] = tree_pieces(call, static_cast<int>(tcs_.size()) * fold_.copies, piece);
  const int m = static_cast<int>(std::min<Elements>(k, head_pieces_));
  std::vector<Bytes> head(static_cast<size_t>(m), full);
  if (m == k) head.back() = last;
  if (k <= m || !TreeEstimator::head().pipelined) {
    Seconds t = head_time(head);
    if (k > m) t += static_cast<double>(k - m - 1) * period(full) + period(last);
    return t;
  }
  // Pipelined, the larger of two bounds. The pieces past the head follow one another at
  // no less than the head's last piece added (its second over its first), or the
  // period if shorter; and the link that bounds the period carries every piece of each of
  // its streams (piece 0's transfers on it) as they become ready, each stream from when
  // its piece 0 starts there, one piece per that increment (link_through), after which
  // piece 0's last transfers take what they take after it. (Adding periods after the
  // head instead counts the head's pieces twice where the fill takes many piece times: a
  // tree's up traffic runs alone on its links until pieces come back down.)
  const Seconds p_full = period(full);
  const PipelinedHead& ph = pipelined_head(full);
  const Seconds marginal = ph.marginal < 0 ? p_full : std::min(p_full, ph.marginal);
  // The last piece adds its share of a full one's increment.
  const Seconds chained = ph.total + (static_cast<double>(k - ph.pieces - 1) +
                                      static_cast<double>(last) / static_cast<double>(full)) * marginal;
  const Seconds carried =
      link_through(ph.streams, k, marginal, static_cast<double>(full), static_cast<double>(last)) + ph.after;
  return std::max(chained, carried);
}

Seconds tree_estimate(const Platform& p, const std::vector<int>& gpus, const std::vector<TreeChannel>& tcs,
                      const CollectiveCall& call, Elements piece, int in_flight) {
  const Elements k = tree_pieces(call, static_cast<int>(tcs.size()), piece).k;
  const int m = static_cast<int>(std::clamp<Elements>(k, 1, TreeEstimator::kHeadPieces));
  return TreeEstimator(p, gpus, tcs, m, {}, in_flight).estimate(call, piece);
}

std::unique_ptr<TreeEstimator::Head> TreeEstimator::build_head(const Platform& p, const std::vector<int>& gpus,
                                                              const std::vector<TreeChannel>& tcs, int m,
                                                              RailFold fold, bool pipelined) {
  const int n = static_cast<int>(gpus.size());
  auto h = std::make_unique<TreeEstimator::Head>();
  h->pipelined = pipelined;
  std::vector<const RouteInfo*> routes;
  h->after_first.push_back(0);
  int added = 0;
  // Every piece crosses piece 0's routes in the same order: only those are listed.
  auto add = [&](const RouteInfo& route, int gate) {
    if (h->per_piece == 0) routes.push_back(&route);
    h->latency_s.push_back(route.latency_s);
    h->gate.push_back(gate);
    h->after_first.push_back(static_cast<int>(h->after.size()));
    return added++;
  };
  // Per channel: its ranks in post-order (children before parents) and its edges' routes,
  // looked up once for every piece; up[r], down[r]: the transfer of the latest piece over
  // r -> parent and parent -> r.
  struct Channel {
    std::vector<int> post;
    std::vector<const RouteInfo*> up_route, down_route;
    std::vector<int> up, down;
  };
  std::vector<Channel> chs(tcs.size());
  for (size_t c = 0; c < tcs.size(); ++c) {
    const TreeChannel& tc = tcs[c];
    Channel& ch = chs[c];
    std::vector<int> stack{tc.root};
    while (!stack.empty()) {
      const int r = stack.back();
      stack.pop_back();
      ch.post.push_back(r);
      for (int child : tc.children[r]) stack.push_back(child);
    }
    std::reverse(ch.post.begin(), ch.post.end());
    ch.up_route.assign(n, nullptr), ch.down_route.assign(n, nullptr);
    for (int r : ch.post)
      if (tc.parent[r] >= 0) {
        ch.up_route[r] = &p.gpu_route(gpus[r], gpus[tc.parent[r]]);
        ch.down_route[r] = &p.gpu_route(gpus[tc.parent[r]], gpus[r]);
      }
    ch.up.assign(n, -1), ch.down.assign(n, -1);
  }
  for (int q = 0; q < m; ++q) {
    for (size_t c = 0; c < tcs.size(); ++c) {
      const TreeChannel& tc = tcs[c];
      Channel& ch = chs[c];
      // up[r] and down[r] still hold piece q - 1's transfers until r's own are added.
      for (int r : ch.post) {
        if (tc.parent[r] < 0) continue;
        for (int child : tc.children[r]) h->after.push_back(ch.up[child]);
        if (q > 0 && !pipelined) h->after.push_back(ch.up[r]);
        ch.up[r] = add(*ch.up_route[r], q > 0 && pipelined ? ch.up[r] : -1);
      }
      for (auto it = ch.post.rbegin(); it != ch.post.rend(); ++it) {
        const int r = *it;
        const int parent = tc.parent[r];
        if (parent < 0) continue;
        if (parent == tc.root) {
          for (int child : tc.children[tc.root]) h->after.push_back(ch.up[child]);
        } else {
          h->after.push_back(ch.down[parent]);
        }
        if (q > 0 && !pipelined) h->after.push_back(ch.down[r]);
        ch.down[r] = add(*ch.down_route[r], q > 0 && pipelined ? ch.down[r] : -1);
      }
    }
    if (q == 0) h->per_piece = added;
  }
  h->links = link_incidence_repeated(routes, m, &p);
  if (fold.copies > 1) {
    // The incidence's links by id: first met along piece 0's routes (link_incidence's order).
    std::vector<int> in_order;
    std::unordered_set<int> seen;
    for (const RouteInfo* r : routes)
      for (const int id : r->link_ids)
        if (seen.insert(id).second) in_order.push_back(id);
    if (static_cast<int>(in_order.size()) != h->links.links())
      throw std::logic_error("rail fold: the incidence's links are not its routes' in order");
    rail_fold(h->links, in_order, fold, p, h->load_scale);
  } else {
    h->load_scale.assign(static_cast<size_t>(h->links.links()), 1.0);
  }
  return h;
}

namespace {
// Whether `gpus` are whole nodes in GPU order (rank v g + i is GPU i of a node), each GPU on
// its own NIC (GPU i on NIC i), the node chains in GPU order, and the routes alike from
// every rail: GPU i to GPU h within a node for every i != h, GPU h of one node to GPU h of
// the next, each over GPU, NIC and fabric links only (what the fold knows).
bool rails_alike(const Platform& p, const std::vector<int>& gpus) {
  const HardwareSpec& hw = p.hardware();
  if (!hw.network || hw.network->nics_per_node != hw.gpus_per_node) return false;
  const int g = hw.gpus_per_node;
  if (gpus.size() % static_cast<size_t>(g) != 0 || gpus.size() < 2 * static_cast<size_t>(g)) return false;
  for (size_t r = 0; r < gpus.size(); ++r)
    if (p.local_index(gpus[r]) != static_cast<int>(r % static_cast<size_t>(g)) ||
        p.node_of_gpu(gpus[r]) != p.node_of_gpu(gpus[r - r % static_cast<size_t>(g)]))
      return false;
  for (int i = 0; i < g; ++i)
    if (p.nic_of_gpu(i) != i) return false;
  const auto chains = node_chains(p, gpus);
  for (size_t v = 0; v < chains.size(); ++v)
    for (int i = 0; i < g; ++i)
      if (chains[v].size() != static_cast<size_t>(g) || chains[v][static_cast<size_t>(i)] != static_cast<int>(v) * g + i)
        return false;
  auto signature = [&](int a, int b) {
    std::vector<std::pair<double, double>> sig;
    const RouteInfo& r = p.gpu_route(a, b);
    for (const int id : r.link_ids) {
      const LinkName parsed = parse_link_name(p.link_name(id));
      if (parsed.of_node && !foldable_node_link(parsed))
        sig.emplace_back(-1, -1);  // a switch uplink, a socket link, an NVLink bundle: not foldable
      else
        sig.emplace_back(p.link_bandwidth(id), p.link_latency(id));
    }
    return sig;
  };
  const int n0 = gpus[0], n1 = gpus[static_cast<size_t>(g)];
  const auto intra = signature(n0 + 1, n0), inter = signature(n0, n1);
  for (const auto& s : {intra, inter})
    for (const auto& e : s)
      if (e.first < 0) return false;
  for (int h = 0; h < g; ++h) {
    if (signature(n0 + h, n1 + h) != inter) return false;
    for (int i = 0; i < g; ++i)
      if (i != h && signature(n0 + i, n0 + h) != intra) return false;
  }
  return true;
}
}  // namespace

RailFold nvls_tree_rail_fold(const Platform& p, const std::vector<int>& gpus, int channels) {
  const int g = p.hardware().gpus_per_node;
  if (channels != 2 * g || !rails_alike(p, gpus)) return {};
  return {g, 1};
}

RailFold tree_rail_fold(const Platform& p, const std::vector<int>& gpus, int channels) {
  const int g = p.hardware().gpus_per_node;
  if (channels != 2 * g || fault_active(Fault::tree_one_tree_per_nic) || !rails_alike(p, gpus)) return {};
  return {g, 1};
}

// A ring broadcast or reduce: on every channel a pipelined chain of n - 1 hops along the
// ring from the root (or to it), cut into k pieces. The chain is a flow shop: hop j sends
// piece i once it has received piece i over hop j - 1 and finished sending piece i - 1.
// With a constant duration t_j per piece, piece i leaves hop j at S_j + i M_j (S_j the
// sum, M_j the maximum of t_0..t_j), so hop j is busy from S_j - t_j to S_j + (k-1) M_j.
// A hop's duration is its latency plus its busiest link's drain, the link's load being
// the bytes per piece of every hop (any channel) on it weighted by how much of this hop's
// busy interval that hop's busy interval overlaps; found by iterating from unshared
// durations (damped, as the tree's head). The last piece then runs through the same
// recurrence at its own size.
ChainLinks chain_links(const Platform& p, const std::vector<int>& gpus, const std::vector<std::vector<int>>& chains) {
  ChainLinks out;
  out.channels = static_cast<int>(chains.size());
  out.hops = static_cast<int>(gpus.size()) - 1;
  for (const auto& o : chains)
    for (int q = 0; q < out.hops; ++q) out.routes.push_back(&p.gpu_route(gpus[o[q]], gpus[o[q + 1]]));
  out.links = link_incidence(out.routes, &p);
  return out;
}

Seconds chain_time(const Platform& p, const std::vector<int>& gpus, const std::vector<std::vector<int>>& chains,
                   const CollectiveCall& call, Elements piece) {
  return chain_time(chain_links(p, gpus, chains), call, piece);
}

Seconds chain_time(const ChainLinks& chain, const CollectiveCall& call, Elements piece) {
  const int channels = chain.channels;
  const int hops = chain.hops;
  const auto& routes = chain.routes;
  const LinkIncidence& inc = chain.links;
  struct Channel {
    Elements pieces = 0;
    double last = 0;  // bytes of the last piece
  };
  std::vector<Channel> chs(static_cast<size_t>(channels));
  std::vector<double> bytes;  // of a full piece, per hop
  for (int c = 0; c < channels; ++c) {
    const Elements elems = piece_count(call.count, channels, c);
    Channel& ch = chs[c];
    ch.pieces = ceil_div(elems, piece);
    const double full = static_cast<double>(std::min(piece, elems) * call.element_bytes);
    ch.last = static_cast<double>((elems - std::max<Elements>(ch.pieces - 1, 0) * piece) * call.element_bytes);
    bytes.insert(bytes.end(), static_cast<size_t>(hops), full);
  }
  const size_t total_hops = routes.size();
  std::vector<double> dur(total_hops), from(total_hops, 0.0), to(total_hops, 0.0), load;
  auto drain_under = [&](size_t i, auto&& load_on) {
    Seconds drain = 0;
    for (int k = inc.first[i]; k < inc.first[i + 1]; ++k)
      drain = std::max(drain, std::max(load_on(k), bytes[i]) / inc.bandwidth[inc.link[k]]);
    return routes[i]->latency_s + drain;
  };
  for (size_t i = 0; i < total_hops; ++i) dur[i] = drain_under(i, [](int) { return 0.0; });
  auto place = [&]() {
    for (int c = 0; c < channels; ++c) {
      if (chs[c].pieces == 0) continue;
      Seconds sum = 0, max = 0;
      for (int j = 0; j < hops; ++j) {
        const size_t i = static_cast<size_t>(c) * hops + j;
        from[i] = sum;
        sum += dur[i];
        max = std::max(max, dur[i]);
        to[i] = sum + static_cast<double>(chs[c].pieces - 1) * max;
      }
    }
  };
  std::vector<Seconds> next(total_hops);
  for (int iter = 0; iter < 6; ++iter) {
    place();
    // Bytes of every hop on the link times its overlap with this hop, over this hop's span.
    overlap_loads(inc, from, to, bytes, load);
    for (size_t i = 0; i < total_hops; ++i) {
      const double span = std::max(to[i] - from[i], 1e-30);
      next[i] = drain_under(i, [&](int k) { return load[k] / span; });
    }
    for (size_t i = 0; i < total_hops; ++i) dur[i] = 0.5 * (dur[i] + next[i]);
  }
  place();
  Seconds total = 0;
  for (int c = 0; c < channels; ++c) {
    const Channel& ch = chs[c];
    if (ch.pieces == 0) continue;
    // The last piece: leaves hop j after the previous piece left it and after it
    // arrived over hop j - 1; it drains at its own size under the same sharing.
    Seconds arrived = 0, sum = 0, max = 0;
    for (int j = 0; j < hops; ++j) {
      const size_t i = static_cast<size_t>(c) * hops + j;
      sum += dur[i];
      max = std::max(max, dur[i]);
      const Seconds prev_left = ch.pieces >= 2 ? sum + static_cast<double>(ch.pieces - 2) * max : 0;
      const double ratio = bytes[i] > 0 ? ch.last / bytes[i] : 1.0;
      const Seconds own = routes[i]->latency_s + (dur[i] - routes[i]->latency_s) * ratio;
      arrived = std::max(arrived, prev_left) + own;
    }
    total = std::max(total, arrived);
  }
  return total;
}

}  // namespace dpt::sim
