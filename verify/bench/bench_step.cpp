// Benchmark (not a test): one training step (zero_grad, forward, MSE loss,
// backward, SGD) of MLP 1024-4096-4096-1024, batch 256, f32, one thread, on
// dptwin's host backend and on PyTorch's CPU backend as a user runs it
// (torch.set_num_threads(1), the environment as it is), side by side in
// interleaved rounds so both see the same machine load. Prints both medians in
// wall time and in CPU time (the time the process ran; on a loaded machine the
// per-core figure), the ratio dptwin / PyTorch, the step's GEMM GFLOP/s per core
// against one core's FP32 peak (cpu_peak.hpp: from the flags and the measured
// clock and FMA units), the conditions, and where dptwin's step time goes.
//
//   bench_step [--rounds 5] [--steps 3] [--batch 256] [--widths 1024-4096-4096-1024]
//              [--python /usr/bin/python3] [--no-torch]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/host/host_backend.hpp"
#include "engine/host/host_gemm.hpp"
#include "engine/nn/init.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/optim/optim.hpp"
#include "engine/parallel/strategy.hpp"
#include "verify/bench/cpu_peak.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The FLOPs of the step's GEMMs: per Linear layer 2 B in out for the forward and
// for the weight gradient, and for the input gradient on every layer but the first
// (its input needs no gradient, in PyTorch as in dptwin).
double step_gemm_flops(const std::vector<std::int64_t>& widths, std::int64_t batch) {
  double f = 0;
  for (size_t l = 0; l + 1 < widths.size(); ++l)
    f += 2.0 * static_cast<double>(batch * widths[l] * widths[l + 1]) * (l == 0 ? 2 : 3);
  return f;
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// A host device that times every kernel it runs, by the op name its caller states.
class TimedDevice : public dpt::HostDevice {
 public:
  TimedDevice() : HostDevice(0, dpt::DeviceKind::host_worker) {}
  void submit(const dpt::OpCost& cost, const std::function<void()>& fn) override {
    const auto t0 = Clock::now();
    fn();
    auto& s = by_op[cost.name];
    s.first += seconds_since(t0);
    s.second += 1;
  }
  std::map<std::string, std::pair<double, int>> by_op;  // name -> (seconds, calls)
};

struct Options {
  int rounds = 5, steps = 3;
  std::int64_t batch = 256;
  std::string widths = "1024-4096-4096-1024";
  std::string python = "/usr/bin/python3";
  bool torch = true;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--rounds") o.rounds = std::stoi(value());
    else if (a == "--steps") o.steps = std::stoi(value());
    else if (a == "--batch") o.batch = std::stoll(value());
    else if (a == "--widths") o.widths = value();
    else if (a == "--python") o.python = value();
    else if (a == "--no-torch") o.torch = false;
    else throw std::invalid_argument("unknown flag " + a + " (see the comment at the top of bench_step.cpp)");
  }
  if (o.rounds < 1 || o.steps < 1) throw std::invalid_argument("--rounds and --steps must be at least 1");
  return o;
}

