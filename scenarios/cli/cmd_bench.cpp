// dptwin bench: collective sweeps with nccl-tests' flags and columns.
//
//   dptwin bench --backend sim --hardware dgx-h100 -b 8 -e 128M -f 2 -n 20 -w 5 --op all_reduce
//
// Sizes read as nccl-tests reads them (K, M, G are powers of 1024: -b 1G is 1 GiB);
// bandwidths print as nccl-tests prints them (GB/s = 1e9 bytes per second):
//   algbw = size / time;  busbw = algbw x factor, with factor 2(n-1)/n for all_reduce,
//   (n-1)/n for all_gather and reduce_scatter, 1 for broadcast (nccl-tests doc/PERFORMANCE.md).
// `size` is the whole buffer as nccl-tests counts it (all_gather: the output;
// reduce_scatter: the input) and `count` the elements per rank's call; all_gather and
// reduce_scatter sizes are rounded down to a multiple of n elements, as nccl-tests does.
//
// The flag table and the table/JSON output are shared by all backends; each backend is
// one function from BenchOptions to BenchRows (bench_sim_rows here, over the library's
// run_bench_sim in scenarios/measure/bench_sim.hpp).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "scenarios/cli/bench_device.hpp"
#include "scenarios/cli/cli_docs.hpp"
#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/cli/library_dir.hpp"
#include "scenarios/cli/flag_limits.hpp"
#include "scenarios/measure/bench_sim.hpp"
#include "engine/io/atomic_file.hpp"
#include "engine/core/units.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/twin/sim_process.hpp"
#include "sim/net/hardware.hpp"
#include "sim/twin/step_report.hpp"

