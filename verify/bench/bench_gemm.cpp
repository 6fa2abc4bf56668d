// Benchmark (not a test): the host GEMM candidates side by side on the shapes of
// bench_step's MLP (1024-4096-4096-1024, batch 256), the nine GEMMs of a step as
// the engine calls them (forward A B^T, weight gradient A^T B with beta 1, input
// gradient A B), f32 and f64, one thread, in interleaved rounds:
//   - OpenBLAS as this environment loads it (its OPENBLAS_CORETYPE, or its own
//     choice by CPU model);
//   - OpenBLAS with the core the CPU flags call for, set before its constructor
//     runs: a private copy loaded with dlmopen into a new link namespace while the
//     variable is set, then the variable restored;
//   - BLIS with its own dispatch (bli_arch_query_id; BLIS_ARCH_TYPE overrides it);
//   - oneDNN's dnnl_sgemm (f32 only: oneDNN has no dgemm);
//   - dptwin's host_gemm, the path the engine runs (host_gemm.hpp).
// Prints per candidate the median over rounds of the nine GEMMs' total time, in
// wall time and in thread CPU time, and GFLOP/s per shape.
//
//   bench_gemm [--rounds 5]
#include <blis.h>
#include <dlfcn.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/host/host_gemm.hpp"
#include "verify/bench/cpu_peak.hpp"

namespace {

using Clock = std::chrono::steady_clock;
// CBLAS's enum values (cblas.h): row major 101, no transpose 111, transpose 112.
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                            int);
using CblasDgemm = void (*)(int, int, int, int, int, int, double, const double*, int, const double*, int, double,
                            double*, int);

struct Shape {
  bool ta, tb;
  std::int64_t m, n, k;
  double beta;
  std::string name;
};

std::vector<Shape> step_shapes() {
  const std::int64_t w[] = {1024, 4096, 4096, 1024}, batch = 256;
  std::vector<Shape> s;
  for (int l = 0; l < 3; ++l) {
    const std::int64_t in = w[l], out = w[l + 1];
    s.push_back({false, true, batch, out, in, 0.0, fmt::format("fwd{}", l)});
    s.push_back({true, false, out, in, batch, 1.0, fmt::format("dw{}", l)});
    s.push_back({false, false, batch, in, out, 0.0, fmt::format("dx{}", l)});
  }
  return s;
}

struct OpenBlasCopy {
  CblasSgemm sgemm = nullptr;
  CblasDgemm dgemm = nullptr;
  std::string core;
};

// A private OpenBLAS in a new link namespace, its constructor run with `core` in
// OPENBLAS_CORETYPE (or the environment as it is when core is empty).
OpenBlasCopy load_openblas_copy(const std::string& core) {
  const char* old = std::getenv("OPENBLAS_CORETYPE");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  if (!core.empty()) setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  void* lib = dlmopen(LM_ID_NEWLM, DPT_OPENBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!core.empty()) {
    if (saved) setenv("OPENBLAS_CORETYPE", saved->c_str(), 1);
    else unsetenv("OPENBLAS_CORETYPE");
  }
  if (!lib) throw std::runtime_error(fmt::format("dlmopen {}: {}", DPT_OPENBLAS_LIBRARY, dlerror()));
  OpenBlasCopy o;
  o.sgemm = reinterpret_cast<CblasSgemm>(dlsym(lib, "cblas_sgemm"));
  o.dgemm = reinterpret_cast<CblasDgemm>(dlsym(lib, "cblas_dgemm"));
  reinterpret_cast<void (*)(int)>(dlsym(lib, "openblas_set_num_threads"))(1);
  o.core = reinterpret_cast<char* (*)()>(dlsym(lib, "openblas_get_corename"))();
  return o;
}

template <typename T>
struct Operands {
  std::vector<T> a, b, c;
};

