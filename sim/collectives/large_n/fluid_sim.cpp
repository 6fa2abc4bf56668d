// The CM02 fluid simulation of a transfer DAG (see fluid_sim.hpp).
#include "sim/collectives/large_n/fluid_sim.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

#include "engine/core/fault_injection.hpp"

namespace dpt::sim {

namespace {

class FluidSim {
 public:
  FluidSim(const std::vector<FluidTransfer>& ts, const Platform* p) : ts_(ts), p_(p) {}

  // End time of every transfer (those that wait for nothing start at 0).
  std::vector<Seconds> run() {
    const int n = static_cast<int>(ts_.size());
    end_.assign(n, -1);
    link_of_.clear();
    link_of_id_.clear();
    bw_.clear();
    flow_links_.clear();
    flows_.assign(n, {});
    gated_.assign(n, -1);
    for (int i = 0; i < n; ++i)
      if (ts_[i].gate >= 0) {
        if (ts_[i].gate >= n || gated_[ts_[i].gate] >= 0)
          throw std::invalid_argument("fluid_sim: a gate out of range or named twice");
        gated_[ts_[i].gate] = i;
      }
    const bool unweighted = fault_active(Fault::fluid_sim_unweighted_sharing);  // planted fault
    for (int i = 0; i < n; ++i) {
      Flow& f = flows_[i];
      f.waits = ts_[i].waits;
      const RouteInfo* r = ts_[i].route;
      f.lat = r->latency_s;
      f.weight = r->latency_s > 0 && !unweighted ? 1.0 / r->latency_s : 1.0;
      f.rem = ts_[i].bytes;
      f.first_link = static_cast<int>(flow_links_.size());
      for (size_t j = 0; j < r->links.size(); ++j)
        flow_links_.push_back(p_ && r->link_ids.size() == r->links.size() ? link_index(r->link_ids[j]) : link_index(r->links[j]));
      f.last_link = static_cast<int>(flow_links_.size());
    }
    usage_.assign(bw_.size(), 0);
    cap_.assign(bw_.size(), 0);
    version_.assign(bw_.size(), 0);
    on_link_.assign(bw_.size(), {});
    count_.assign(bw_.size(), 0);
    queued_.assign(bw_.size(), 0);
    link_seen_.assign(bw_.size(), 0);
    flow_seen_.assign(n, 0);
    stamp_ = 0;
    changed_flows_.clear();
    changed_links_.clear();
    for (int i = 0; i < n; ++i)
      if (flows_[i].waits == 0) start(i, 0.0);
    double t = 0;
    bool stalled = false;
    std::vector<int> done;
    while (!lat_heap_.empty() || !active_.empty()) {
      if (dirty_) share();
      double t_next = std::numeric_limits<double>::infinity();
      if (!lat_heap_.empty()) t_next = lat_heap_.top().first;
      for (int i : active_) t_next = std::min(t_next, t + flows_[i].rem / flows_[i].rate);
      if (!std::isfinite(t_next)) {  // only flows with no bandwidth left: cannot happen on real links
        stalled = true;
        break;
      }
      const double dt = t_next - t;
      t = t_next;
      const double eps_t = 1e-9 * t + 1e-15;
      done.clear();
      for (int i : active_) {
        Flow& f = flows_[i];
        if (std::isinf(f.rate)) {  // a route without links: done as soon as its latency is paid
          done.push_back(i);
          continue;
        }
        f.rem -= f.rate * dt;
        if (f.rem <= f.rate * eps_t) done.push_back(i);
      }
      while (!lat_heap_.empty() && lat_heap_.top().first <= t + eps_t) {
        const int i = lat_heap_.top().second;
        lat_heap_.pop();
        latency_paid(i, t);
      }
      if (!done.empty()) {
        dirty_ = true;
        for (int i : done) {
          flows_[i].ended = true;
          leave_links(i);
        }
        std::erase_if(active_, [&](int i) { return flows_[i].ended; });
        for (int i : done) finish(i, t);
      }
    }
    // Every transfer starts once what it waits for (and its gate) ended: one that never
    // did sits in a cycle of waits and gates.
    for (int i = 0; i < n; ++i)
      if (end_[i] < 0)
        throw std::logic_error("fluid_sim: transfer " + std::to_string(i) + " never ended (" +
                               (stalled ? "flows left with no bandwidth" : "a cycle of waits or gates") + ")");
    return end_;
  }