// One PyTorch round: a fresh process, one warm-up step, `steps` timed steps. The
// environment is passed as it is: the script sets torch.set_num_threads(1).
nlohmann::json torch_round(const Options& o) {
  const std::string cmd = fmt::format("{} {}/verify/bench/bench_step_torch.py "
                                      "--widths {} --batch {} --steps {} --warmup 1 2>&1",
                                      o.python, DPT_SOURCE_DIR, o.widths, o.batch, o.steps);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot start " + o.python);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = pclose(p);
  const auto brace = out.rfind("\n{");
  const std::string last = out.substr(brace == std::string::npos ? 0 : brace + 1);
  if (rc != 0 || last.empty() || last[0] != '{') throw std::runtime_error("PyTorch run failed: " + out);
  return nlohmann::json::parse(last);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    dpt::MlpSpec spec = dpt::parse_mlp_spec("mlp:" + o.widths);
    dpt::HostBackend backend(1);  // one BLAS thread

    // The inputs of every step: fixed random x and y in host memory, as the PyTorch side.
    dpt::Generator gen(1);
    dpt::Tensor x = dpt::Tensor::empty(backend.host_memory(), {o.batch, spec.widths.front()}, dpt::DType::f32);
    dpt::Tensor y = dpt::Tensor::empty(backend.host_memory(), {o.batch, spec.widths.back()}, dpt::DType::f32);
    dpt::init_uniform(x, 1.0, gen);
    dpt::init_uniform(y, 1.0, gen);

    dpt::StrategyOptions so;  // single device, MSE, mean
    dpt::SgdOptions sgd;
    sgd.lr = 0.01;
    auto strategy = dpt::make_strategy(
        backend, so, [&](dpt::Device& d) { return dpt::make_mlp(spec, d, dpt::DType::f32, 0); },
        [&](std::vector<dpt::NamedParameter> p) { return dpt::make_sgd(std::move(p), sgd); });

    fmt::print("bench_step: MLP {}, batch {}, f32, one step = zero_grad + forward + MSE + backward + SGD\n", o.widths,
               o.batch);
    fmt::print("conditions: {} ({} online CPUs), load average before: {}\n", cpu_model(),
               std::thread::hardware_concurrency(), load_average());
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    fmt::print("environment: OPENBLAS_CORETYPE {}\n", coretype ? coretype : "not set");
    fmt::print("dptwin GEMM: {}\n", dpt::host_gemm_info().summary());
    std::fflush(stdout);
    const dpt::bench::CpuPeak peak = dpt::bench::measure_cpu_peak();
    fmt::print("one core's FP32 peak: {} FMA units x {} lanes ({}) x 2 x {:.2f} GHz = {:.0f} GFLOP/s\n"
               "  clock: dependent adds in thread CPU time, median of 5, range {:.2f}-{:.2f} GHz;\n"
               "  FMA units: measured {:.2f} FMA/cycle, rounded; an FMA loop reaches {:.0f} GFLOP/s\n",
               peak.fma_units, peak.f32_lanes, peak.isa, peak.clock_ghz, peak.peak_gflop_s(), peak.clock_min_ghz,
               peak.clock_max_ghz, peak.fma_per_cycle, peak.measured_fma_gflop_s);
    const double gemm_flops = step_gemm_flops(spec.widths, o.batch);
    std::fflush(stdout);

    strategy->train_step(x, y);  // warm-up: first-touch page faults, allocator growth
    std::vector<double> ours, theirs, ours_cpu, theirs_cpu;
    const long faults_before = minor_faults();
    nlohmann::json torch_info;
    std::string torch_error;
    for (int r = 0; r < o.rounds; ++r) {
      for (int s = 0; s < o.steps; ++s) {
        const auto t0 = Clock::now();
        const double c0 = process_cpu_seconds();
        strategy->train_step(x, y);
        ours.push_back(seconds_since(t0));
        ours_cpu.push_back(process_cpu_seconds() - c0);
      }
      if (o.torch && torch_error.empty()) {
        try {
          torch_info = torch_round(o);
          for (double t : torch_info["times_s"]) theirs.push_back(t);
          for (double t : torch_info["cpu_times_s"]) theirs_cpu.push_back(t);
        } catch (const std::exception& e) {
          torch_error = e.what();
        }
      }
      fmt::print("round {}: dptwin {:.3f} s{}\n", r + 1, median({ours.end() - o.steps, ours.end()}),
                 theirs.size() >= static_cast<size_t>(o.steps)
                     ? fmt::format(", pytorch {:.3f} s", median({theirs.end() - o.steps, theirs.end()}))
                     : std::string());
      std::fflush(stdout);
    }

    const double faults_per_step =
        static_cast<double>(minor_faults() - faults_before) / static_cast<double>(ours.size());
    // Where dptwin's time goes: one more step on a device that times each kernel.
    TimedDevice timed;
    dpt::Sequential model = dpt::make_mlp(spec, timed, dpt::DType::f32, 0);
    auto opt = dpt::make_sgd(model.named_parameters(), sgd);
    dpt::Tensor xd = dpt::copy_to(backend, x, timed, dpt::MemoryCategory::inputs);
    dpt::Tensor yd = dpt::copy_to(backend, y, timed, dpt::MemoryCategory::inputs);
    for (int warm = 0; warm < 2; ++warm) {
      timed.by_op.clear();
      model.zero_grad();
      model.backward(dpt::loss_forward_backward(dpt::LossKind::mse, dpt::Reduction::mean, model.forward(xd), yd).grad);
      opt->step();
      model.clear_saved();
    }

    fmt::print("load average after: {}\n", load_average());
    fmt::print("dptwin  median {:.4f} s  min {:.4f} s  CPU median {:.4f} s  ({} steps, {:.0f} minor page faults "
               "per step)\n",
               median(ours), *std::min_element(ours.begin(), ours.end()), median(ours_cpu), ours.size(),
               faults_per_step);
    auto per_core = [&](const char* who, double wall_s, double cpu_s) {
      fmt::print("{} GEMM {:.1f} GFLOP per step: {:.0f} GFLOP/s per core by wall time ({:.0f} % of peak), {:.0f} "
                 "by CPU time ({:.0f} %)\n",
                 who, gemm_flops / 1e9, gemm_flops / wall_s / 1e9, 100 * gemm_flops / wall_s / 1e9 / peak.peak_gflop_s(),
                 gemm_flops / cpu_s / 1e9, 100 * gemm_flops / cpu_s / 1e9 / peak.peak_gflop_s());
    };
    per_core("dptwin ", median(ours), median(ours_cpu));
    if (!theirs.empty()) {
      // torch.set_num_threads does not reach the BLAS's own thread pool: the
      // process's thread count is printed beside it.
      fmt::print("pytorch median {:.4f} s  min {:.4f} s  CPU median {:.4f} s  ({} steps; torch {}, threads {}, "
                 "{} threads in the process, {})\n",
                 median(theirs), *std::min_element(theirs.begin(), theirs.end()), median(theirs_cpu), theirs.size(),
                 torch_info["torch"].get<std::string>(), torch_info["threads"].get<int>(),
                 torch_info["os_threads"].get<int>(), torch_info["blas"].get<std::string>());
      per_core("pytorch", median(theirs), median(theirs_cpu));
      fmt::print("ratio dptwin/pytorch: median {:.3f}x, min {:.3f}x, CPU-time median {:.3f}x\n",
                 median(ours) / median(theirs),
                 *std::min_element(ours.begin(), ours.end()) / *std::min_element(theirs.begin(), theirs.end()),
                 median(ours_cpu) / median(theirs_cpu));
    } else {
      fmt::print("pytorch: not measured ({})\n", o.torch ? torch_error : "--no-torch");
    }
    double total = 0;
    for (auto& [name, s] : timed.by_op) total += s.first;
    fmt::print("dptwin kernels in one step ({:.4f} s in kernels):\n", total);
    std::vector<std::pair<std::string, std::pair<double, int>>> rows(timed.by_op.begin(), timed.by_op.end());
    std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
    for (auto& [name, s] : rows)
      fmt::print("  {:<14} {:8.4f} s {:5.1f} %  ({} calls)\n", name, s.first, 100 * s.first / total, s.second);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_step: " << e.what() << "\n";
    return 2;
  }
}
