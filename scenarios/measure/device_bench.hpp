// `dptwin bench --backend host|cuda`: microbenchmarks of a real machine through
// the Backend interface (the same code on CPU workers and GPUs): GEMM rate per
// dtype, device memory bandwidth, host-device and peer copy bandwidth, and
// collective sweeps with nccl-tests' flags (-b -e -f -n -w -c) and columns (size,
// count, type, redop, root, time, algbw, busbw, #wrong). Text in nccl-tests' layout
// and JSON ("dptwin.bench/1"), which `dptwin calibrate` reads.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/backend.hpp"
#include "scenarios/measure/harness.hpp"

namespace dpt {

inline constexpr const char* kBenchSchema = "dptwin.bench/1";

// nccl-tests' sweep flags.
struct SweepOptions {
  Bytes min_bytes = 8;            // -b
  Bytes max_bytes = 128 * kMiB;   // -e
  double step_factor = 2;         // -f: sizes multiply by this
  int iters = 20;                 // -n: timed iterations per size
  int warmup_iters = 5;           // -w: untimed iterations first
  bool check = true;              // -c: verify results (#wrong), else N/A
};

struct DeviceBenchOptions {
  SweepOptions sweep;
  std::vector<std::string> collectives = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"};
  DType dtype = DType::f32;       // collectives' element type (-d)
  ReduceOp op = ReduceOp::sum;    // collectives' reduction (-o)
  int root = 0;                   // broadcast and reduce (-r)
  std::vector<DType> gemm_dtypes = {DType::f32, DType::f64};
  std::int64_t gemm_size = 512;   // M = N = K
  Bytes copy_bytes = 64 * kMiB;   // memory, host-device and peer copies
  bool run_gemm = true, run_memory = true, run_copies = true, run_collectives = true;
};

// Sizes suited to a backend: "cuda" large enough that launch latency does not
// dominate, "host" small enough for seconds on two cores.
DeviceBenchOptions default_device_bench_options(const std::string& backend);

struct CollectiveRow {
  Bytes size_bytes = 0;           // nccl-tests' size: the whole buffer (all_gather: output; reduce_scatter: input)
  Elements count = 0;             // nccl-tests' count: elements per rank's call (all_gather: input elements)
  Seconds time_s = 0;             // one collective, averaged over iterations, slowest rank
  BytesPerSecond algbw = 0;       // size / time
  BytesPerSecond busbw = 0;       // algbw x nccl-tests' factor (all_reduce 2(n-1)/n, ...)
  std::optional<std::int64_t> wrong;  // elements differing from the exact result; empty with -c 0
};

struct CollectiveSweep {
  std::string collective;         // "all_reduce", ...
  int ranks = 0;
  std::string type;               // nccl-tests' type name: "float", "double", "int64", "int32"
  std::string redop;              // "sum", ... ; "none" for all_gather and broadcast
  int root = -1;                  // -1 for rootless collectives
  std::string communicator;       // Communicator::backend_name(): "nccl", "host-ring"
  std::vector<CollectiveRow> rows;
};

struct DeviceBenchResult {
  std::string backend;                          // "host" | "cuda"
  std::string date;                             // ISO 8601 UTC
  std::string hostname;
  std::vector<std::string> device_names;        // "cuda:0 NVIDIA H200", "host:0 <cpu model>"
  std::map<std::string, std::string> versions;  // cuda: runtime, driver, nccl, cublas
  SweepOptions sweep;
  std::vector<GemmFigure> gemm;
  std::vector<BandwidthFigure> bandwidth;
  std::vector<CollectiveSweep> collectives;
};

// Progress: called after each measured figure or sweep row (the CLI prints rows as they come).
struct BenchProgress {
  std::function<void(const CollectiveSweep&)> sweep_started;
  std::function<void(const CollectiveSweep&, const CollectiveRow&)> row_done;
};

// Runs the benchmarks on every device of `backend`. Throws std::invalid_argument
// for bad options (an unknown collective, min > max, factor <= 1, iters < 1).
DeviceBenchResult run_device_bench(Backend& backend, const DeviceBenchOptions& options,
                                   const BenchProgress& progress = {});

// Single figures (harness.hpp has the copies), each on `backend`'s devices (also used by the CLI for extra
// variants, e.g. TF32 GEMM on a second CUDA backend).
GemmFigure bench_gemm(Backend& backend, int device, DType dtype, std::int64_t size, int warmup, int iters,
                      const std::string& label);
CollectiveSweep bench_collective(Backend& backend, const std::string& collective, const DeviceBenchOptions& options,
                                 const BenchProgress& progress = {});

// Sizes as nccl-tests reads them: "8", "64K", "1M", "2G" (K, M, G are powers of 1024).
// Throws std::invalid_argument naming `flag` and the value.
Bytes parse_nccl_size(const std::string& text, const std::string& flag);
// The sizes of a sweep: min, min x f, ... up to max.
std::vector<Bytes> sweep_sizes(const SweepOptions& s);

// nccl-tests' text layout: the "# nThread ... " line, devices, the column header
// and one row per size (one timing group: in-place for all_reduce, broadcast and
// reduce; out-of-place for all_gather and reduce_scatter), then the average busbw.
std::string collective_sweep_header_text(const CollectiveSweep& s, const DeviceBenchResult& meta);
std::string collective_row_text(const CollectiveSweep& s, const CollectiveRow& r);
std::string collective_sweep_footer_text(const CollectiveSweep& s);
// GEMM and bandwidth figures as a small table.
std::string micro_figures_text(const DeviceBenchResult& r);

nlohmann::json device_bench_to_json(const DeviceBenchResult& r);
// Validates the schema and every field; std::invalid_argument naming `where` and the key.
DeviceBenchResult device_bench_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace dpt