 private:
  struct Flow {
    int waits = 0;
    double lat = 0, weight = 1, rem = 0, rate = 0;
    int first_link = 0, last_link = 0;
    bool ended = false;
    bool parked = false;  // latency paid, waiting for its gate to end
  };

  // A link's index, first met first: by object, or by id on a platform (a mirrored
  // node's link has no object).
  int link_index(const simgrid::s4u::Link* l) {
    auto [it, added] = link_of_.try_emplace(l, static_cast<int>(bw_.size()));
    if (added) bw_.push_back(l->get_bandwidth());
    return it->second;
  }
  int link_index(int id) {
    auto [it, added] = link_of_id_.try_emplace(id, static_cast<int>(bw_.size()));
    if (added) bw_.push_back(p_->link_bandwidth(id));
    return it->second;
  }

  void start(int i, double t) {
    Flow& f = flows_[i];
    if (f.lat > 0) lat_heap_.push({t + f.lat, i});
    else latency_paid(i, t);
  }
  // Its bytes flow now, unless its gate has not ended (then they flow when it does).
  void latency_paid(int i, double t) {
    Flow& f = flows_[i];
    const int g = ts_[i].gate;
    if (g >= 0 && end_[g] < 0 && !fault_active(Fault::fluid_sim_gate_ignored)) {
      f.parked = true;
      return;
    }
    if (f.rem > 0) activate(i);
    else finish(i, t);
  }
  void activate(int i) {
    active_.push_back(i);
    changed_flows_.push_back(i);
    Flow& f = flows_[i];
    for (int k = f.first_link; k < f.last_link; ++k) on_link_[flow_links_[k]].push_back(i);
    dirty_ = true;
  }
  // A flow that stopped transferring leaves its links' lists; their other flows may
  // speed up.
  void leave_links(int i) {
    const Flow& f = flows_[i];
    for (int k = f.first_link; k < f.last_link; ++k) {
      const int l = flow_links_[k];
      auto& on = on_link_[l];
      on.erase(std::find(on.begin(), on.end(), i));
      changed_links_.push_back(l);
    }
  }
  void finish(int i, double t) {
    end_[i] = t;
    if (const int j = gated_[i]; j >= 0 && flows_[j].parked) {
      flows_[j].parked = false;
      latency_paid(j, t);
    }
    for (int j : ts_[i].then)
      if (--flows_[j].waits == 0) start(j, t);
  }