namespace dpt::cli::cmd_bench {  // a namespace per command: unity batches join anonymous ones
namespace {

struct BenchOptions {
  std::string backend = "sim";
  std::string hardware;              // sim: library name or YAML file
  std::optional<int> devices;        // ranks (default: every GPU of the machine)
  std::optional<int> nodes;          // sim: override the hardware file's node count
  std::optional<std::string> nccl_version;  // sim: NCCL release of the tuner constants
  bool nccl_p2p_disable = false;            // sim: as NCCL_P2P_DISABLE=1 (every GPU pair through host memory)
  std::string min_bytes = "8";       // -b
  std::string max_bytes = "128M";    // -e
  int factor = 2;                    // -f
  int iters = 20;                    // -n
  int warmup = 5;                    // -w
  int gpus_per_thread = 1;           // -g (sim): GPUs one host thread launches for
  std::string op = "all_reduce";     // --op
  std::optional<std::string> algo;   // --algo ring|tree|nvls|nvls_tree (sim; like NCCL_ALGO)
  std::optional<std::string> proto;  // --proto LL|LL128|Simple (sim; like NCCL_PROTO)
  std::string dtype = "float";       // -d, nccl-tests type names
  bool json = false;
  DeviceBenchFlags device;           // --backend host|cuda only (bench_device.hpp)
  bool op_given = false;
  std::vector<std::string> given;    // the flags on the command line, by their long name
};

struct BenchRow {
  Bytes size = 0;         // nccl-tests' size column
  Elements count = 0;     // elements per rank's call (nccl-tests' count column)
  Seconds time_s = 0;     // average per iteration
  std::string algorithm;  // what ran (sim: algorithm/protocol, e.g. ring/LL, nvls/Simple)
};

// The largest buffer any backend sweeps: 1 PiB (the twin bounds it further by a
// GPU's memory, the host by this machine's).
constexpr Bytes kMaxBenchBytes = Bytes{1} << 50;
// Sizes of one sweep, and collective calls the twin simulates for it (sizes x
// (warm-up + timed iterations)): bounds that keep a sweep to minutes.
constexpr int kMaxBenchIters = 100000;
constexpr std::size_t kMaxSimCollectiveCalls = 100000;
// Memory mappings a simulation needs besides its actors' stacks (libraries, heap, SimGrid).
constexpr long kMapsHeadroom = 2000;

// nccl-tests' parsesize: a number with an optional K, M or G suffix (powers of 1024).
// The result is a whole number of bytes in 1 .. kMaxBenchBytes.
Bytes parse_size(const std::string& text, const char* flag) {
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw std::invalid_argument(fmt::format("{}: '{}' is not a size (e.g. 8, 64K, 128M, 1G)", flag, text));
  }
  std::string suffix = text.substr(pos);
  double mult = 1;
  if (suffix == "K" || suffix == "k") mult = 1024.0;
  else if (suffix == "M" || suffix == "m") mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g") mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    throw std::invalid_argument(fmt::format("{}: unknown size suffix '{}' in '{}' (K, M, G = 1024^k)", flag, suffix, text));
  if (!(value > 0)) throw std::invalid_argument(fmt::format("{}: size must be positive, got '{}'", flag, text));
  const double bytes = value * mult;
  if (bytes < 1 || bytes != std::floor(bytes))
    throw std::invalid_argument(fmt::format("{} {}: {} bytes is not a whole number of bytes", flag, text, bytes));
  if (bytes > static_cast<double>(kMaxBenchBytes))
    throw std::invalid_argument(fmt::format("{} {}: must be at most 1 PiB ({} bytes)", flag, text, kMaxBenchBytes));
  return static_cast<Bytes>(bytes);
}

Bytes dtype_bytes(const std::string& name) {
  if (name == "float" || name == "float32" || name == "f32" || name == "int32" || name == "int") return 4;
  if (name == "double" || name == "float64" || name == "f64" || name == "int64") return 8;
  if (name == "half" || name == "float16" || name == "f16" || name == "bfloat16" || name == "bf16") return 2;
  if (name == "int8" || name == "uint8") return 1;
  throw std::invalid_argument(fmt::format(
      "-d: unknown type '{}' (float, double, half, bfloat16, int8, int32, int64)", name));
}

// The sweep's sizes in bytes, rounded down to whole elements (and to a multiple of n
// elements where every rank holds an equal block), as nccl-tests does.
std::vector<std::pair<Bytes, Elements>> sweep(const BenchOptions& o, sim::CollectiveOp op, int n) {
  const Bytes lo = parse_size(o.min_bytes, "-b"), hi = parse_size(o.max_bytes, "-e");
  if (hi < lo) throw std::invalid_argument(fmt::format("-e {} is below -b {}", o.max_bytes, o.min_bytes));
  if (o.factor < 2) throw std::invalid_argument(fmt::format("-f: factor must be >= 2, got {}", o.factor));
  const Bytes eb = dtype_bytes(o.dtype);
  const bool blocked = op == sim::CollectiveOp::all_gather || op == sim::CollectiveOp::reduce_scatter;
  std::vector<std::pair<Bytes, Elements>> out;
  for (Bytes s = lo;; s *= o.factor) {
    Elements total = s / eb;
    if (blocked) total = total / n * n;
    if (total > 0) out.push_back({total * eb, blocked ? total / n : total});
    if (s > hi / o.factor) break;  // the next size would pass -e (or overflow)
  }
  // An empty table would read as a run with nothing to report; say which sizes to give.
  if (out.empty())
    throw std::invalid_argument(fmt::format(
        "-b {} -e {}: no size in the range holds one {} element{} ({} bytes{}); give -e {} or more", o.min_bytes,
        o.max_bytes, o.dtype, blocked ? " per rank" : "", eb, blocked ? fmt::format(" x {} ranks", n) : "",
        blocked ? eb * n : eb));
  return out;
}

std::filesystem::path hardware_library() {
  if (const char* dir = std::getenv("DPTWIN_HARDWARE_DIR")) return dir;
  return scenarios_dir() / "hardware";
}

// ---- the sim backend ---------------------------------------------------------------------

struct SimBenchSetup {
  sim::HardwareSpec hw;
  std::vector<int> ranks;
};

SimBenchSetup sim_setup(const BenchOptions& o) {
  if (o.hardware.empty()) throw std::invalid_argument("--hardware is required with --backend sim");
  SimBenchSetup s{sim::load_hardware(o.hardware, hardware_library()), {}};
  if (o.nodes) {
    if (*o.nodes < 1 || *o.nodes > 4096)
      throw std::invalid_argument(fmt::format("--nodes {}: must be in 1..4096", *o.nodes));
    try {
      s.hw = sim::with_nodes(s.hw, *o.nodes);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("--nodes {}: {}", *o.nodes, e.what()));
    }
  }
  if (o.nccl_version) {
    const auto& known = sim::known_nccl_versions();
    if (std::find(known.begin(), known.end(), *o.nccl_version) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw std::invalid_argument(fmt::format("--nccl-version {}: unknown NCCL version (known: {})", *o.nccl_version, list));
    }
    s.hw.nccl_version = *o.nccl_version;
  }
  if (o.nccl_p2p_disable && s.hw.gloo)
    throw std::invalid_argument(fmt::format("--nccl-p2p-disable: hardware {}'s collectives are gloo's (its gloo "
                                            "section), not NCCL's; NCCL_P2P_DISABLE does not apply",
                                            s.hw.name));
  if (o.nccl_p2p_disable) s.hw.nccl_p2p_disable = true;
  const int n = o.devices.value_or(s.hw.gpu_count());
  if (n < 1 || n > s.hw.gpu_count())
    throw std::invalid_argument(
        fmt::format("--devices {} is not in 1..{} (GPUs of {})", n, s.hw.gpu_count(), s.hw.name));
  // SimGrid gives every rank's actor a stack of its own, about 2 memory mappings each; past
  // the kernel's vm.max_map_count the simulation dies mid-run ("Failed to protect stack").
  if (const auto maps = sim::max_memory_maps(); maps && 2L * n + kMapsHeadroom > *maps)
    throw std::invalid_argument(fmt::format(
        "{} ranks need about {} memory mappings for the simulation's actor stacks, more than this machine's "
        "vm.max_map_count ({}): bench at most {} ranks here{} (or raise it: sysctl -w vm.max_map_count=262144)",
        n, 2L * n + kMapsHeadroom, *maps, (*maps - kMapsHeadroom) / 2,
        o.nodes ? fmt::format(" (--nodes {} or fewer)", (*maps - kMapsHeadroom) / 2 / s.hw.gpus_per_node) : ""));
  for (int r = 0; r < n; ++r) s.ranks.push_back(r);
  return s;
}

