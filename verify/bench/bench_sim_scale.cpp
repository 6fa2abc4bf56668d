// Benchmark: simulator cost of one DDP-like gradient all-reduce schedule at scale.
//
// GPT-2 1.5B (GPT-2 XL: 48 layers, d_model 1600, vocab 50257, context 1024:
// 1,557,611,200 parameters) with f32 gradients in DDP's buckets (first 1 MiB, the rest
// 25 MiB, as bucket_cap_mb), all-reduced one bucket after another on dgx-h100-cluster
// nodes (8 GPUs each). For 8, 64, 512 and 1,024 GPUs it prints the simulated time of the
// schedule, the simulator's wall time and the simulation process's peak RSS.
// Target: 1,024 GPUs in <= 1 s and <= 500 MiB.
//
// Usage: bench_sim_scale [GPUS...]   (default 8 64 512 1024)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/collectives/collectives.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_process.hpp"

namespace sg4 = simgrid::s4u;
using namespace dpt;
using namespace dpt::sim;

namespace {

constexpr Elements kGpt2XlParameters = 1'557'611'200;

// DDP's bucket sizes in elements: 1 MiB first, then 25 MiB, the remainder last.
std::vector<Elements> ddp_buckets(Elements params, Bytes element_bytes) {
  std::vector<Elements> out;
  Elements left = params;
  Elements cap = kMiB / element_bytes;
  while (left > 0) {
    const Elements take = std::min(left, cap);
    out.push_back(take);
    left -= take;
    cap = 25 * kMiB / element_bytes;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {8, 64, 512, 1024};
  const auto library = std::filesystem::path(DPT_SOURCE_DIR) / "scenarios" / "hardware";
  const HardwareSpec base = load_hardware("dgx-h100-cluster", library);
  const auto buckets = ddp_buckets(kGpt2XlParameters, 4);
  fmt::print("GPT-2 1.5B: {} parameters, f32 gradients {:.2f} GiB in {} DDP buckets (1 MiB, then 25 MiB)\n",
             kGpt2XlParameters, kGpt2XlParameters * 4.0 / kGiB, buckets.size());
  fmt::print("{:>6} {:>6} {:>12} {:>10} {:>14} {:>12} {:>12}\n", "gpus", "nodes", "formulation", "algorithms",
             "simulated(ms)", "wall(s)", "peakRSS(MiB)");
  for (int gpus : sizes) {
    if (gpus < 8 || gpus % 8 != 0) {
      fmt::print(stderr, "skipping {} GPUs: dgx-h100 nodes have 8 GPUs\n", gpus);
      continue;
    }
    const HardwareSpec hw = with_nodes(base, gpus / 8);
    std::shared_ptr<CollectiveGroup> group;
    std::chrono::steady_clock::time_point t0;
    const std::string out = run_in_child_process([&]() {
      t0 = std::chrono::steady_clock::now();
      sg4::Engine* engine = make_engine().release();  // the child exits right after
      auto p = Platform::build(*engine, hw);
      std::vector<int> ranks(gpus);
      for (int r = 0; r < gpus; ++r) ranks[r] = r;
      group = std::make_shared<CollectiveGroup>(*p, ranks);
      for (int r = 0; r < gpus; ++r)
        sg4::Actor::create(fmt::format("rank{}", r), p->gpu_host(r), [group, r, &buckets]() {
          for (Elements b : buckets) group->run(r, {CollectiveOp::all_reduce, b, 4, 0});
        });
      engine->run();
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rusage ru{};
      getrusage(RUSAGE_SELF, &ru);
      std::set<std::string> algos;
      for (const auto& rec : group->records()) algos.insert(collective_algorithm_name(rec.plan.algorithm));
      std::string algo_list;
      for (const auto& a : algos) algo_list += (algo_list.empty() ? "" : "+") + a;
      nlohmann::json j;
      j["simulated_s"] = group->records().back().end_s;
      j["wall_s"] = wall;
      j["rss_mib"] = ru.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
      j["formulation"] = formulation_name(group->records().back().plan.formulation);
      j["algorithms"] = algo_list;
      return j.dump();
    });
    const auto j = nlohmann::json::parse(out);
    fmt::print("{:>6} {:>6} {:>12} {:>10} {:>14.3f} {:>12.3f} {:>12.1f}\n", gpus, gpus / 8,
               j["formulation"].get<std::string>(), j["algorithms"].get<std::string>(),
               j["simulated_s"].get<double>() * 1e3, j["wall_s"].get<double>(), j["rss_mib"].get<double>());
    std::fflush(stdout);
  }
  return 0;
}
