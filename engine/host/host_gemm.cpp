#include "engine/host/host_gemm.hpp"

#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <strings.h>

#include <fmt/format.h>

namespace dpt {

CpuFeatures host_cpu_features() {
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx = __builtin_cpu_supports("avx");
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  return f;
}

std::optional<std::string> openblas_core_for(const CpuFeatures& f) {
  if (f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.avx2 && f.fma) return "SkylakeX";
  if (f.avx2 && f.fma) return "Haswell";
  if (f.avx) return "Sandybridge";
  return std::nullopt;
}

namespace {

// Sets an environment variable for the lifetime of the object unless it is
// already set; unsets it again afterwards, so child processes (PyTorch in the
// benchmark, the twin's forked simulations) see the environment as it was.
class EnvDefault {
 public:
  EnvDefault(const char* name, const std::string& value) : name_(name) {
    if (std::getenv(name) == nullptr) set_ = setenv(name, value.c_str(), 1) == 0;
  }
  ~EnvDefault() {
    if (set_) unsetenv(name_);
  }
  EnvDefault(const EnvDefault&) = delete;
  EnvDefault& operator=(const EnvDefault&) = delete;

 private:
  const char* name_;
  bool set_ = false;
};

// OpenBLAS's entry points, looked up in the library dlopen'ed with the chosen core.
struct OpenBlas {
  decltype(&::cblas_dgemm) dgemm = nullptr;
  std::string description;
};

template <typename F>
F symbol(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) throw std::runtime_error(fmt::format("{}: no symbol {}", DPT_OPENBLAS_LIBRARY, name));
  return reinterpret_cast<F>(p);
}

// dptwin does not link OpenBLAS: it is loaded here, after OPENBLAS_CORETYPE is
// set, so its constructor (which reads the variable once) picks that core. If
// something else in the process loaded it first, its core is already fixed and
// the description says so.
OpenBlas load_openblas() {
  const char* user_core = std::getenv("OPENBLAS_CORETYPE");
  const std::optional<std::string> flags_core = openblas_core_for(host_cpu_features());
  const bool preloaded = dlopen(DPT_OPENBLAS_LIBRARY, RTLD_NOW | RTLD_NOLOAD) != nullptr;
  void* lib = nullptr;
  {
    std::optional<EnvDefault> core;
    if (flags_core) core.emplace("OPENBLAS_CORETYPE", *flags_core);
    EnvDefault threads("OPENBLAS_NUM_THREADS", "1");  // no idle thread pool
    lib = dlopen(DPT_OPENBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  }
  if (!lib) throw std::runtime_error(fmt::format("cannot load OpenBLAS ({}): {}", DPT_OPENBLAS_LIBRARY, dlerror()));
  OpenBlas o;
  o.dgemm = symbol<decltype(o.dgemm)>(lib, "cblas_dgemm");
  symbol<void (*)(int)>(lib, "openblas_set_num_threads")(1);  // one BLAS thread per host device
  const std::string loaded = symbol<char* (*)()>(lib, "openblas_get_corename")();
  std::string config = symbol<char* (*)()>(lib, "openblas_get_config")();
  const auto second_space = config.find(' ', config.find(' ') + 1);
  const std::string version = config.substr(0, second_space);  // "OpenBLAS 0.3.21"
  std::string why;
  if (preloaded) why = "loaded before dptwin chose a core";
  else if (user_core) why = fmt::format("from OPENBLAS_CORETYPE={}", user_core);
  else if (flags_core && strcasecmp(flags_core->c_str(), loaded.c_str()) == 0) why = "core from CPU flags";
  else if (flags_core) why = fmt::format("CPU flags asked for {}, this OpenBLAS lacks it", *flags_core);
  else why = "OpenBLAS's own choice";
  o.description = fmt::format("{} {} ({})", version, loaded, why);
  return o;
}

std::string isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return fmt::format("isa 0x{:x}", static_cast<unsigned>(isa));
  }
}

struct Libraries {
  OpenBlas openblas;
  HostGemmInfo info;
};

const Libraries& libraries() {
  static const Libraries libs = [] {
    Libraries l;
    l.openblas = load_openblas();
    const dnnl_version_t* v = dnnl_version();
    l.info.f32 = fmt::format("oneDNN {}.{}.{} sgemm (JIT {})", v->major, v->minor, v->patch,
                             isa_name(dnnl_get_effective_cpu_isa()));
    l.info.f64 = l.openblas.description;
    return l;
  }();
  return libs;
}

// BLAS may not touch C when k == 0; PyTorch's result is beta * C.
template <typename T>
bool trivial_gemm(std::int64_t m, std::int64_t n, std::int64_t k, T beta, T* c) {
  if (m < 0 || n < 0 || k < 0) throw std::invalid_argument(fmt::format("gemm: negative size m={} n={} k={}", m, n, k));
  if (m == 0 || n == 0) return true;
  if (k == 0) {
    for (std::int64_t i = 0; i < m * n; ++i) c[i] = beta == T(0) ? T(0) : beta * c[i];
    return true;
  }
  return false;
}

}  // namespace

const HostGemmInfo& host_gemm_info() { return libraries().info; }

void host_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
               const float* b, float beta, float* c) {
  if (trivial_gemm(m, n, k, beta, c)) return;
  (void)libraries();
  // oneDNN sizes its OpenMP team by the calling thread's setting; the host
  // devices are the parallelism, so each call runs on its caller alone.
  omp_set_num_threads(1);
  const dnnl_status_t s = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, ta ? m : k, b, tb ? k : n,
                                     beta, c, n);
  if (s != dnnl_success)
    throw std::runtime_error(fmt::format("dnnl_sgemm failed (status {}) for m={} n={} k={} trans_a={} trans_b={}",
                                         static_cast<int>(s), m, n, k, ta, tb));
}

void host_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
               const double* b, double beta, double* c) {
  if (trivial_gemm(m, n, k, beta, c)) return;
  constexpr auto max = std::numeric_limits<blasint>::max();
  if (m > max || n > max || k > max)
    throw std::invalid_argument(fmt::format("gemm: m={} n={} k={} exceed the BLAS integer range", m, n, k));
  const auto bm = static_cast<blasint>(m), bn = static_cast<blasint>(n), bk = static_cast<blasint>(k);
  libraries().openblas.dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, bm, bn,
                             bk, alpha, a, ta ? bm : bk, b, tb ? bk : bn, beta, c, bn);
}

}  // namespace dpt
