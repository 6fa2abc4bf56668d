// Test support for the twin's backend tests: a small hand-built platform (each
// endpoint on its own link, a route crossing the two endpoints' links) and a
// simple per-step ring collective timer, so SimDevice, SimBackend and
// SimCommunicator are tested without the hardware library.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <simgrid/s4u.hpp>

#include "sim/twin/sim_backend.hpp"

namespace dpt::test {

namespace s4u = simgrid::s4u;

// Runs fn in a forked child (one SimGrid Engine per process) and returns its string;
// an exception in the child becomes a std::runtime_error with its message.
inline std::string run_forked(const std::function<std::string()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::fflush(nullptr);  // buffered output would otherwise be written by both processes
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    char tag = 'K';
    std::string payload;
    try {
      payload = fn();
    } catch (const std::exception& e) {
      tag = 'E';
      payload = e.what();
    }
    auto write_all = [&](const char* p, size_t left) {
      while (left > 0) {
        const ssize_t n = ::write(fds[1], p, left);
        if (n <= 0) return;
        p += n;
        left -= static_cast<size_t>(n);
      }
    };
    write_all(&tag, 1);
    write_all(payload.data(), payload.size());
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (out.empty()) throw std::runtime_error(fmt::format("simulation child died (status {})", status));
  if (out[0] == 'E') throw std::runtime_error(out.substr(1));
  return out.substr(1);
}

// SimGrid with the exact alpha-beta network model (CM02, no cross-traffic, no TCP gamma: the default LV08 adds latency and bandwidth factors).
inline void make_test_engine() {
  static std::vector<std::string> args = {"test", "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                                          "--cfg=network/TCP-gamma:0", "--log=root.thres:critical",
                                          "--log=xbt_cfg.thres:critical"};
  static std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  static int argc = static_cast<int>(argv.size());
  new s4u::Engine(&argc, argv.data());  // lives until the child exits
}

struct TestPlatform {
  std::vector<s4u::Host*> gpus;
  s4u::Host* cpu = nullptr;
};

// Endpoint i has link "l<i>" (bandwidth, latency); the route a -> b is {l_a, l_b}.
inline TestPlatform build_test_platform(int gpus, BytesPerSecond bandwidth, Seconds latency) {
  auto* zone = s4u::create_full_zone("test");
  TestPlatform p;
  std::vector<s4u::Host*> all;
  std::vector<s4u::Link*> links;
  for (int i = 0; i <= gpus; ++i) {
    auto* h = zone->create_host(i < gpus ? fmt::format("gpu{}", i) : "cpu", 1e9);
    auto* l = zone->create_link(fmt::format("l{}", i), bandwidth)->set_latency(latency)->seal();
    (i < gpus ? p.gpus.emplace_back(h) : p.cpu) = h;
    all.push_back(h);
    links.push_back(l);
  }
  for (size_t a = 0; a < all.size(); ++a)
    for (size_t b = a + 1; b < all.size(); ++b)
      zone->add_route(all[a]->get_netpoint(), all[b]->get_netpoint(), nullptr, nullptr,
                      {s4u::LinkInRoute(links[a]), s4u::LinkInRoute(links[b])}, true);
  zone->seal();
  return p;
}

// Ring steps with a barrier between steps: all_reduce 2(N-1) steps of S/N bytes per
// rank, reduce_scatter and all_gather N-1 steps, broadcast and reduce N-1 steps of S.
class TestRingGroup : public SimCollectiveGroup {
 public:
  explicit TestRingGroup(std::vector<s4u::Host*> hosts)
      : hosts_(std::move(hosts)), barrier_(s4u::Barrier::create(static_cast<unsigned>(hosts_.size()))) {}
  SimCollectiveChoice choice(const CollectiveCall&) const override { return {"ring", "", 1}; }
  void run(int rank, const CollectiveCall& call) override {
    const int n = static_cast<int>(hosts_.size());
    const Bytes bytes = call.count * call.element_bytes;
    int steps = 0;
    Bytes per_step = 0;
    switch (call.op) {
      case CollectiveOp::all_reduce: steps = 2 * (n - 1); per_step = bytes / n; break;
      case CollectiveOp::all_gather:
      case CollectiveOp::reduce_scatter: steps = n - 1; per_step = bytes / n; break;
      case CollectiveOp::broadcast:
      case CollectiveOp::reduce: steps = n - 1; per_step = bytes; break;
    }
    barrier_->wait();
    for (int s = 0; s < steps; ++s) {
      s4u::Comm::sendto(hosts_[static_cast<size_t>(rank)], hosts_[static_cast<size_t>((rank + 1) % n)],
                        static_cast<uint64_t>(per_step));
      barrier_->wait();
    }
  }

 private:
  std::vector<s4u::Host*> hosts_;
  s4u::BarrierPtr barrier_;
};

struct TestMachineOptions {
  int gpus = 2;
  BytesPerSecond link_bandwidth = 10e9;
  Seconds link_latency = 1e-6;
  FlopsPerSecond peak_flops = 1e12;
  BytesPerSecond memory_bandwidth = 100e9;
  Seconds launch_latency = 0;
  Seconds dispatch_cost = 0;
  Seconds worker_start_cost = 0;
  bool gil = false;
  std::optional<Bytes> capacity;
  bool peer_to_peer = true;
  BytesPerSecond staged_copy_rate = 0;  // SimMachine::staged_copy_Bps (0: only the links bound it)
};

inline SimMachine test_machine(const TestPlatform& p, const TestMachineOptions& o) {
  SimMachine m;
  m.name = "test";
  m.dispatch_cost_s = o.dispatch_cost;
  m.worker_start_cost_s = o.worker_start_cost;
  m.gil = o.gil;
  for (auto* h : p.gpus) {
    SimGpu g;
    g.host = h;
    g.cpu = p.cpu;
    g.rates.model = "test-gpu";
    g.rates.peak_flops = {{DType::f32, o.peak_flops}, {DType::f64, o.peak_flops / 2}};
    g.rates.memory_bandwidth = o.memory_bandwidth;
    g.rates.launch_latency_s = o.launch_latency;
    g.rates.capacity_bytes = o.capacity;
    m.gpus.push_back(g);
  }
  const bool p2p = o.peer_to_peer;
  m.peer_to_peer = [p2p](int, int) { return p2p; };
  m.staged_copy_Bps = o.staged_copy_rate;
  std::vector<s4u::Host*> gpu_hosts = p.gpus;
  m.make_collective_group = [gpu_hosts](const std::vector<int>& devices) {
    std::vector<s4u::Host*> hosts;
    for (int d : devices) hosts.push_back(gpu_hosts[static_cast<size_t>(d)]);
    return std::make_shared<TestRingGroup>(hosts);
  };
  return m;
}

// In a forked child: engine, platform, backend; runs body(backend) in an actor and
// returns its string.
inline std::string simulate(const TestMachineOptions& o, SimBackendOptions bo,
                            const std::function<std::string(SimBackend&)>& body) {
  return run_forked([&] {
    make_test_engine();
    TestPlatform p = build_test_platform(o.gpus, o.link_bandwidth, o.link_latency);
    SimBackend backend(test_machine(p, o), bo);
    std::string out;
    sim_run_in_actor(p.cpu, [&] { out = body(backend); });
    return out;
  });
}

}  // namespace dpt::test
