#include "scenarios/measure/device_bench.hpp"
#include "sim/twin/json_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/kernels.hpp"
#include "engine/core/timestamp.hpp"

namespace dpt {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

const std::vector<std::string>& known_collectives() {
  static const std::vector<std::string> k = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"};
  return k;
}

std::string nccl_type_name(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i64: return "int64";
    case DType::i32: return "int32";
    case DType::bf16: return "bfloat16";
    case DType::f16: return "half";
  }
  return "?";
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(' '));
        return v;
      }
    }
  return "unknown CPU";
}

void validate(const DeviceBenchOptions& o) {
  const SweepOptions& s = o.sweep;
  if (s.min_bytes < 1) throw std::invalid_argument(fmt::format("-b {}: the smallest size must be at least 1 byte", s.min_bytes));
  if (s.max_bytes < s.min_bytes)
    throw std::invalid_argument(fmt::format("-e {} is smaller than -b {}", s.max_bytes, s.min_bytes));
  if (!(s.step_factor > 1)) throw std::invalid_argument(fmt::format("-f {}: the step factor must exceed 1", s.step_factor));
  if (s.iters < 1) throw std::invalid_argument(fmt::format("-n {}: at least one timed iteration", s.iters));
  if (s.warmup_iters < 0) throw std::invalid_argument(fmt::format("-w {}: warm-up iterations cannot be negative", s.warmup_iters));
  for (const auto& c : o.collectives)
    if (std::find(known_collectives().begin(), known_collectives().end(), c) == known_collectives().end())
      throw std::invalid_argument(fmt::format("Invalid collective: {}; known: all_reduce, all_gather, reduce_scatter, "
                                              "broadcast, reduce",
                                              c));
  if (o.gemm_size < 1) throw std::invalid_argument(fmt::format("--gemm-size {}: must be positive", o.gemm_size));
  if (o.copy_bytes < 1) throw std::invalid_argument(fmt::format("--copy-bytes {}: must be positive", o.copy_bytes));
}

// Input element i of rank r: small integers, exact in every dtype and after any
// reduction over a few ranks, so results are checked with ==.
double pattern(std::int64_t i, int r) { return static_cast<double>(i % 17 + r); }

double reduce_expected(ReduceOp op, std::int64_t i, int n) {
  switch (op) {
    case ReduceOp::sum: return n * static_cast<double>(i % 17) + n * (n - 1) / 2.0;
    case ReduceOp::avg: return (n * static_cast<double>(i % 17) + n * (n - 1) / 2.0) / n;
    case ReduceOp::max: return pattern(i, n - 1);
    case ReduceOp::min: return pattern(i, 0);
  }
  return 0;
}

// avg divides, which integer types round and floating types may round in the last bit.
bool matches(double got, double want, ReduceOp op, DType t) {
  if (op != ReduceOp::avg) return got == want;
  if (!dtype_is_floating(t)) return got == std::trunc(want) || got == std::round(want);
  return std::abs(got - want) <= (t == DType::f32 ? 1e-6 : 1e-15) * std::max(1.0, std::abs(want));
}

Tensor host_filled(Backend& b, Device& d, Elements n, DType t, const std::function<double(std::int64_t)>& v) {
  Tensor h = Tensor::empty(b.host_memory(), {n}, t);
  std::vector<double> vals(static_cast<size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) vals[static_cast<size_t>(i)] = v(i);
  tensor_fill_from_f64(h, vals);
  return copy_to(b, h, d, MemoryCategory::workspace);
}

std::vector<double> read_back(Backend& b, const Tensor& t) {
  return tensor_to_f64_vector(copy_to(b, t, b.host_memory(), MemoryCategory::workspace));
}

// Elements of rank r's output that differ from the exact result of `collective` on the
// pattern() inputs (count: elements of each rank's call, as bench_collective sizes it).
std::int64_t count_wrong(const std::vector<double>& got, const std::string& collective, const DeviceBenchOptions& o,
                         Elements count, int r, int n) {
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(got.size()); ++i) {
    double want = 0;
    if (collective == "all_reduce" || collective == "reduce") want = reduce_expected(o.op, i, n);
    else if (collective == "broadcast") want = pattern(i, o.root);
    else if (collective == "all_gather") want = pattern(i % count, static_cast<int>(i / count));
    else want = reduce_expected(o.op, r * count + i, n);
    if (!matches(got[static_cast<size_t>(i)], want, o.op, o.dtype)) ++bad;
  }
  return bad;
}

}  // namespace

