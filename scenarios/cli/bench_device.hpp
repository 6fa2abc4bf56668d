// `dptwin bench --backend host|cuda`: the bench command's real-machine part (the
// sim part is in cmd_bench.cpp). Runs scenarios/measure/device_bench on this machine.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace dpt::cli {

// Flags only the real backends have.
struct DeviceBenchFlags {
  int check = 1;                         // -c: check results (#wrong)
  std::optional<std::string> out;        // --out FILE: the JSON document, written atomically
  std::optional<std::int64_t> gemm_size; // --gemm-size M (= N = K)
  std::optional<std::string> copy_bytes; // --copy-bytes SIZE
  bool no_micro = false;                 // --no-micro: only the collective sweeps
  bool tf32 = false;                     // --tf32: cuda, also time f32 GEMM on TF32 tensor cores
};

// The flags the bench command shares with the sim backend (parsed by cmd_bench.cpp).
struct SharedBenchFlags {
  std::string backend;
  std::optional<int> devices;
  std::string min_bytes, max_bytes;
  int factor = 2, iters = 20, warmup = 5;
  std::string op;      // a collective, a comma-separated list, or "all"
  std::string dtype;   // nccl-tests type name
  bool json = false;
  bool op_given = false;  // --op on the command line (else: every collective)
};

void add_device_bench_flags(CLI::App* cmd, DeviceBenchFlags& flags);
int run_device_bench_command(const SharedBenchFlags& shared, const DeviceBenchFlags& flags);

}  // namespace dpt::cli
