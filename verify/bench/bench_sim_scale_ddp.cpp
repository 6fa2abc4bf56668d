// Benchmark: simulator cost of one DDP step of GPT-2 1.5B (shape-only, f32
// gradients, 25 MiB buckets) on dgx-h100 clusters at 8, 64, 512 and 1,024 GPUs.
// Prints, per scale, the wall time of the prediction (fork, platform, model
// construction on every rank, one step; no warm-up step and no single-GPU baseline)
// the CPU time (user + system) of the simulation process, which a shared machine does not
// inflate as it inflates wall time, and the peak resident memory of the simulation process. Target: 1,024 GPUs in
// <= 1 s and <= 500 MiB.
//
// Above one node the prediction simulates node 0's ranks, standing for every node's
// identical ranks (PredictConfig::symmetric_ranks; the collectives are timed for all
// ranks); --every-rank simulates every rank instead (the same prediction, for the
// comparison of costs).
//
//   bench_sim_scale_ddp [--every-rank] [GPUS...]      (default: 8 64 512 1024)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/nn/model_library.hpp"
#include "scenarios/scenario/model_library_yaml.hpp"
#include "sim/twin/predict.hpp"

int main(int argc, char** argv) {
  using namespace dpt;
  std::vector<int> scales;
  bool every_rank = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--every-rank") every_rank = true;
    else scales.push_back(std::stoi(argv[i]));
  }
  if (scales.empty()) scales = {8, 64, 512, 1024};
  const std::string root = DPT_SOURCE_DIR;
  const sim::HardwareSpec hw = sim::load_hardware("dgx-h100", root + "/scenarios/hardware");
  const ModelDescription model = load_model("gpt2-1.5b", root + "/scenarios/models");
  std::printf("DDP step of %s (%.2f B parameters, shape-only, f32, 25 MiB buckets) on %s clusters, %s\n",
              model.name.c_str(), static_cast<double>(model_parameter_count(model)) / 1e9, hw.name.c_str(),
              every_rank ? "every rank simulated" : "node 0's ranks standing for every node's");
  std::printf("%6s %6s %12s %12s %16s %16s %14s\n", "GPUs", "nodes", "wall_s", "cpu_s", "peak_rss_MiB",
              "predicted_step_s",
              "samples_per_s");
  for (int gpus : scales) {
    PredictConfig c;
    c.strategy = StrategyKind::ddp;
    c.devices = gpus;
    c.nodes = (gpus + hw.gpus_per_node - 1) / hw.gpus_per_node;
    c.batch_per_device = 1;
    c.bucket_cap_mb = 25.0;
    c.numeric = false;
    c.warmup_steps = 0;
    c.single_device_baseline = false;
    c.symmetric_ranks = !every_rank;
    c.model_name = model.name;
    c.input_features = model.input_features;
    c.output_features = model_output_features(model);
    rusage before{};
    getrusage(RUSAGE_CHILDREN, &before);
    const auto start = std::chrono::steady_clock::now();
    const StepReport r =
        predict_step(hw, [&model](Device& d) { return make_cost_only_model(model, d, DType::f32); }, c);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // The largest child so far: scales run in increasing order, so it is this one's.
    rusage usage{};
    getrusage(RUSAGE_CHILDREN, &usage);
    const double rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
    auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
    const double cpu = seconds(usage.ru_utime) + seconds(usage.ru_stime) - seconds(before.ru_utime) -
                       seconds(before.ru_stime);
    std::printf("%6d %6d %12.3f %12.3f %16.1f %16.4f %14.1f%s\n", gpus, c.nodes, wall, cpu, rss_mib,
                r.step_time_s.value_or(0),
                r.throughput_samples_per_s.value_or(0), r.out_of_memory ? "  (out of memory)" : "");
    std::fflush(stdout);
  }
  return 0;
}