DeviceBenchOptions default_device_bench_options(const std::string& backend) {
  DeviceBenchOptions o;
  if (backend == "cuda") {
    o.gemm_size = 4096;
    o.copy_bytes = 256 * kMiB;
    o.sweep.max_bytes = 256 * kMiB;
  } else {
    o.gemm_size = 512;
    o.copy_bytes = 32 * kMiB;
    o.sweep.max_bytes = 16 * kMiB;
    o.sweep.iters = 10;
    o.sweep.warmup_iters = 2;
  }
  return o;
}

Bytes parse_nccl_size(const std::string& text, const std::string& flag) {
  if (text.empty()) throw std::invalid_argument(flag + ": empty size");
  Bytes mult = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K': case 'k': mult = kKiB; digits.pop_back(); break;
    case 'M': case 'm': mult = kMiB; digits.pop_back(); break;
    case 'G': case 'g': mult = kGiB; digits.pop_back(); break;
    default: break;
  }
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument(fmt::format("{} '{}': not a size (a whole number, optionally with K, M or G = "
                                            "1024, 1024^2, 1024^3 as nccl-tests reads them)",
                                            flag, text));
  const Bytes v = std::stoll(digits);
  if (v > (Bytes{1} << 50) / mult) throw std::invalid_argument(fmt::format("{} '{}': too large", flag, text));
  return v * mult;
}

std::vector<Bytes> sweep_sizes(const SweepOptions& s) {
  std::vector<Bytes> out;
  for (double size = static_cast<double>(s.min_bytes); size <= static_cast<double>(s.max_bytes) * (1 + 1e-12);
       size *= s.step_factor)
    out.push_back(static_cast<Bytes>(size));
  return out;
}

GemmFigure bench_gemm(Backend& b, int device, DType dtype, std::int64_t size, int warmup, int iters,
                      const std::string& label) {
  Device& d = b.device(device);
  const std::int64_t m = size, n = size, k = size;
  Tensor a = Tensor::zeros(d, {m, k}, dtype), bm = Tensor::zeros(d, {k, n}, dtype), c = Tensor::zeros(d, {m, n}, dtype);
  kernel_fill(a, 0.5);
  kernel_fill(bm, 0.25);
  const double flops = gemm_flops(m, n, k);
  GemmFigure g;
  g.dtype = label;
  g.device = device;
  g.m = m; g.n = n; g.k = k;
  g.time_s = time_op(b, d, Timing::mean_of(warmup, iters), [&] {
    d.submit({"gemm", OpKind::compute, flops, (m * k + k * n) * dtype_size_bytes(dtype), m * n * dtype_size_bytes(dtype)},
             [&] { d.kernels().gemm(dtype, false, false, m, n, k, 1.0, a.data(), bm.data(), 0.0, c.data()); });
  });
  g.flops_per_s = flops / g.time_s;
  return g;
}