std::vector<BenchRow> bench_sim_rows(const BenchOptions& o, sim::CollectiveOp op, const SimBenchSetup& setup) {
  const int n = static_cast<int>(setup.ranks.size());
  const auto sizes = sweep(o, op, n);
  const Bytes eb = dtype_bytes(o.dtype);
  const Bytes gpu_memory = setup.hw.gpu.memory_bytes;
  if (!sizes.empty()) {
    // nccl-tests allocates a send and a receive buffer on every GPU (out-of-place): both the
    // size for all_reduce and broadcast, the size and its 1/n share for all_gather (receive)
    // and reduce_scatter (send).
    const Bytes size = sizes.back().first;
    const bool shared = op == sim::CollectiveOp::all_gather || op == sim::CollectiveOp::reduce_scatter;
    const Bytes need = size + (shared ? size / n : size);
    if (need > gpu_memory)
      throw std::invalid_argument(fmt::format("-e {}: {} B of {} needs {} bytes of send and receive buffers on a GPU, "
                                              "more than its memory ({} has {} bytes)",
                                              o.max_bytes, size, sim::collective_op_name(op), need, setup.hw.gpu.name,
                                              gpu_memory));
  }
  const std::size_t calls = sizes.size() * static_cast<std::size_t>(o.warmup + o.iters);
  if (calls > kMaxSimCollectiveCalls)
    throw std::invalid_argument(fmt::format("-n {} -w {}: {} sizes x {} iterations = {} collectives to simulate, at most "
                                            "{}",
                                            o.iters, o.warmup, sizes.size(), o.warmup + o.iters, calls,
                                            kMaxSimCollectiveCalls));
  SimBenchRun run;
  run.ranks = setup.ranks;
  for (const auto& size : sizes) run.calls.push_back({op, size.first / eb, eb, 0});
  run.warmup_iters = o.warmup;
  run.timed_iters = o.iters;
  if (o.gpus_per_thread < 1 || run.ranks.size() % static_cast<std::size_t>(o.gpus_per_thread) != 0)
    throw std::invalid_argument(fmt::format("-g {}: GPUs per thread must be at least 1 and divide the {} ranks",
                                            o.gpus_per_thread, run.ranks.size()));
  run.gpus_per_thread = o.gpus_per_thread;
  if (o.algo) {
    try {
      run.settings.algorithm = sim::parse_collective_algorithm(*o.algo);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("--algo: {}", e.what()));
    }
    run.plan_error_prefix = fmt::format("--algo {}: ", *o.algo);
  }
  if (o.proto) {
    try {
      run.settings.protocol = sim::parse_nccl_protocol(*o.proto);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("--proto: {}", e.what()));
    }
  }
  const auto sim_rows = dpt::run_bench_sim(setup.hw, run);
  std::vector<BenchRow> rows;
  for (size_t k = 0; k < sizes.size(); ++k)
    rows.push_back({sizes[k].first, sizes[k].second, sim_rows[k].time_s,
                    fmt::format("{}/{}", sim_rows[k].algorithm, sim_rows[k].protocol)});
  return rows;
}

