#include "scenarios/measure/measure.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/kernels.hpp"
#include "engine/optim/optim.hpp"
#include "engine/io/safetensors.hpp"
#include "engine/parallel/strategy.hpp"
#include "scenarios/measure/harness.hpp"

namespace dpt::verify {
namespace {

void synchronize_devices(Backend& b, int n) {
  for (int i = 0; i < n; ++i) b.device(i).synchronize();
}

// Deterministic values in host memory (they matter for numerics only, not for time);
// nothing to write on a shape-only twin.
Tensor host_input(Backend& b, const Shape& shape) {
  Tensor t = Tensor::empty(b.host_memory(), shape, DType::f32, MemoryCategory::inputs);
  if (t.numel() > 0 && t.data() != nullptr && device_is_cpu_readable(b.host_memory())) {
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 17) / 17.0 - 0.5;
    tensor_fill_from_f64(t, v);
  }
  return t;
}

std::vector<int> first_devices(int n) {
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(i);
  return ids;
}

ModelBuilder step_model_builder(Backend& b, const MlpSpec& spec) {
  return [&b, spec](Device& d) { return make_mlp(spec, b, d, DType::f32, 1); };
}

OptimizerBuilder sgd() {
  return [](std::vector<NamedParameter> p) { return make_sgd(std::move(p), SgdOptions{}); };
}

Seconds time_steps(Backend& b, const StrategyOptions& so, const MlpSpec& spec, std::int64_t batch, int devices,
                   int repeats, const std::function<void()>& before_step) {
  auto strategy = make_strategy(b, so, step_model_builder(b, spec), sgd());
  const Tensor x = host_input(b, {batch, spec.widths.front()});
  const Tensor y = host_input(b, {batch, spec.widths.back()});
  // Warm-up: DDP rebuilds its buckets after the first step; caches fill.
  if (before_step) before_step();
  strategy->train_step(x, y);
  synchronize_devices(b, devices);
  Seconds best = std::numeric_limits<Seconds>::infinity();
  for (int r = 0; r < repeats; ++r) {
    const Seconds t0 = b.now();
    if (before_step) before_step();  // a straggler's delay belongs to the step
    strategy->train_step(x, y);
    synchronize_devices(b, devices);
    best = std::min(best, b.now() - t0);
  }
  return best;
}

void measure_collectives(Backend& b, const MeasureConfig& c, Figures& f) {
  const int n = c.devices;
  auto comms = b.make_communicators(first_devices(n));
  for (const std::string op : {"all_reduce", "all_gather"}) {
    for (const Bytes size : c.collective_sizes) {
      // nccl-tests' size is the whole buffer; all_gather's is N equal inputs.
      const Elements count = (size / 4) / n * n;
      if (count == 0) continue;
      Seconds elapsed = 0;
      b.parallel_for(n, [&](int r) {
        Communicator& comm = *comms[static_cast<size_t>(r)];
        Device& d = b.device(r);
        Tensor buf = Tensor::zeros(d, {count}, DType::f32, MemoryCategory::workspace);
        Tensor in = Tensor::zeros(d, {count / n}, DType::f32, MemoryCategory::workspace);
        auto run_once = [&] {
          if (op == "all_reduce") comm.all_reduce(buf, {})->wait();
          else comm.all_gather(buf, in, {})->wait();
        };
        run_once();  // warm-up
        d.synchronize();
        comm.barrier({})->wait();
        const Seconds t0 = b.now();
        for (int k = 0; k < c.repeats; ++k) run_once();
        d.synchronize();
        const Seconds t = (b.now() - t0) / c.repeats;
        if (r == 0) elapsed = t;
      });
      const double algbw = static_cast<double>(count * 4) / elapsed;
      f.collectives.push_back({op, count * 4, elapsed, algbw * bench_busbw_factor(op, n)});
    }
  }
}

}  // namespace

std::string device_label(int index) { return fmt::format("gpu{}", index); }

MeasureConfig default_measure_config(const std::string& backend_name, int devices) {
  MeasureConfig c;
  c.devices = devices;
  // The twin stands for GPUs, so it measures what a GPU run measures.
  if (backend_name == "cuda" || backend_name == "sim") {
    c.gemm_size = 4096;
    c.copy_bytes = 256 * kMiB;
    c.collective_sizes = {1 * kMiB, 16 * kMiB, 128 * kMiB};
    c.step_model = parse_mlp_spec("mlp:2048-4096-4096-2048");
    c.batch_per_device = 256;
    c.repeats = 5;
    if (backend_name == "sim") {
      // A twin measured against a twin: deterministic, so one timed run is enough, and a
      // smaller model keeps the shape-only initialisation (every parameter draw is still
      // made) cheap.
      c.step_model = parse_mlp_spec("mlp:1024-2048-2048-1024");
      c.repeats = 1;
    }
  } else {
    // The host: seconds on two shared cores, large enough that thread start-up and
    // timer resolution stay small against each figure.
    c.gemm_size = 256;
    c.copy_bytes = 8 * kMiB;
    // Bandwidth-bound sizes only: a small collective's time on the host is the
    // threads' wake-up latency, which other processes on the cores stretch 100-fold.
    c.collective_sizes = {4 * kMiB, 16 * kMiB};
    c.step_model = parse_mlp_spec("mlp:256-512-512-64");
    c.batch_per_device = 64;
    c.repeats = 5;  // the best of 5: other processes share the cores
  }
  return c;
}

