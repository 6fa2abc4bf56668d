// Dense link incidence and swept overlap loads (see link_sweep.hpp).
#include "sim/collectives/large_n/link_sweep.hpp"

#include <algorithm>
#include <stdexcept>
#include <thread>
#include <utility>

#include "engine/core/fault_injection.hpp"

namespace sg4 = simgrid::s4u;

namespace dpt::sim {

namespace {
void group_by_link(LinkIncidence& inc);
}  // namespace

LinkIncidence link_incidence(const std::vector<const RouteInfo*>& routes, const Platform* platform) {
  LinkIncidence inc;
  LinkIndexer id(platform);
  // Transfers share routes (a tree's pieces, a chain's channels): each route's link ids
  // are found once and kept as a span of `route_ids`.
  std::unordered_map<const RouteInfo*, std::pair<int, int>> span_of;
  std::vector<int> route_ids;
  span_of.reserve(routes.size());
  inc.first.reserve(routes.size() + 1);
  size_t total = 0;
  for (const RouteInfo* r : routes) total += r->links.size();
  inc.link.reserve(total);
  inc.owner.reserve(total);
  for (const RouteInfo* r : routes) {
    auto [it, fresh] = span_of.try_emplace(r, static_cast<int>(route_ids.size()), 0);
    if (fresh) {
      const bool ids = r->link_ids.size() == r->links.size();  // routes from Platform::route carry them
      for (size_t j = 0; j < r->links.size(); ++j) {
        const sg4::Link* l = r->links[j];
        const auto [index, added] = ids ? id.index(l, r->link_ids[j]) : id.index(l);
        // A mirrored node's link has no object: its bandwidth comes by id.
        if (added) inc.bandwidth.push_back(l ? l->get_bandwidth() : platform->link_bandwidth(r->link_ids[j]));
        route_ids.push_back(index);
      }
      it->second.second = static_cast<int>(route_ids.size());
    }
    inc.first.push_back(static_cast<int>(inc.link.size()));
    const int owner = static_cast<int>(inc.first.size()) - 1;
    for (int k = it->second.first; k < it->second.second; ++k) {
      inc.link.push_back(route_ids[static_cast<size_t>(k)]);
      inc.owner.push_back(owner);
    }
  }
  inc.first.push_back(static_cast<int>(inc.link.size()));
  group_by_link(inc);
  return inc;
}

LinkIncidence link_incidence_repeated(const std::vector<const RouteInfo*>& routes, int times, const Platform* platform) {
  LinkIncidence inc = link_incidence(routes, platform);
  const int per_copy = inc.transfers();
  const int incidences = static_cast<int>(inc.link.size());
  inc.first.pop_back();
  inc.first.reserve(static_cast<size_t>(per_copy) * times + 1);
  inc.link.reserve(static_cast<size_t>(incidences) * times);
  inc.owner.reserve(inc.link.capacity());
  const bool unshifted = fault_active(Fault::large_n_repeat_owner_unshifted);  // planted: owners of copy 0
  for (int q = 1; q < times; ++q) {
    for (int i = 0; i < per_copy; ++i) inc.first.push_back(inc.first[static_cast<size_t>(i)] + q * incidences);
    for (int k = 0; k < incidences; ++k) {
      inc.link.push_back(inc.link[static_cast<size_t>(k)]);
      inc.owner.push_back(inc.owner[static_cast<size_t>(k)] + (unshifted ? 0 : q * per_copy));
    }
  }
  inc.first.push_back(static_cast<int>(inc.link.size()));
  group_by_link(inc);
  return inc;
}

namespace {
// Counting sort of the incidences by link: fills on_first and on.
void group_by_link(LinkIncidence& inc) {
  inc.on_first.assign(inc.bandwidth.size() + 1, 0);
  for (int l : inc.link) ++inc.on_first[static_cast<size_t>(l) + 1];
  for (size_t l = 0; l + 1 < inc.on_first.size(); ++l) inc.on_first[l + 1] += inc.on_first[l];
  inc.on.resize(inc.link.size());
  std::vector<int> fill(inc.on_first.begin(), inc.on_first.end() - 1);
  for (int k = 0; k < static_cast<int>(inc.link.size()); ++k) inc.on[static_cast<size_t>(fill[inc.link[k]]++)] = k;
  // The sweep reads a link's transfers in list order: side by side, one cache miss fewer
  // per incidence than owner[on[q]].
  inc.on_owner.resize(inc.on.size());
  for (size_t q = 0; q < inc.on.size(); ++q) inc.on_owner[q] = inc.owner[static_cast<size_t>(inc.on[q])];
}
}  // namespace

void regroup_by_link(LinkIncidence& inc) { group_by_link(inc); }

void overlap_loads(const LinkIncidence& inc, const std::vector<double>& start, const std::vector<double>& end,
                   const std::vector<double>& weight, std::vector<double>& out, size_t split_from) {
  overlap_loads_prefix(inc, inc.transfers(), start, end, weight, out, split_from);
}

namespace {
// The sweep of links [l_begin, l_end): writes the loads of their incidences (of the
// first `transfers` transfers) into `out`.
// A transfer's interval and weight side by side: the sweep reads them at random (by the
// incidences' owners), and at 32,768 ranks three separate arrays cost three cache misses
// per incidence instead of one.
struct Interval {
  double start, end, weight;
};
void sweep_links(const LinkIncidence& inc, const std::vector<int>& owners, int transfers,
                 const std::vector<Interval>& iv, std::vector<double>& out, int l_begin, int l_end, bool drop_own) {
  // Every interval's ends are breakpoints of F, so F there is the running integral when
  // the sweep reaches them: no search. The integral at a time counts the rate after the
  // previous breakpoint, whatever the order of the events at one time.
  struct Event {
    double time;
    double change;  // of the summed weight
    int q;          // the incidence's position in the link's list
    bool is_end;
  };
  std::vector<Event> events;
  std::vector<double> at_start;  // per position in the current link's list, from b
  for (int l = l_begin; l < l_end; ++l) {
    const int b = inc.on_first[l];
    // The link's incidences of the first `transfers` transfers lead its list.
    const int e = transfers >= inc.transfers()
                      ? inc.on_first[l + 1]
                      : static_cast<int>(std::partition_point(owners.begin() + b,
                                                              owners.begin() + inc.on_first[l + 1],
                                                              [&](int o) { return o < transfers; }) -
                                         owners.begin());
    if (e == b) continue;
    if (e - b == 1) {  // alone on its link: its own interval
      const int k = inc.on[b];
      const Interval& t = iv[static_cast<size_t>(owners[b])];
      out[k] = t.end > t.start && !drop_own ? t.weight * (t.end - t.start) : 0.0;
      continue;
    }
    events.clear();
    at_start.assign(static_cast<size_t>(e - b), 0.0);
    for (int q = b; q < e; ++q) {
      const Interval& t = iv[static_cast<size_t>(owners[q])];
      if (t.end <= t.start) continue;
      events.push_back({t.start, t.weight, q, false});
      events.push_back({t.end, -t.weight, q, true});
    }
    std::sort(events.begin(), events.end(), [](const Event& x, const Event& y) { return x.time < y.time; });
    double integral = 0, r = 0, last = events.empty() ? 0.0 : events.front().time;
    for (const Event& ev : events) {
      if (ev.time > last) integral += r * (ev.time - last), last = ev.time;
      r += ev.change;
      if (ev.is_end) {
        const int k = inc.on[ev.q];
        out[k] = std::max(0.0, integral - at_start[static_cast<size_t>(ev.q - b)]);
        if (drop_own) {
          const Interval& t = iv[static_cast<size_t>(owners[ev.q])];
          out[k] = std::max(0.0, out[k] + ev.change * (t.end - t.start));
        }
      } else {
        at_start[static_cast<size_t>(ev.q - b)] = integral;
      }
    }
  }
}
}  // namespace

void overlap_loads_prefix(const LinkIncidence& inc, int transfers, const std::vector<double>& start,
                          const std::vector<double>& end, const std::vector<double>& weight, std::vector<double>& out,
                          size_t split_from) {
  // Only the prefix's incidences (the first first[transfers]) get a load: at 32,768 ranks
  // the whole head has ~10^7 incidences, and zeroing arrays that long on every call was
  // a tenth of a prediction's time.
  const int prefix_end = transfers >= inc.transfers() ? static_cast<int>(inc.link.size()) : inc.first[transfers];
  out.assign(static_cast<size_t>(prefix_end), 0.0);
  const bool drop_own = fault_active(Fault::large_n_sweep_drops_own);  // planted: the transfer's own bytes left out
  const size_t n = static_cast<size_t>(std::min(transfers, inc.transfers()));
  std::vector<Interval> iv(n);
  for (size_t i = 0; i < n; ++i) iv[i] = {start[i], end[i], weight[i]};
  if (inc.on_owner.size() != inc.on.size())
    throw std::logic_error("overlap_loads: the incidence has no on_owner (lay it out as group_by_link does)");
  const std::vector<int>& owners = inc.on_owner;
  if (inc.on.size() < split_from || inc.links() < 2) {
    sweep_links(inc, owners, transfers, iv, out, 0, inc.links(), drop_own);
    return;
  }
  // The first link past half the incidences starts the second thread's share.
  const int half = inc.on_first.back() / 2;
  const int mid = std::clamp(
      static_cast<int>(std::upper_bound(inc.on_first.begin(), inc.on_first.end() - 1, half) - inc.on_first.begin()), 1,
      inc.links() - 1);
  const bool skip_half = fault_active(Fault::large_n_sweep_split_skips_half);  // planted: the second share unswept
  std::thread other([&] {
    if (!skip_half) sweep_links(inc, owners, transfers, iv, out, mid, inc.links(), drop_own);
  });
  sweep_links(inc, owners, transfers, iv, out, 0, mid, drop_own);
  other.join();
}

void overlap_loads_pairwise(const LinkIncidence& inc, const std::vector<double>& start,
                            const std::vector<double>& end, const std::vector<double>& weight,
                            std::vector<double>& out) {
  out.assign(inc.link.size(), 0.0);
  for (int l = 0; l < inc.links(); ++l)
    for (int q = inc.on_first[l]; q < inc.on_first[l + 1]; ++q) {
      const int k = inc.on[q], i = inc.owner[k];
      for (int s = inc.on_first[l]; s < inc.on_first[l + 1]; ++s) {
        const int o = inc.owner[inc.on[s]];
        const double overlap = std::min(end[i], end[o]) - std::max(start[i], start[o]);
        if (overlap > 0) out[k] += weight[o] * overlap;
      }
    }
}

}  // namespace dpt::sim