template <typename T>
Operands<T> operands(const Shape& s) {
  Operands<T> o;
  o.a.resize(static_cast<size_t>(s.m * s.k));
  o.b.resize(static_cast<size_t>(s.k * s.n));
  o.c.assign(static_cast<size_t>(s.m * s.n), T(0.5));
  for (size_t i = 0; i < o.a.size(); ++i) o.a[i] = static_cast<T>(static_cast<double>(i * 7919 % 1000) / 1000.0);
  for (size_t i = 0; i < o.b.size(); ++i) o.b[i] = static_cast<T>(static_cast<double>(i * 104729 % 1000) / 1000.0);
  return o;
}

struct Candidate {
  std::string name;
  // Runs shape s on the operands; false when the candidate lacks this dtype.
  std::function<bool(const Shape&, Operands<float>&)> f32;
  std::function<bool(const Shape&, Operands<double>&)> f64;
};

template <typename T, typename Cblas>
void cblas_call(Cblas fn, const Shape& s, Operands<T>& o) {
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  fn(101, s.ta ? 112 : 111, s.tb ? 112 : 111, m, n, k, T(1), o.a.data(), s.ta ? m : k, o.b.data(), s.tb ? k : n,
     static_cast<T>(s.beta), o.c.data(), n);
}

template <typename T>
void blis_call(const Shape& s, Operands<T>& o) {
  const trans_t ta = s.ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tb = s.tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
  T one = 1, beta = static_cast<T>(s.beta);
  const inc_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  if constexpr (std::is_same_v<T, float>)
    bli_sgemm(ta, tb, s.m, s.n, s.k, &one, o.a.data(), lda, 1, o.b.data(), ldb, 1, &beta, o.c.data(), s.n, 1);
  else
    bli_dgemm(ta, tb, s.m, s.n, s.k, &one, o.a.data(), lda, 1, o.b.data(), ldb, 1, &beta, o.c.data(), s.n, 1);
}

std::vector<Candidate> candidates(const OpenBlasCopy& env, const OpenBlasCopy& flags) {
  std::vector<Candidate> c;
  c.push_back({"OpenBLAS " + env.core + " (environment)",
               [=](const Shape& s, Operands<float>& o) { return cblas_call(env.sgemm, s, o), true; },
               [=](const Shape& s, Operands<double>& o) { return cblas_call(env.dgemm, s, o), true; }});
  c.push_back({"OpenBLAS " + flags.core + " (CPU flags)",
               [=](const Shape& s, Operands<float>& o) { return cblas_call(flags.sgemm, s, o), true; },
               [=](const Shape& s, Operands<double>& o) { return cblas_call(flags.dgemm, s, o), true; }});
  c.push_back({fmt::format("BLIS {} {}", bli_info_get_version_str(), bli_arch_string(bli_arch_query_id())),
               [](const Shape& s, Operands<float>& o) { return blis_call(s, o), true; },
               [](const Shape& s, Operands<double>& o) { return blis_call(s, o), true; }});
  c.push_back({"oneDNN sgemm",
               [](const Shape& s, Operands<float>& o) {
                 omp_set_num_threads(1);
                 dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, o.a.data(), s.ta ? s.m : s.k,
                            o.b.data(), s.tb ? s.k : s.n, static_cast<float>(s.beta), o.c.data(), s.n);
                 return true;
               },
               [](const Shape&, Operands<double>&) { return false; }});
  c.push_back({"dptwin host_gemm",
               [](const Shape& s, Operands<float>& o) {
                 dpt::host_gemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, o.a.data(), o.b.data(), static_cast<float>(s.beta),
                                o.c.data());
                 return true;
               },
               [](const Shape& s, Operands<double>& o) {
                 dpt::host_gemm(s.ta, s.tb, s.m, s.n, s.k, 1.0, o.a.data(), o.b.data(), s.beta, o.c.data());
                 return true;
               }});
  return c;
}

