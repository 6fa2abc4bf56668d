#include "scenarios/measure/bench_sim.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Barrier.hpp>
#include <simgrid/s4u/Engine.hpp>

#include "engine/core/fault_injection.hpp"
#include "sim/collectives/nccl_model.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_process.hpp"

namespace dpt {

Seconds host_launch_offset_s(int call_index, int slot, int gpus_per_thread, Seconds launch_s) {
  if (gpus_per_thread < 1 || slot < 0 || slot >= gpus_per_thread)
    throw std::invalid_argument(
        fmt::format("GPU slot {} of a host thread driving {} GPUs (allowed 0..{})", slot, gpus_per_thread,
                    gpus_per_thread - 1));
  if (fault_active(Fault::nccl_tests_launch_free)) return 0;  // planted: launches cost the host nothing
  return (static_cast<double>(call_index) * gpus_per_thread + slot + 1) * launch_s;
}

namespace {
// One rank's host thread as nccl-tests runs it: synchronise (all ranks), then launch the
// calls; returns the host time the timed loop started.
Seconds run_rank_calls(sim::CollectiveGroup& group, simgrid::s4u::Barrier& sync, int rank, const CollectiveCall& call,
                       int calls, int slot, int gpus_per_thread, Seconds launch_s) {
  sync.wait();
  const Seconds base = simgrid::s4u::Engine::get_clock();
  for (int i = 0; i < calls; ++i) {
    const Seconds launched = base + host_launch_offset_s(i, slot, gpus_per_thread, launch_s);
    if (launched > simgrid::s4u::Engine::get_clock()) simgrid::s4u::this_actor::sleep_until(launched);
    group.run(rank, call);
  }
  return base;
}
// One rank: NCCL moves nothing between GPUs. Out-of-place, nccl-tests' first column, it
// copies the send buffer into the receive buffer on the device (enqueue.cc,
// ncclLaunchOneRank: a device-to-device cudaMemcpyAsync), reading and writing every byte
// at the GPU's streaming bandwidth (memory_bandwidth x efficiency.memory_bandwidth). The
// host launches a call every launch_s (-g GPUs per thread: one here) and the copies run
// in stream order, none before its launch.
std::vector<SimBenchRow> one_rank_rows(const sim::HardwareSpec& hw, const SimBenchRun& run, Seconds launch_s) {
  const double stream_Bps = hw.gpu.memory_bandwidth * hw.efficiency.memory_bandwidth;
  if (!(stream_Bps > 0))
    throw std::invalid_argument(fmt::format("hardware '{}': no memory bandwidth for a one-rank copy", hw.name));
  std::vector<SimBenchRow> rows;
  for (const auto& call : run.calls) {
    const Seconds copy_s = 2.0 * static_cast<double>(call.bytes()) / stream_Bps;
    Seconds gpu_free = 0;
    for (int i = 0; i < run.timed_iters; ++i)
      gpu_free = std::max(gpu_free, host_launch_offset_s(i, 0, 1, launch_s)) + copy_s;
    rows.push_back({gpu_free / run.timed_iters, "one_rank", "copy", 0});
  }
  return rows;
}
}  // namespace

std::vector<SimBenchRow> run_bench_sim(const sim::HardwareSpec& hw, const SimBenchRun& run) {
  if (run.timed_iters < 1)
    throw std::invalid_argument(fmt::format("{} timed iterations: at least one", run.timed_iters));
  if (run.gpus_per_thread < 1)
    throw std::invalid_argument(fmt::format("{} GPUs per host thread: at least one", run.gpus_per_thread));
  const int n = static_cast<int>(run.ranks.size());
  const int per_size = run.warmup_iters + run.timed_iters;
  const Seconds launch_s = run.launch_s >= 0 ? run.launch_s : hw.gpu.kernel_launch_latency_s;
  if (n == 1 && !fault_active(Fault::bench_one_rank_free)) return one_rank_rows(hw, run, launch_s);
  std::shared_ptr<sim::CollectiveGroup> group;
  auto timed_start = std::make_shared<std::vector<Seconds>>(run.calls.size(), 0.0);
  const std::string out = sim::run_simulation(
      hw,
      [&](sim::Platform& p) {
        // A plan that cannot run here fails now, not inside an actor.
        try {
          for (const auto& call : run.calls) (void)sim::plan_collective(p, run.ranks, call, run.settings);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument(run.plan_error_prefix + e.what());
        }
        group = std::make_shared<sim::CollectiveGroup>(p, run.ranks, run.settings);
        auto sync = simgrid::s4u::Barrier::create(static_cast<unsigned>(n));
        const int g = run.gpus_per_thread;
        for (int r = 0; r < n; ++r)
          simgrid::s4u::Actor::create(
              fmt::format("rank{}", r), p.gpu_host(run.ranks[static_cast<size_t>(r)]),
              [group, sync, timed_start, r, g, launch_s, calls = run.calls, warm = run.warmup_iters,
               timed = run.timed_iters]() {
                for (size_t k = 0; k < calls.size(); ++k) {
                  // nccl-tests: warm-up calls, synchronise, then the timed calls.
                  (void)run_rank_calls(*group, *sync, r, calls[k], warm, r % g, g, launch_s);
                  const Seconds base = run_rank_calls(*group, *sync, r, calls[k], timed, r % g, g, launch_s);
                  if (r == 0) (*timed_start)[k] = base;
                }
              });
      },
      [&](sim::Platform&) {
        nlohmann::json rows = nlohmann::json::array();
        const auto& rec = group->records();
        for (size_t k = 0; k < run.calls.size(); ++k) {
          const auto& last = rec.at(k * static_cast<size_t>(per_size) + static_cast<size_t>(per_size) - 1);
          rows.push_back({{"time_s", (last.end_s - (*timed_start)[k]) / run.timed_iters},
                          {"algorithm", sim::collective_algorithm_name(last.plan.algorithm)},
                          {"protocol", sim::nccl_protocol_name(last.plan.protocol)},
                          {"channels", last.plan.channels}});
        }
        return rows.dump();
      });
  const auto j = nlohmann::json::parse(out);
  std::vector<SimBenchRow> rows;
  for (const auto& row : j)
    rows.push_back({row.at("time_s").get<double>(), row.at("algorithm").get<std::string>(),
                    row.at("protocol").get<std::string>(), row.at("channels").get<int>()});
  return rows;
}

double busbw_factor(CollectiveOp op, int n) {
  switch (op) {
    case CollectiveOp::all_reduce: return 2.0 * (n - 1) / n;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter: return 1.0 * (n - 1) / n;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce: return 1.0;
  }
  return 1.0;
}

}  // namespace dpt
