#include "scenarios/cli/bench_device.hpp"

#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/cli/flag_limits.hpp"
#include "scenarios/measure/device_bench.hpp"
#include "scenarios/measure/real_backend.hpp"
#include "sim/twin/step_report.hpp"

namespace dpt::cli {
namespace {

DType dtype_from_nccl_name(const std::string& name) {
  if (name == "float" || name == "float32" || name == "f32") return DType::f32;
  if (name == "double" || name == "float64" || name == "f64") return DType::f64;
  if (name == "int64") return DType::i64;
  if (name == "int32" || name == "int") return DType::i32;
  throw std::invalid_argument(fmt::format("-d {}: the host and cuda backends run float, double, int32, int64", name));
}

std::vector<std::string> collectives_from(const std::string& op, bool given) {
  if (!given || op == "all") return DeviceBenchOptions{}.collectives;
  std::vector<std::string> out;
  std::stringstream in(op);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// GEMM sizes beyond this take hours on any machine (2 x 65536^3 flops per GEMM).
constexpr std::int64_t kMaxGemmSize = 65536;

// On the host every device's buffers live in this machine's memory: refuse a run
// that cannot fit before allocating. The benchmarks run one after another, so the
// largest of them bounds the need: a collective's input and output on every rank,
// a copy's source and destination (plus host staging), three GEMM matrices in f64.
void require_host_memory(const DeviceBenchOptions& o, int devices, const std::string& max_bytes_text,
                         const DeviceBenchFlags& f) {
  const double n = devices;
  const double collectives = n * 2.0 * static_cast<double>(o.sweep.max_bytes);
  limits::require_memory(fmt::format("-e {} on {} host devices: every rank's input and output buffers", max_bytes_text,
                                     devices),
                         collectives);
  if (!o.run_memory && !o.run_copies && !o.run_gemm) return;
  const double copies = (n + 1) * 2.0 * static_cast<double>(o.copy_bytes);
  limits::require_memory(fmt::format("--copy-bytes {} on {} host devices: the copies' buffers",
                                     f.copy_bytes.value_or(std::to_string(o.copy_bytes)), devices),
                         copies);
  const double g = static_cast<double>(o.gemm_size);
  limits::require_memory(fmt::format("--gemm-size {}: three {}x{} f64 matrices", o.gemm_size, o.gemm_size, o.gemm_size),
                         3.0 * g * g * 8.0);
}

}  // namespace

void add_device_bench_flags(CLI::App* cmd, DeviceBenchFlags& f) {
  cmd->add_option("-c,--check", f.check, "host/cuda: check every result exactly (1) or not (0): the #wrong column")
      ->capture_default_str();
  cmd->add_option("--out", f.out, "also write the JSON document to this file (host/cuda: dptwin.bench/1, which calibrate reads; sim: the --json document, the twin's own figures)");
  cmd->add_option("--gemm-size", f.gemm_size, "host/cuda: M = N = K of the GEMM rate [host 512, cuda 4096]");
  cmd->add_option("--copy-bytes", f.copy_bytes, "host/cuda: buffer of the memory, host-device and peer copies "
                                                 "[host 32M, cuda 256M]");
  cmd->add_flag("--no-micro", f.no_micro, "host/cuda: only the collective sweeps (no GEMM or copy figures)");
  cmd->add_flag("--tf32", f.tf32, "cuda: also time f32 GEMM on TF32 tensor cores (off for the f32 figure)");
}

int run_device_bench_command(const SharedBenchFlags& s, const DeviceBenchFlags& f) {
  DeviceBenchOptions o = default_device_bench_options(s.backend);
  o.sweep.min_bytes = parse_nccl_size(s.min_bytes, "-b");
  o.sweep.max_bytes = parse_nccl_size(s.max_bytes, "-e");
  o.sweep.step_factor = s.factor;
  o.sweep.iters = s.iters;
  o.sweep.warmup_iters = s.warmup;
  if (f.check != 0 && f.check != 1) throw std::invalid_argument(fmt::format("-c {}: 0 or 1", f.check));
  o.sweep.check = f.check == 1;
  o.dtype = dtype_from_nccl_name(s.dtype);
  o.collectives = collectives_from(s.op, s.op_given);
  if (f.gemm_size) {
    if (*f.gemm_size < 1) throw std::invalid_argument(fmt::format("--gemm-size {}: must be positive", *f.gemm_size));
    limits::require_int_in<std::int64_t>("--gemm-size", *f.gemm_size, 1, kMaxGemmSize);
    o.gemm_size = *f.gemm_size;
  }
  if (f.copy_bytes) o.copy_bytes = parse_nccl_size(*f.copy_bytes, "--copy-bytes");
  o.run_gemm = o.run_memory = o.run_copies = !f.no_micro;
  if (f.tf32 && s.backend != "cuda") throw std::invalid_argument("--tf32 applies to --backend cuda only");
  if (s.backend == "host") {
    const int devices = s.devices.value_or(2);
    limits::require_int_in("--devices", devices, 1, limits::kMaxHostDevices, "host devices are worker threads");
    if (o.sweep.max_bytes >= o.sweep.min_bytes) require_host_memory(o, devices, s.max_bytes, f);
  }

  RealBackendOptions bo;
  bo.devices = s.devices ? s.devices : (s.backend == "host" ? std::optional<int>(2) : std::nullopt);
  bo.pinned_host_memory = true;  // host-device copies at full link rate
  auto backend = make_real_backend(s.backend, bo);

  DeviceBenchResult meta;  // for the headers printed while the sweeps run
  BenchProgress progress;
  if (!s.json) {
    progress.sweep_started = [&](const CollectiveSweep& sw) { std::cout << collective_sweep_header_text(sw, meta); };
    progress.row_done = [&](const CollectiveSweep& sw, const CollectiveRow& row) {
      std::cout << collective_row_text(sw, row) << std::flush;
    };
  }
  // The micro figures first, then each sweep, printed row by row as it runs.
  DeviceBenchOptions micro = o;
  micro.run_collectives = false;
  DeviceBenchResult r = run_device_bench(*backend, micro);
  r.versions = backend_versions(s.backend);
  if (f.tf32 && !f.no_micro) {
    RealBackendOptions tf = bo;
    tf.allow_tf32 = true;
    auto tf_backend = make_real_backend("cuda", tf);
    for (int d = 0; d < tf_backend->device_count(); ++d)
      r.gemm.push_back(bench_gemm(*tf_backend, d, DType::f32, o.gemm_size, 2, 10, "tf32"));
  }
  if (!s.json && !f.no_micro) std::cout << micro_figures_text(r) << "#\n";
  meta = r;
  for (const auto& c : o.collectives) {
    r.collectives.push_back(bench_collective(*backend, c, o, progress));
    if (!s.json) std::cout << collective_sweep_footer_text(r.collectives.back());
  }
  const auto j = device_bench_to_json(r);
  if (s.json) print_json(j);
  if (f.out) {
    write_file_atomic(*f.out, j.dump(2) + "\n", {.create_parent_dirs = true});
    if (!s.json) std::cout << "# JSON written to " << *f.out << "\n";
  }
  std::int64_t wrong = 0;
  for (const auto& sw : r.collectives)
    for (const auto& row : sw.rows) wrong += row.wrong.value_or(0);
  if (wrong > 0) {
    std::cerr << fmt::format("dptwin bench: {} wrong result element(s) in the collective checks\n", wrong);
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace dpt::cli