CollectiveSweep bench_collective(Backend& b, const std::string& collective, const DeviceBenchOptions& o,
                                 const BenchProgress& progress) {
  validate(o);
  const int n = b.device_count();
  std::vector<int> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  auto comms = b.make_communicators(ids);
  const bool rooted = collective == "broadcast" || collective == "reduce";
  const bool reducing = collective != "all_gather" && collective != "broadcast";
  if (rooted && (o.root < 0 || o.root >= n))
    throw std::invalid_argument(fmt::format("-r {}: root outside 0..{}", o.root, n - 1));
  CollectiveSweep s;
  s.collective = collective;
  s.ranks = n;
  s.type = nccl_type_name(o.dtype);
  s.redop = reducing ? reduce_op_name(o.op) : "none";
  s.root = rooted ? o.root : -1;
  s.communicator = comms.front()->backend_name();
  if (progress.sweep_started) progress.sweep_started(s);
  const Bytes elt = dtype_size_bytes(o.dtype);
  const bool gathers = collective == "all_gather" || collective == "reduce_scatter";
  for (Bytes requested : sweep_sizes(o.sweep)) {
    // count: elements of each rank's call (the gather/scatter side per rank).
    const Elements count = gathers ? requested / elt / n : requested / elt;
    if (count == 0) continue;  // smaller than one element per rank, as nccl-tests skips
    CollectiveRow row;
    row.count = count;
    row.size_bytes = gathers ? count * n * elt : count * elt;
    std::vector<Seconds> times(static_cast<size_t>(n), 0);
    std::vector<std::int64_t> wrong(static_cast<size_t>(n), 0);
    b.parallel_for(n, [&](int r) {
      Communicator& c = *comms[static_cast<size_t>(r)];
      Device& d = b.device(r);
      const Elements in_n = collective == "reduce_scatter" ? count * n : count;
      const Elements out_n = collective == "all_gather" ? count * n : count;
      // Zeros while timing: sums stay 0, so repeated in-place reductions cannot overflow.
      Tensor in = Tensor::zeros(d, {in_n}, o.dtype);
      Tensor out = gathers ? Tensor::zeros(d, {out_n}, o.dtype) : in;
      auto issue = [&]() -> WorkPtr {
        if (collective == "all_reduce") return c.all_reduce(in, {o.op});
        if (collective == "broadcast") return c.broadcast(in, {o.root});
        if (collective == "reduce") return c.reduce(in, {o.root, o.op});
        if (collective == "all_gather") return c.all_gather(out, in, {});
        return c.reduce_scatter(out, in, {o.op});
      };
      for (int i = 0; i < o.sweep.warmup_iters; ++i) issue()->wait();
      c.barrier({})->wait();
      d.synchronize();
      // As nccl-tests: issue every timed iteration, then wait for them all.
      const auto t0 = Clock::now();
      std::vector<WorkPtr> works;
      works.reserve(static_cast<size_t>(o.sweep.iters));
      for (int i = 0; i < o.sweep.iters; ++i) works.push_back(issue());
      for (auto& w : works) w->wait();
      d.synchronize();
      times[static_cast<size_t>(r)] = since(t0) / o.sweep.iters;
      if (!o.sweep.check) return;
      in = host_filled(b, d, in_n, o.dtype, [&](std::int64_t i) { return pattern(i, r); });
      if (!gathers) out = in;
      issue()->wait();
      if (collective == "reduce" && r != o.root) return;  // only the root's buffer is defined
      wrong[static_cast<size_t>(r)] = count_wrong(read_back(b, out), collective, o, count, r, n);
    });
    row.time_s = *std::max_element(times.begin(), times.end());  // the slowest rank bounds the collective
    row.algbw = static_cast<double>(row.size_bytes) / row.time_s;
    row.busbw = row.algbw * bench_busbw_factor(collective, n);
    if (o.sweep.check) {
      row.wrong = 0;
      for (auto w : wrong) *row.wrong += w;
    }
    s.rows.push_back(row);
    if (progress.row_done) progress.row_done(s, row);
  }
  return s;
}

DeviceBenchResult run_device_bench(Backend& b, const DeviceBenchOptions& o, const BenchProgress& progress) {
  validate(o);
  DeviceBenchResult r;
  r.backend = b.name();
  r.date = utc_timestamp_now();
  r.hostname = host_name();
  r.sweep = o.sweep;
  const int n = b.device_count();
  const std::string cpu = cpu_model();
  for (int i = 0; i < n; ++i) {
    Device& d = b.device(i);
    r.device_names.push_back(d.kind() == DeviceKind::cuda ? d.name() : d.name() + " " + cpu);
  }
  const int w = std::min(o.sweep.warmup_iters, 2), it = std::max(1, std::min(o.sweep.iters, 10));
  const Timing copies = Timing::mean_of(std::max(1, w), it);
  if (o.run_gemm)
    for (int i = 0; i < n; ++i)
      for (DType t : o.gemm_dtypes)
        r.gemm.push_back(bench_gemm(b, i, t, o.gemm_size, std::max(1, w), it, std::string(dtype_name(t))));
  if (o.run_memory)
    for (int i = 0; i < n; ++i) r.bandwidth.push_back(bench_memory(b, b.device(i), o.copy_bytes, copies));
  if (o.run_copies) {
    for (int i = 0; i < n; ++i) {
      r.bandwidth.push_back(bench_copy(b, "h2d", b.host_memory(), b.device(i), o.copy_bytes, copies));
      r.bandwidth.push_back(bench_copy(b, "d2h", b.device(i), b.host_memory(), o.copy_bytes, copies));
    }
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j) r.bandwidth.push_back(bench_copy(b, "peer", b.device(i), b.device(j), o.copy_bytes, copies));
  }
  if (o.run_collectives)
    for (const auto& c : o.collectives) r.collectives.push_back(bench_collective(b, c, o, progress));
  return r;
}

