#include "scenarios/measure/bench_sim.hpp"

#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simgrid/s4u/Actor.hpp>

#include "sim/collectives/nccl_model.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_process.hpp"

namespace dpt {

std::vector<SimBenchRow> run_bench_sim(const sim::HardwareSpec& hw, const SimBenchRun& run) {
  if (run.timed_iters < 1)
    throw std::invalid_argument(fmt::format("{} timed iterations: at least one", run.timed_iters));
  const int n = static_cast<int>(run.ranks.size());
  const int per_size = run.warmup_iters + run.timed_iters;
  std::shared_ptr<sim::CollectiveGroup> group;
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
        for (int r = 0; r < n; ++r)
          simgrid::s4u::Actor::create(fmt::format("rank{}", r), p.gpu_host(run.ranks[static_cast<size_t>(r)]),
                                      [group, r, calls = run.calls, per_size]() {
                                        for (const auto& call : calls)
                                          for (int i = 0; i < per_size; ++i) group->run(r, call);
                                      });
      },
      [&](sim::Platform&) {
        nlohmann::json rows = nlohmann::json::array();
        const auto& rec = group->records();
        for (size_t k = 0; k < run.calls.size(); ++k) {
          const auto& first = rec.at(k * static_cast<size_t>(per_size) + static_cast<size_t>(run.warmup_iters));
          const auto& last = rec.at(k * static_cast<size_t>(per_size) + static_cast<size_t>(per_size) - 1);
          rows.push_back({{"time_s", (last.end_s - first.start_s) / run.timed_iters},
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