// ---- output shared by all backends ----------------------------------------------------------

void print_table(const BenchOptions& o, sim::CollectiveOp op, int n, const std::string& machine,
                 const std::vector<BenchRow>& rows) {
  // Every setting that shapes the figures, so a saved table says how to reproduce it.
  std::string more = fmt::format(" -g {} -d {}", o.gpus_per_thread, o.dtype);
  if (o.algo) more += fmt::format(" --algo {}", *o.algo);
  if (o.proto) more += fmt::format(" --proto {}", *o.proto);
  if (o.nccl_version) more += fmt::format(" --nccl-version {}", *o.nccl_version);
  if (o.nccl_p2p_disable) more += " --nccl-p2p-disable";
  fmt::print("# dptwin bench: backend {}, {}, {} rank{}, op {}, -b {} -e {} -f {} -n {} -w {}{}\n", o.backend, machine, n,
             n == 1 ? "" : "s", sim::collective_op_name(op), o.min_bytes, o.max_bytes, o.factor, o.iters, o.warmup,
             more);
  fmt::print("# sizes: K/M/G = 1024^k bytes; bandwidths: GB/s = 1e9 bytes/s\n");
  fmt::print("#{:>11} {:>12} {:>8} {:>6} {:>6} {:>10} {:>8} {:>8}   {:<12}\n", "size", "count", "type", "redop", "root",
             "time", "algbw", "busbw", "algo");
  fmt::print("#{:>11} {:>12} {:>8} {:>6} {:>6} {:>10} {:>8} {:>8}   {:<12}\n", "(B)", "(elements)", "", "", "", "(us)",
             "(GB/s)", "(GB/s)", "");
  const bool reduces = op != sim::CollectiveOp::all_gather && op != sim::CollectiveOp::broadcast;
  const bool rooted = op == sim::CollectiveOp::broadcast || op == sim::CollectiveOp::reduce;
  double busbw_sum = 0;
  for (const auto& r : rows) {
    const double algbw = r.time_s > 0 ? r.size / r.time_s / 1e9 : 0;
    const double busbw = algbw * busbw_factor(op, n);
    busbw_sum += busbw;
    fmt::print("{:>12} {:>12} {:>8} {:>6} {:>6} {:>10.2f} {:>8.2f} {:>8.2f}   {:<12}\n", r.size, r.count, o.dtype,
               reduces ? "sum" : "none", rooted ? "0" : "-1", r.time_s * 1e6, algbw, busbw, r.algorithm);
  }
  if (!rows.empty()) fmt::print("# Avg bus bandwidth    : {:.3f}\n", busbw_sum / rows.size());
}

nlohmann::json bench_json(const BenchOptions& o, sim::CollectiveOp op, int n, const std::string& machine,
                          const std::vector<BenchRow>& rows) {
  nlohmann::json j;
  j["backend"] = o.backend;
  j["hardware"] = machine;
  j["ranks"] = n;
  j["op"] = sim::collective_op_name(op);
  j["type"] = o.dtype;
  j["iters"] = o.iters;
  j["warmup"] = o.warmup;
  // What else shaped the figures, so a saved result says how to reproduce it (null: the
  // hardware file's or NCCL's own choice).
  const auto or_null = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  j["nodes"] = or_null(o.nodes);  // --nodes as given (null: the file's); "hardware" names the nodes spanned
  j["gpus_per_thread"] = o.gpus_per_thread;
  j["algo"] = or_null(o.algo);
  j["proto"] = or_null(o.proto);
  j["nccl_version"] = or_null(o.nccl_version);
  j["nccl_p2p_disable"] = o.nccl_p2p_disable;
  j["units"] = {{"size", "bytes"}, {"time", "us"}, {"algbw", "GB/s (1e9 B/s)"}, {"busbw", "GB/s (1e9 B/s)"}};
  j["rows"] = nlohmann::json::array();
  for (const auto& r : rows) {
    const double algbw = r.time_s > 0 ? r.size / r.time_s / 1e9 : 0;
    j["rows"].push_back({{"size", r.size},
                         {"count", r.count},
                         {"time_us", r.time_s * 1e6},
                         {"algbw", algbw},
                         {"busbw", algbw * busbw_factor(op, n)},
                         {"algorithm", r.algorithm}});
  }
  return j;
}