// ---- text ---------------------------------------------------------------------------

std::string collective_sweep_header_text(const CollectiveSweep& s, const DeviceBenchResult& meta) {
  std::string t = fmt::format("# Collective test starting: {}_perf\n", s.collective);
  t += fmt::format("# nThread 1 nGpus {} minBytes {} maxBytes {} step: {:g}(factor) warmup iters: {} iters: {} agg "
                   "iters: 1 validation: {} graph: 0\n",
                   s.ranks, meta.sweep.min_bytes, meta.sweep.max_bytes, meta.sweep.step_factor,
                   meta.sweep.warmup_iters, meta.sweep.iters, meta.sweep.check ? 1 : 0);
  t += fmt::format("# dptwin bench --backend {} ({} communicator)\n#\n# Using devices\n", meta.backend, s.communicator);
  for (size_t i = 0; i < meta.device_names.size() && static_cast<int>(i) < s.ranks; ++i)
    t += fmt::format("#  Rank {:2} Group  0 Pid {:6} on {:>10} device {:2} [{}] {}\n", i, ::getpid(), meta.hostname, i,
                     meta.device_names[i].substr(0, meta.device_names[i].find(' ')),
                     meta.device_names[i].find(' ') == std::string::npos
                         ? std::string()
                         : meta.device_names[i].substr(meta.device_names[i].find(' ') + 1));
  const bool in_place = s.collective == "all_reduce" || s.collective == "broadcast" || s.collective == "reduce";
  t += fmt::format("#\n# {:>62}\n", in_place ? "in-place" : "out-of-place");
  t += "#       size         count      type   redop    root     time   algbw   busbw  #wrong\n";
  t += "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        \n";
  return t;
}

std::string collective_row_text(const CollectiveSweep& s, const CollectiveRow& r) {
  return fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7.2f}  {:>6.2f}  {:>6.2f}  {:>6}\n", r.size_bytes, r.count,
                     s.type, s.redop, s.root, r.time_s * 1e6, r.algbw / 1e9, r.busbw / 1e9,
                     r.wrong ? std::to_string(*r.wrong) : std::string("N/A"));
}

std::string collective_sweep_footer_text(const CollectiveSweep& s) {
  std::int64_t wrong = 0;
  double busbw = 0;
  for (const auto& r : s.rows) {
    wrong += r.wrong.value_or(0);
    busbw += r.busbw;
  }
  return fmt::format("# Out of bounds values : {} {}\n# Avg bus bandwidth    : {:.4f}\n#\n", wrong,
                     wrong == 0 ? "OK" : "FAILED", s.rows.empty() ? 0.0 : busbw / static_cast<double>(s.rows.size()) / 1e9);
}

std::string micro_figures_text(const DeviceBenchResult& r) {
  std::string t = fmt::format("# dptwin bench --backend {} on {} ({})\n", r.backend, r.hostname, r.date);
  for (const auto& [k, v] : r.versions) t += fmt::format("# {}: {}\n", k, v);
  for (const auto& d : r.device_names) t += fmt::format("# device {}\n", d);
  if (!r.gemm.empty()) {
    t += "#\n# GEMM (M = N = K)          device  dtype       size    time (us)    TFLOP/s\n";
    for (const auto& g : r.gemm)
      t += fmt::format("  gemm                      {:>6}  {:>5}  {:>9}  {:>11.1f}  {:>9.3f}\n", g.device, g.dtype, g.m,
                       g.time_s * 1e6, g.flops_per_s / 1e12);
  }
  if (!r.bandwidth.empty()) {
    t += "#\n# copies      src   dst        bytes    time (us)   GB/s (1e9 B/s; memory: read + written)\n";
    for (const auto& b : r.bandwidth)
      t += fmt::format("  {:<8}  {:>5}  {:>4}  {:>11}  {:>11.1f}  {:>9.2f}\n", b.kind, b.src, b.dst, b.bytes,
                       b.time_s * 1e6, b.bytes_per_s / 1e9);
  }
  return t;
}

