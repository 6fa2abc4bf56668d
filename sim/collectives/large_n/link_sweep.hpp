// Transfers on links in a dense form, and the overlap loads the large-N estimates need,
// computed in one sorted sweep per link.
//
// An estimate asks, for every transfer i and every link l of its route, how many bytes
// the transfers on l move during i's busy interval: sum over o on l of
// w_o x |[start_i, end_i] ∩ [start_o, end_o]|, where w_o is o's rate (bytes per second
// of its interval) or, for the chain, its bytes. Summing pairwise costs the square of a
// link's transfer count, which at 32,768 ranks is most of a prediction's time. The same
// sum is the integral over i's interval of the step function "sum of w_o over the
// transfers active at t", whose running integral F_l one sort of l's interval ends gives:
// the load is F_l(end_i) - F_l(start_i). Equal to the pairwise sum up to rounding.
#pragma once
#include <unordered_map>
#include <vector>

#include "engine/core/units.hpp"
#include "sim/net/platform.hpp"

namespace dpt::sim {

// The links under a list of transfers, as dense ids.
struct LinkIncidence {
  std::vector<int> first;             // per transfer: its first incidence; transfers + 1 entries
  std::vector<int> link;              // per incidence: link id
  std::vector<int> owner;             // per incidence: the transfer
  std::vector<double> bandwidth;      // per link id, bytes per second
  std::vector<int> on_first;          // per link id: first entry of `on`; links + 1 entries
  std::vector<int> on;                // incidences grouped by link
  std::vector<int> on_owner;          // per entry of `on`: its incidence's transfer (owner[on[q]])
  int transfers() const { return static_cast<int>(first.size()) - 1; }
  int links() const { return static_cast<int>(bandwidth.size()); }
};

// The incidence of transfers whose routes are `routes` (one per transfer). Link ids are
// given in first-met order; `platform`, when given, is the one the routes' links belong
// to, whose dense link ids replace a hash map (LinkIndexer: the same ids).
LinkIncidence link_incidence(const std::vector<const RouteInfo*>& routes, const Platform* platform = nullptr);
// The incidence of `routes` listed `times` times over (transfer i of copy q at
// i + q x routes.size()): what link_incidence gives for that list, with each route's
// links looked up once (a tree head's pieces all cross the same edges).
LinkIncidence link_incidence_repeated(const std::vector<const RouteInfo*>& routes, int times,
                                      const Platform* platform = nullptr);

// Sorts the incidences by link again (on_first, on, on_owner) after `link` changed.
void regroup_by_link(LinkIncidence& inc);

// For every incidence k (transfer i = owner[k] on link l = link[k]): sum over the
// transfers o on l of weight[o] x the length of [start[i], end[i]] ∩ [start[o], end[o]]
// (i itself included). Intervals of zero or negative length add nothing.
// Links are independent, so a sweep over at least `split_from` incidences splits its links
// between two threads (by incidence count; each link's sums are the same whichever thread
// runs it). At 32,768 GPUs a tree head's sweep has ~4 x 10^6 incidences.
inline constexpr size_t kSweepSplitIncidences = size_t{1} << 20;
void overlap_loads(const LinkIncidence& inc, const std::vector<double>& start, const std::vector<double>& end,
                   const std::vector<double>& weight, std::vector<double>& out,
                   size_t split_from = kSweepSplitIncidences);
// The same over the first `transfers` transfers only (the others, and their incidences'
// loads, left out): what the loads of an incidence built for those transfers alone are,
// to the bit, since `on` lists each link's incidences in transfer order. `out` then holds
// the prefix's incidences only (first[transfers] entries).
void overlap_loads_prefix(const LinkIncidence& inc, int transfers, const std::vector<double>& start,
                          const std::vector<double>& end, const std::vector<double>& weight, std::vector<double>& out,
                          size_t split_from = kSweepSplitIncidences);

// The same sums pairwise: the definition, kept for the property test that checks the
// sweep against it. Cost: the sum over links of the square of their transfer counts.
void overlap_loads_pairwise(const LinkIncidence& inc, const std::vector<double>& start,
                            const std::vector<double>& end, const std::vector<double>& weight,
                            std::vector<double>& out);

}  // namespace dpt::sim