bool given(const BenchOptions& o, const std::string& flag) {
  return std::find(o.given.begin(), o.given.end(), flag) != o.given.end();
}

// A flag the chosen backend would ignore is refused, naming it.
void refuse_foreign_flags(const BenchOptions& o) {
  const bool sim = o.backend == "sim";
  const std::vector<std::string> sim_only = {"--hardware", "--nodes", "--algo", "--proto", "--nccl-version",
                                             "--nccl-p2p-disable"};
  const std::vector<std::string> real_only = {"--check", "--gemm-size", "--copy-bytes", "--no-micro", "--tf32"};
  for (const auto& f : sim ? real_only : sim_only)
    if (given(o, f))
      throw std::invalid_argument(sim ? fmt::format("{} applies to --backend host or cuda (the twin has no {})", f,
                                                    f == "--check" ? "wrong results" : "microbenchmarks")
                                      : fmt::format("{} applies to --backend sim only (--backend {} measures this "
                                                    "machine)",
                                                    f, o.backend));
}

int run_bench(const BenchOptions& o) {
  if (o.iters > kMaxBenchIters)
    throw std::invalid_argument(fmt::format("-n {}: at most {} timed iterations per size", o.iters, kMaxBenchIters));
  if (o.warmup > kMaxBenchIters)
    throw std::invalid_argument(fmt::format("-w {}: at most {} warm-up iterations per size", o.warmup, kMaxBenchIters));
  if (o.backend == "host" || o.backend == "cuda" || o.backend == "sim") refuse_foreign_flags(o);
  if (o.device.out) limits::require_output_file("--out", *o.device.out);
  if (o.backend == "host" || o.backend == "cuda")
    return run_device_bench_command({o.backend, o.devices, o.min_bytes, o.max_bytes, o.factor, o.iters, o.warmup, o.op,
                                     o.dtype, o.json, o.op_given},
                                    o.device);
  sim::CollectiveOp op{};
  try {
    op = sim::parse_collective_op(o.op);
  } catch (const std::invalid_argument&) {
    // The sim backend's own list (the engine's names include reduce, which it does not sweep).
    throw std::invalid_argument(fmt::format("--op {}: the sim backend sweeps one collective: all_reduce, all_gather, "
                                            "reduce_scatter or broadcast (host and cuda also take reduce, a "
                                            "comma-separated list, or all)",
                                            o.op));
  }
  if (op == sim::CollectiveOp::reduce)
    throw std::invalid_argument("--op reduce: the sim backend sweeps nccl-tests' all_reduce, all_gather, reduce_scatter "
                                "and broadcast (host and cuda also run reduce)");
  if (o.iters < 1) throw std::invalid_argument(fmt::format("-n: iterations must be >= 1, got {}", o.iters));
  if (o.warmup < 0) throw std::invalid_argument(fmt::format("-w: warm-up iterations must be >= 0, got {}", o.warmup));
  dtype_bytes(o.dtype);  // validates -d before anything runs
  if (o.backend != "sim")
    throw std::invalid_argument(fmt::format("--backend {}: unknown backend (allowed: sim, host, cuda)", o.backend));
  const SimBenchSetup setup = sim_setup(o);
  const auto rows = bench_sim_rows(o, op, setup);
  const int n = static_cast<int>(setup.ranks.size());
  // The nodes the ranks span (ranks fill nodes in order), not the file's: 12 ranks of a
  // 4-node DGX A100 cluster run on 2.
  const int spanned = static_cast<int>((n + setup.hw.gpus_per_node - 1) / setup.hw.gpus_per_node);
  const std::string machine =
      spanned > 1 ? fmt::format("{} x {} nodes", setup.hw.name, spanned) : setup.hw.name;
  const nlohmann::json doc = bench_json(o, op, n, machine, rows);
  if (o.json) print_json(doc);
  else print_table(o, op, n, machine, rows);
  if (o.device.out) {
    write_file_atomic(*o.device.out, doc.dump(2) + "\n", {.create_parent_dirs = true});
    if (!o.json) std::cout << "# JSON written to " << *o.device.out << "\n";
  }
  return kExitOk;
}