// ---- JSON ----------------------------------------------------------------------------

nlohmann::json device_bench_to_json(const DeviceBenchResult& r) {
  using nlohmann::json;
  json j;
  j["schema"] = kBenchSchema;
  j["backend"] = r.backend;
  j["date"] = r.date;
  j["hostname"] = r.hostname;
  j["devices"] = r.device_names;
  j["versions"] = r.versions;
  j["sweep"] = {{"min_bytes", r.sweep.min_bytes}, {"max_bytes", r.sweep.max_bytes}, {"step_factor", r.sweep.step_factor},
                {"iters", r.sweep.iters}, {"warmup_iters", r.sweep.warmup_iters}, {"check", r.sweep.check}};
  j["gemm"] = json::array();
  for (const auto& g : r.gemm)
    j["gemm"].push_back({{"dtype", g.dtype}, {"device", g.device}, {"m", g.m}, {"n", g.n}, {"k", g.k},
                         {"time_s", g.time_s}, {"flops_per_s", g.flops_per_s}});
  j["bandwidth"] = json::array();
  for (const auto& b : r.bandwidth)
    j["bandwidth"].push_back({{"kind", b.kind}, {"src", b.src}, {"dst", b.dst}, {"bytes", b.bytes},
                              {"time_s", b.time_s}, {"bytes_per_s", b.bytes_per_s}});
  j["collectives"] = json::array();
  for (const auto& s : r.collectives) {
    json rows = json::array();
    for (const auto& row : s.rows)
      rows.push_back({{"size_bytes", row.size_bytes}, {"count", row.count}, {"time_s", row.time_s},
                      {"algbw_bytes_per_s", row.algbw}, {"busbw_bytes_per_s", row.busbw},
                      {"wrong", row.wrong ? json(*row.wrong) : json(nullptr)}});
    j["collectives"].push_back({{"collective", s.collective}, {"ranks", s.ranks}, {"type", s.type},
                                {"redop", s.redop}, {"root", s.root}, {"communicator", s.communicator},
                                {"rows", rows}});
  }
  return j;
}

namespace {

// Strict field access: a missing key or wrong type names `where` and the key path.
class Reader {
 public:
  Reader(const nlohmann::json& j, std::string where, std::string path) : j_(j), where_(std::move(where)), path_(std::move(path)) {
    if (!j_.is_object()) fail(path_.empty() ? "the document" : path_, "is not an object");
  }
  template <typename T> T get(const std::string& key) const {
    const auto it = j_.find(key);
    if (it == j_.end()) fail(at(key), "is missing");
    try {
      return it->template get<T>();
    } catch (const nlohmann::json::exception&) {
      fail(at(key), "has the wrong type");
    }
  }
  const nlohmann::json& array(const std::string& key) const {
    const auto it = j_.find(key);
    if (it == j_.end() || !it->is_array()) fail(at(key), "must be an array");
    return *it;
  }
  Reader sub(const nlohmann::json& j, const std::string& key) const { return Reader(j, where_, at(key)); }
  void only(std::initializer_list<const char*> keys) const {
    for (const auto& item : j_.items()) {
      const std::string& k = item.key();  // not a structured binding: clang before 16 cannot capture one
      if (std::none_of(keys.begin(), keys.end(), [&](const char* x) { return k == x; })) fail(at(k), "is not a known key");
    }
  }
  std::string at(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw std::invalid_argument(fmt::format("{}: {} {}", where_, key, what));
  }

 private:
  const nlohmann::json& j_;
  std::string where_, path_;
};

}  // namespace