  // Weighted max-min (progressive filling): the link with the least capacity per unit
  // of weight saturates first; its flows get that share times their weight.
  // Only the flows connected to a flow that started or stopped (through links they
  // share, transitively) can change rate: the others' links carry the same flows as at
  // the last share, and max-min on one component never reads another's links, so
  // their rates stay as they were, to the bit.
  void share() {
    dirty_ = false;
    std::vector<int>& links = touched_;
    links.clear();
    component_.clear();
    ++stamp_;
    auto visit_link = [&](int l) {
      if (link_seen_[l] == stamp_) return;
      link_seen_[l] = stamp_;
      links.push_back(l);
    };
    auto visit_flow = [&](int i) {
      if (flow_seen_[i] == stamp_ || flows_[i].ended) return;
      flow_seen_[i] = stamp_;
      component_.push_back(i);
      for (int k = flows_[i].first_link; k < flows_[i].last_link; ++k) visit_link(flow_links_[k]);
    };
    for (int i : changed_flows_) visit_flow(i);
    for (int l : changed_links_) visit_link(l);
    changed_flows_.clear();
    changed_links_.clear();
    for (size_t q = 0; q < links.size(); ++q)
      for (int i : on_link_[links[q]]) visit_flow(i);
    // In the order of active_, so every sum below adds in the order it always did.
    component_.clear();
    for (int i : active_)
      if (flow_seen_[i] == stamp_) component_.push_back(i);
    for (int l : links) {
      usage_[l] = 0;
      cap_[l] = bw_[l];
    }
    for (int i : component_) {
      Flow& f = flows_[i];
      f.rate = -1;
      for (int k = f.first_link; k < f.last_link; ++k) usage_[flow_links_[k]] += f.weight;
    }
    size_t left = component_.size();
    // Links by capacity per unit of weight, least first; entries made stale by a later
    // change of the link (its version) are skipped.
    heap_ = {};
    for (int l : links) {
      count_[l] = static_cast<int>(on_link_[l].size());
      version_[l] = 0;
      heap_.push({cap_[l] / usage_[l], l, 0});
    }
    while (left > 0 && !heap_.empty()) {
      const auto [m, best, ver] = heap_.top();
      heap_.pop();
      if (ver != version_[best] || count_[best] <= 0) continue;
      // Fix every flow of `best`, then requeue each other link they cross once, at its
      // final key: the entries a push per flow made were stale by the next flow, so the
      // order in which links saturate, and every rate, are the same.
      changed_.clear();
      for (int i : on_link_[best]) {
        Flow& f = flows_[i];
        if (f.rate >= 0) continue;
        f.rate = m * f.weight;
        --left;
        for (int k = f.first_link; k < f.last_link; ++k) {
          const int l = flow_links_[k];
          cap_[l] = std::max(0.0, cap_[l] - f.rate);
          usage_[l] -= f.weight;
          --count_[l];
          if (l != best && !queued_[l]) queued_[l] = 1, changed_.push_back(l);
        }
      }
      for (int l : changed_) {
        queued_[l] = 0;
        if (count_[l] > 0) heap_.push({cap_[l] / usage_[l], l, ++version_[l]});
      }
      count_[best] = 0;
    }
    for (int i : component_)
      if (flows_[i].rate < 0) flows_[i].rate = std::numeric_limits<double>::infinity();  // no links
  }

  const std::vector<FluidTransfer>& ts_;
  std::vector<Flow> flows_;
  std::vector<int> flow_links_;
  std::vector<int> gated_;  // per transfer: the one it gates (-1: none)
  std::unordered_map<const simgrid::s4u::Link*, int> link_of_;
  std::unordered_map<int, int> link_of_id_;
  const Platform* p_ = nullptr;
  std::vector<double> bw_, usage_, cap_;
  std::vector<std::vector<int>> on_link_;
  std::vector<int> count_, version_;
  std::vector<int> active_, touched_;
  std::vector<int> changed_;        // links whose share changed while fixing one link's flows
  std::vector<unsigned char> queued_;  // per link: in changed_
  std::vector<int> changed_flows_, changed_links_;  // started flows, links of stopped ones, since the last share
  std::vector<int> component_;                       // the flows share() recomputes
  std::vector<unsigned> link_seen_, flow_seen_;      // == stamp_: visited in this share()
  unsigned stamp_ = 0;
  std::priority_queue<std::tuple<double, int, int>, std::vector<std::tuple<double, int, int>>, std::greater<>> heap_;
  std::vector<Seconds> end_;
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>> lat_heap_;
  bool dirty_ = false;
};

}  // namespace

std::vector<Seconds> fluid_sim_end_times(const std::vector<FluidTransfer>& transfers, const Platform* p) {
  return FluidSim(transfers, p).run();
}

}  // namespace dpt::sim