Registration reg{"bench", [](CLI::App& app) -> RunFn {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Sweep a collective over sizes like nccl-tests (size, count, type, time, algbw, busbw)");
  with_choices(cmd->add_option("--backend", o->backend,
                               "Where collectives run: sim (the SimGrid twin), host (CPU workers) or cuda (GPUs, NCCL); "
                               "host and cuda also measure GEMM rate, memory, host-device and peer copy bandwidth"),
               {"sim", "host", "cuda"})
      ->capture_default_str();
  cmd->add_option("--hardware", o->hardware, "sim: hardware name (dptwin hardware list) or a YAML file");
  cmd->add_option("--devices", o->devices, "Ranks, one per GPU from GPU 0 (default: every GPU)");
  cmd->add_option("--nodes", o->nodes, "sim: number of nodes, overriding the hardware file (needs its network section)");
  cmd->add_option("-b,--minbytes", o->min_bytes, "Smallest size (K/M/G = 1024^k bytes)")->capture_default_str();
  cmd->add_option("-e,--maxbytes", o->max_bytes, "Largest size (K/M/G = 1024^k bytes)")->capture_default_str();
  cmd->add_option("-f,--stepfactor", o->factor, "Multiply the size by this factor each step")->capture_default_str();
  cmd->add_option("-n,--iters", o->iters, "Timed iterations per size")->capture_default_str();
  cmd->add_option("-w,--warmup_iters", o->warmup, "Warm-up iterations per size (not timed)")->capture_default_str();
  cmd->add_option("-g,--ngpus", o->gpus_per_thread,
                  "sim: GPUs one host thread launches for, as nccl-tests -g (1: a process per GPU)")
      ->capture_default_str();
  cmd->add_option("--op", o->op, "Collective: all_reduce, all_gather, reduce_scatter, broadcast; host/cuda also take "
                                 "reduce, a comma-separated list, or all. Default: all_reduce on sim, every "
                                 "collective on host and cuda");
  cmd->add_option("--nccl-version", o->nccl_version,
                  "sim: NCCL release whose tuner constants to use, as nccl-tests prints it (master, 2.18.5; "
                  "default: the hardware file's nccl_version, else master)");
  cmd->add_flag("--nccl-p2p-disable", o->nccl_p2p_disable,
                "sim: as NCCL_P2P_DISABLE=1: NCCL connects every pair of a node's GPUs through host memory (SHM), "
                "NVLink and NVSwitch included (the hardware field nccl_p2p_disable)");
  with_choices(cmd->add_option("--algo", o->algo, "sim: force the algorithm like NCCL_ALGO: ring, tree, nvls, nvls_tree (NVLSTree)"),
               {"ring", "tree", "nvls", "nvls_tree"});
  with_choices(cmd->add_option("--proto", o->proto, "sim: force the protocol like NCCL_PROTO: LL, LL128, Simple"),
               {"LL", "LL128", "Simple"});
  with_choices(cmd->add_option("-d,--datatype", o->dtype, "Element type: float, double, half, bfloat16, int8, int32, int64"),
               {"float", "double", "half", "bfloat16", "int8", "int32", "int64"})
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON instead of the table");
  add_device_bench_flags(cmd, o->device);
  cmd->footer("Examples:\n"
              "  dptwin bench --backend sim --hardware dgx-h100-cluster --nodes 4 -b 1M -e 1G -f 4 --op all_reduce\n"
              "  dptwin bench --backend host --devices 2 -b 8 -e 16M --out bench.json\n\n" +
              exit_codes_help());
  return [o, cmd]() {
    o->op_given = cmd->count("--op") > 0;
    for (const char* f : {"--hardware", "--nodes", "--nccl-version", "--nccl-p2p-disable", "--algo", "--proto", "--check",
                          "--gemm-size", "--copy-bytes", "--no-micro", "--tf32"})
      if (cmd->count(f) > 0) o->given.push_back(f);
    return run_bench(*o);
  };
}};

}  // namespace
}  // namespace dpt::cli::cmd_bench