struct Times {
  std::vector<double> wall_s, cpu_s;                 // per round, the nine GEMMs
  std::vector<std::vector<double>> per_shape_cpu_s;  // [shape][round]
};

template <typename T>
void run_dtype(const char* dtype, std::vector<Candidate>& cs, const std::vector<Shape>& shapes, int rounds) {
  std::vector<Operands<T>> ops;
  double flops = 0;
  for (const auto& s : shapes) ops.push_back(operands<T>(s)), flops += 2.0 * static_cast<double>(s.m * s.n * s.k);
  std::vector<Times> t(cs.size());
  for (auto& x : t) x.per_shape_cpu_s.resize(shapes.size());
  for (int r = 0; r < rounds + 1; ++r)  // round 0 warms up (JIT, page faults)
    for (size_t c = 0; c < cs.size(); ++c) {
      double wall = 0, cpu = 0;
      for (size_t i = 0; i < shapes.size(); ++i) {
        const auto t0 = Clock::now();
        const double c0 = dpt::bench::thread_cpu_seconds();
        bool ran = false;
        if constexpr (std::is_same_v<T, float>) ran = cs[c].f32(shapes[i], ops[i]);
        else ran = cs[c].f64(shapes[i], ops[i]);
        if (!ran) break;
        const double dc = dpt::bench::thread_cpu_seconds() - c0;
        wall += std::chrono::duration<double>(Clock::now() - t0).count(), cpu += dc;
        if (r > 0) t[c].per_shape_cpu_s[i].push_back(dc);
      }
      if (r > 0 && cpu > 0) t[c].wall_s.push_back(wall), t[c].cpu_s.push_back(cpu);
    }
  fmt::print("{}: the nine GEMMs, {:.1f} GFLOP; medians of {} rounds\n", dtype, flops / 1e9, rounds);
  for (size_t c = 0; c < cs.size(); ++c) {
    if (t[c].cpu_s.empty()) continue;
    const double wall = dpt::bench::median_of(t[c].wall_s), cpu = dpt::bench::median_of(t[c].cpu_s);
    std::string per_shape;
    for (size_t i = 0; i < shapes.size(); ++i)
      per_shape += fmt::format(" {}:{:.0f}", shapes[i].name,
                               2.0 * static_cast<double>(shapes[i].m * shapes[i].n * shapes[i].k) /
                                   dpt::bench::median_of(t[c].per_shape_cpu_s[i]) / 1e9);
    fmt::print("  {:<34} wall {:.4f} s {:6.1f} GFLOP/s | CPU {:.4f} s {:6.1f} GFLOP/s |{}\n", cs[c].name, wall,
               flops / wall / 1e9, cpu, flops / cpu / 1e9, per_shape);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int rounds = 5;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--rounds" && i + 1 < argc) rounds = std::stoi(argv[++i]);
      else throw std::invalid_argument("unknown flag " + a + " (bench_gemm [--rounds N])");
    }
    if (rounds < 1) throw std::invalid_argument("--rounds must be at least 1");
    bli_thread_set_num_threads(1);
    const auto flags_core = dpt::openblas_core_for(dpt::host_cpu_features());
    const OpenBlasCopy env = load_openblas_copy("");
    const OpenBlasCopy flags = load_openblas_copy(flags_core.value_or(""));
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    fmt::print("bench_gemm: OPENBLAS_CORETYPE {}; dptwin host GEMM: {}\n", coretype ? coretype : "not set",
               dpt::host_gemm_info().summary());
    std::ifstream loadavg("/proc/loadavg");
    std::string l1, l5, l15;
    loadavg >> l1 >> l5 >> l15;
    fmt::print("load average: {} {} {}\n", l1, l5, l15);
    auto cs = candidates(env, flags);
    const auto shapes = step_shapes();
    run_dtype<float>("f32", cs, shapes, rounds);
    run_dtype<double>("f64", cs, shapes, rounds);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_gemm: " << e.what() << "\n";
    return 2;
  }
}