Figures measure_figures(Backend& b, const MeasureConfig& c, const MeasureParts& parts, const MeasureHooks& hooks) {
  if (c.devices < 1 || c.devices > b.device_count())
    throw std::invalid_argument(
        fmt::format("verify: {} devices asked, the {} backend has {}", c.devices, b.name(), b.device_count()));
  Figures f;
  for (int i = 0; i < c.devices; ++i) f.device_names.push_back(b.device(i).name());
  const Timing timing = Timing::best_of(c.repeats);
  if (parts.compute) {
    for (int i = 0; i < c.devices; ++i) {
      Device& d = b.device(i);
      const std::int64_t n = c.gemm_size;
      Tensor x = Tensor::zeros(d, {n, n}, DType::f32, MemoryCategory::workspace);
      Tensor w = Tensor::zeros(d, {n, n}, DType::f32, MemoryCategory::workspace);
      Tensor y = Tensor::empty(d, {n, n}, DType::f32, MemoryCategory::workspace);
      const Seconds t = time_op(b, d, timing, [&] { kernel_linear_forward(x, w, nullptr, y); });
      f.gemm_flops_per_s.push_back(gemm_flops(n, n, n) / t);
      f.memory_Bps.push_back(bench_memory(b, d, c.copy_bytes, timing).bytes_per_s);
    }
  }
  if (parts.peers) {
    for (int a = 0; a < c.devices; ++a)
      for (int d = 0; d < c.devices; ++d)
        if (d != a)
          f.peers.push_back(
              {a, d, bench_copy(b, "peer", b.device(a), b.device(d), c.copy_bytes, timing).bytes_per_s});
  }
  if (parts.collectives && c.devices >= 2) measure_collectives(b, c, f);
  if (parts.single) {
    for (int i = 0; i < c.devices; ++i) {
      StrategyOptions so;
      so.kind = StrategyKind::single;
      so.device_ids = {i};
      f.single_step_s.push_back(time_steps(b, so, c.step_model, c.batch_per_device, c.devices, c.repeats,
                                           [&, i] {
                                             if (hooks.before_single_step) hooks.before_single_step(i);
                                           }));
    }
  }
  if (c.devices >= 2) {
    for (const StrategyKind kind : {StrategyKind::data_parallel, StrategyKind::ddp}) {
      if ((kind == StrategyKind::data_parallel && !parts.dp) || (kind == StrategyKind::ddp && !parts.ddp)) continue;
      StrategyOptions so;
      so.kind = kind;
      so.device_ids = first_devices(c.devices);
      const Seconds t = time_steps(b, so, c.step_model, c.batch_per_device * c.devices, c.devices, c.repeats,
                                   hooks.before_parallel_step);
      (kind == StrategyKind::data_parallel ? f.dp_step_s : f.ddp_step_s) = t;
    }
  }
  return f;
}

nlohmann::json figures_to_json(const Figures& f) {
  using nlohmann::json;
  json peers = json::array(), colls = json::array();
  for (const auto& p : f.peers) peers.push_back({{"src", p.src}, {"dst", p.dst}, {"bandwidth_Bps", p.bandwidth_Bps}});
  for (const auto& c : f.collectives)
    colls.push_back({{"op", c.op}, {"size_bytes", c.size_bytes}, {"time_s", c.time_s}, {"busbw_Bps", c.busbw_Bps}});
  return json{{"device_names", f.device_names}, {"gemm_flops_per_s", f.gemm_flops_per_s},
              {"memory_Bps", f.memory_Bps},     {"peers", peers},
              {"collectives", colls},           {"single_step_s", f.single_step_s},
              {"dp_step_s", f.dp_step_s},       {"ddp_step_s", f.ddp_step_s}};
}

Figures figures_from_json(const nlohmann::json& j) {
  Figures f;
  f.device_names = j.at("device_names").get<std::vector<std::string>>();
  f.gemm_flops_per_s = j.at("gemm_flops_per_s").get<std::vector<double>>();
  f.memory_Bps = j.at("memory_Bps").get<std::vector<double>>();
  for (const auto& p : j.at("peers")) f.peers.push_back({p.at("src"), p.at("dst"), p.at("bandwidth_Bps")});
  for (const auto& c : j.at("collectives"))
    f.collectives.push_back({c.at("op"), c.at("size_bytes"), c.at("time_s"), c.at("busbw_Bps")});
  f.single_step_s = j.at("single_step_s").get<std::vector<double>>();
  f.dp_step_s = j.at("dp_step_s");
  f.ddp_step_s = j.at("ddp_step_s");
  return f;
}

}  // namespace dpt::verify