DeviceBenchResult device_bench_from_json(const nlohmann::json& j, const std::string& where) {
  Reader top(j, where, "");
  require_document_kind(j, kBenchSchema, where, "a bench result");
  // `bench --backend sim --out` writes the twin's own sweep: a prediction, not a measurement.
  if (j.is_object() && j.contains("backend") && j["backend"] == "sim")
    throw std::invalid_argument(fmt::format("{}: a bench of --backend sim is the twin's own prediction, not a "
                                            "measurement; calibrate from a --backend host or cuda bench, or from "
                                            "nccl-tests logs",
                                            where));
  top.only({"schema", "backend", "date", "hostname", "devices", "versions", "sweep", "gemm", "bandwidth", "collectives"});
  if (top.get<std::string>("schema") != kBenchSchema)
    top.fail("schema", fmt::format("is '{}', expected '{}'", top.get<std::string>("schema"), kBenchSchema));
  DeviceBenchResult r;
  r.backend = top.get<std::string>("backend");
  r.date = top.get<std::string>("date");
  r.hostname = top.get<std::string>("hostname");
  r.device_names = top.get<std::vector<std::string>>("devices");
  r.versions = top.get<std::map<std::string, std::string>>("versions");
  const Reader sw = top.sub(j.at("sweep"), "sweep");
  sw.only({"min_bytes", "max_bytes", "step_factor", "iters", "warmup_iters", "check"});
  r.sweep.min_bytes = sw.get<Bytes>("min_bytes");
  r.sweep.max_bytes = sw.get<Bytes>("max_bytes");
  r.sweep.step_factor = sw.get<double>("step_factor");
  r.sweep.iters = sw.get<int>("iters");
  r.sweep.warmup_iters = sw.get<int>("warmup_iters");
  r.sweep.check = sw.get<bool>("check");
  const auto& gemm = top.array("gemm");
  for (size_t i = 0; i < gemm.size(); ++i) {
    const Reader g = top.sub(gemm[i], fmt::format("gemm[{}]", i));
    g.only({"dtype", "device", "m", "n", "k", "time_s", "flops_per_s"});
    r.gemm.push_back({g.get<std::string>("dtype"), g.get<int>("device"), g.get<std::int64_t>("m"),
                      g.get<std::int64_t>("n"), g.get<std::int64_t>("k"), g.get<double>("time_s"),
                      g.get<double>("flops_per_s")});
    if (!(r.gemm.back().flops_per_s > 0)) g.fail(g.at("flops_per_s"), "must be positive");
  }
  const auto& bw = top.array("bandwidth");
  for (size_t i = 0; i < bw.size(); ++i) {
    const Reader b = top.sub(bw[i], fmt::format("bandwidth[{}]", i));
    b.only({"kind", "src", "dst", "bytes", "time_s", "bytes_per_s"});
    r.bandwidth.push_back({b.get<std::string>("kind"), b.get<int>("src"), b.get<int>("dst"), b.get<Bytes>("bytes"),
                           b.get<double>("time_s"), b.get<double>("bytes_per_s")});
    const auto& k = r.bandwidth.back().kind;
    if (k != "memory" && k != "h2d" && k != "d2h" && k != "peer")
      b.fail(b.at("kind"), fmt::format("is '{}'; known: memory, h2d, d2h, peer", k));
    if (!(r.bandwidth.back().bytes_per_s > 0)) b.fail(b.at("bytes_per_s"), "must be positive");
  }
  const auto& cs = top.array("collectives");
  for (size_t i = 0; i < cs.size(); ++i) {
    const Reader c = top.sub(cs[i], fmt::format("collectives[{}]", i));
    c.only({"collective", "ranks", "type", "redop", "root", "communicator", "rows"});
    CollectiveSweep s;
    s.collective = c.get<std::string>("collective");
    bench_busbw_factor(s.collective, 1);
    s.ranks = c.get<int>("ranks");
    s.type = c.get<std::string>("type");
    s.redop = c.get<std::string>("redop");
    s.root = c.get<int>("root");
    s.communicator = c.get<std::string>("communicator");
    const auto& rows = c.array("rows");
    for (size_t k = 0; k < rows.size(); ++k) {
      const Reader row = c.sub(rows[k], fmt::format("rows[{}]", k));
      row.only({"size_bytes", "count", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "wrong"});
      CollectiveRow cr;
      cr.size_bytes = row.get<Bytes>("size_bytes");
      cr.count = row.get<Elements>("count");
      cr.time_s = row.get<double>("time_s");
      cr.algbw = row.get<double>("algbw_bytes_per_s");
      cr.busbw = row.get<double>("busbw_bytes_per_s");
      const auto w = rows[k].find("wrong");
      if (w != rows[k].end() && !w->is_null()) cr.wrong = row.get<std::int64_t>("wrong");
      s.rows.push_back(cr);
    }
    r.collectives.push_back(std::move(s));
  }
  return r;
}

}  // namespace dpt
