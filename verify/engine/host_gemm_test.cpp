// The host GEMM dispatch (oneDNN f32, OpenBLAS f64 with a core chosen from CPU
// flags): results against a reference loop on random shapes and transposes, f32 and
// f64; the same bits for the same inputs whatever the buffers' alignment and the
// calling thread; one thread per call; the core choice and what the report says.
// OPENBLAS_CORETYPE is never set here: a value the environment sets is respected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "engine/host/host_gemm.hpp"

namespace dpt {
namespace {

template <typename T>
struct Case {
  bool ta = false, tb = false;
  std::int64_t m = 0, n = 0, k = 0;
  T alpha = 1, beta = 0;
  std::vector<T> a, b, c;  // a is stored [m,k] or, transposed, [k,m]; likewise b
};

template <typename T>
Case<T> random_case(std::mt19937_64& rng, std::int64_t m, std::int64_t n, std::int64_t k) {
  std::uniform_real_distribution<double> u(-1, 1);
  Case<T> c;
  c.ta = rng() % 2, c.tb = rng() % 2, c.m = m, c.n = n, c.k = k;
  c.alpha = static_cast<T>(u(rng) * 2);
  const int beta_kind = static_cast<int>(rng() % 3);  // 0, 1, or any
  c.beta = beta_kind == 0 ? T(0) : beta_kind == 1 ? T(1) : static_cast<T>(u(rng));
  for (auto* v : {&c.a, &c.b}) v->resize(static_cast<size_t>(v == &c.a ? m * k : k * n));
  c.c.resize(static_cast<size_t>(m * n));
  for (auto* v : {&c.a, &c.b, &c.c})
    for (auto& x : *v) x = static_cast<T>(u(rng));
  // With beta == 0, BLAS semantics: C is not read, so NaN there must not leak.
  if (c.beta == T(0))
    for (auto& x : c.c) x = std::numeric_limits<T>::quiet_NaN();
  return c;
}

template <typename T>
T at_a(const Case<T>& c, std::int64_t i, std::int64_t p) {
  return c.ta ? c.a[static_cast<size_t>(p * c.m + i)] : c.a[static_cast<size_t>(i * c.k + p)];
}
template <typename T>
T at_b(const Case<T>& c, std::int64_t p, std::int64_t j) {
  return c.tb ? c.b[static_cast<size_t>(j * c.k + p)] : c.b[static_cast<size_t>(p * c.n + j)];
}

// Invariant: each C[i,j] is a dot product of length k, scaled by alpha and added to
// beta C. Computed in floating point in any order, with or without FMA, it is
// within gamma_(k+2) (|alpha| sum_p |a_ip b_pj| + |beta c_ij|) of the exact value,
// gamma_n = n u / (1 - n u) <= n eps for the unit roundoff u = eps / 2 (Higham,
// Accuracy and Stability of Numerical Algorithms, 3.1). The reference is a plain
// loop in long double; the bound is (k + 2) eps plus the smallest normal.
template <typename T>
void expect_matches_reference(const Case<T>& c0) {
  Case<T> c = c0;
  host_gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, c.a.data(), c.b.data(), c.beta, c.c.data());
  const long double eps = std::numeric_limits<T>::epsilon();
  for (std::int64_t i = 0; i < c.m; ++i)
    for (std::int64_t j = 0; j < c.n; ++j) {
      long double dot = 0, magnitude = 0;
      for (std::int64_t p = 0; p < c.k; ++p) {
        dot += static_cast<long double>(at_a(c, i, p)) * at_b(c, p, j);
        magnitude += std::fabs(static_cast<long double>(at_a(c, i, p)) * at_b(c, p, j));
      }
      const long double c_in = c.beta == T(0) ? 0 : c0.c[static_cast<size_t>(i * c.n + j)];
      const long double ref = c.alpha * dot + c.beta * c_in;
      const long double bound = (static_cast<long double>(c.k) + 2) * eps *
                                    (std::fabs(static_cast<long double>(c.alpha)) * magnitude +
                                     std::fabs(static_cast<long double>(c.beta) * c_in)) +
                                std::numeric_limits<T>::min();
      const T got = c.c[static_cast<size_t>(i * c.n + j)];
      ASSERT_TRUE(std::isfinite(got)) << "C[" << i << "," << j << "] m=" << c.m << " n=" << c.n << " k=" << c.k;
      ASSERT_LE(std::fabs(got - ref), bound) << "C[" << i << "," << j << "] m=" << c.m << " n=" << c.n
                                             << " k=" << c.k << " trans_a=" << c.ta << " trans_b=" << c.tb
                                             << " alpha=" << c.alpha << " beta=" << c.beta;
    }
}

template <typename T>
void check_random_shapes(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Every combination of the edge sizes 0, 1, 2 and 7 with both transposes...
  for (std::int64_t m : {0, 1, 2, 7})
    for (std::int64_t n : {0, 1, 2, 7})
      for (std::int64_t k : {0, 1, 2, 7})
        for (int rep = 0; rep < 4; ++rep) expect_matches_reference(random_case<T>(rng, m, n, k));
  // ...then random sizes, up to past the kernels' register and cache blocks.
  std::uniform_int_distribution<std::int64_t> small(1, 40), large(1, 300);
  for (int i = 0; i < 60; ++i) expect_matches_reference(random_case<T>(rng, small(rng), small(rng), small(rng)));
  for (int i = 0; i < 12; ++i) expect_matches_reference(random_case<T>(rng, large(rng), large(rng), large(rng)));
}

TEST(HostGemm, F32MatchesReferenceLoopOnRandomShapesAndTransposes) { check_random_shapes<float>(17); }
TEST(HostGemm, F64MatchesReferenceLoopOnRandomShapesAndTransposes) { check_random_shapes<double>(18); }

// The benchmark's shapes as the engine calls them (forward, weight and input
// gradients of a 4096 x 1024 layer, batch 256) against the reference, f32.
TEST(HostGemm, F32MatchesReferenceOnTheBenchmarkLayerShapes) {
  std::mt19937_64 rng(19);
  for (auto [ta, tb, m, n, k] : {std::tuple{false, true, 256, 64, 1024}, std::tuple{true, false, 64, 1024, 256},
                                 std::tuple{false, false, 256, 1024, 64}}) {
    Case<float> c = random_case<float>(rng, m, n, k);
    c.ta = ta, c.tb = tb;
    expect_matches_reference(c);
  }
}

// Runs one case with A, B and C placed `offset` elements into fresh buffers.
template <typename T>
std::vector<T> run_at_offset(const Case<T>& c, size_t offset) {
  std::vector<T> a(offset + c.a.size()), b(offset + c.b.size()), out(offset + c.c.size());
  std::copy(c.a.begin(), c.a.end(), a.begin() + static_cast<std::ptrdiff_t>(offset));
  std::copy(c.b.begin(), c.b.end(), b.begin() + static_cast<std::ptrdiff_t>(offset));
  std::copy(c.c.begin(), c.c.end(), out.begin() + static_cast<std::ptrdiff_t>(offset));
  host_gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data() + offset, b.data() + offset, c.beta, out.data() + offset);
  return {out.begin() + static_cast<std::ptrdiff_t>(offset), out.end()};
}

// Invariant: the same inputs give the same bits. Between runs, what changes is where
// malloc puts the buffers and which thread calls; neither may change the result.
template <typename T>
void check_deterministic() {
  std::mt19937_64 rng(23);
  for (int i = 0; i < 6; ++i) {
    Case<T> c = random_case<T>(rng, 96 + i * 37, 80 + i * 41, 200 + i * 53);
    c.beta = 1;  // read C as well
    for (auto& x : c.c) x = T(0.25);
    const std::vector<T> first = run_at_offset(c, 0);
    for (size_t offset : {0, 1, 3, 5, 8, 16}) {
      const std::vector<T> again = run_at_offset(c, offset);
      ASSERT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(T)), 0) << "offset " << offset;
    }
    std::vector<T> other;
    std::thread([&] { other = run_at_offset(c, 1); }).join();
    ASSERT_EQ(std::memcmp(first.data(), other.data(), first.size() * sizeof(T)), 0) << "another thread";
  }
}

TEST(HostGemm, F32SameBitsWhateverTheAlignmentAndThread) { check_deterministic<float>(); }
TEST(HostGemm, F64SameBitsWhateverTheAlignmentAndThread) { check_deterministic<double>(); }

// FNV-1a over the result bits of fixed f32 and f64 GEMMs of every transpose.
std::uint64_t gemm_digest() {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  };
  std::mt19937_64 rng(31);
  for (int t = 0; t < 4; ++t) {
    Case<float> f = random_case<float>(rng, 257, 129, 300);
    Case<double> d = random_case<double>(rng, 257, 129, 300);
    f.ta = d.ta = t & 1, f.tb = d.tb = t & 2;
    host_gemm(f.ta, f.tb, f.m, f.n, f.k, f.alpha, f.a.data(), f.b.data(), f.beta, f.c.data());
    host_gemm(d.ta, d.tb, d.m, d.n, d.k, d.alpha, d.a.data(), d.b.data(), d.beta, d.c.data());
    mix(f.c.data(), f.c.size() * sizeof(float));
    mix(d.c.data(), d.c.size() * sizeof(double));
  }
  return h;
}

// Run by SameBitsInAFreshProcess in a child process (disabled otherwise).
TEST(HostGemm, DISABLED_PrintsTheDigestForAParentProcess) {
  const std::uint64_t digest = gemm_digest();
  EXPECT_NE(digest, 0u);
  std::printf("gemm digest: %016llx\n", static_cast<unsigned long long>(digest));
}

// Invariant: run to run, the same inputs give the same bits: a fresh process (new
// addresses, libraries loaded and JIT kernels generated anew, its first GEMMs)
// computes the digest this process computes after many GEMMs.
TEST(HostGemm, SameBitsInAFreshProcess) {
  (void)gemm_digest();  // here, the digest's GEMMs are not the process's first
  const std::uint64_t here = gemm_digest();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = "'" + self + "' --gtest_also_run_disabled_tests " +
                          "--gtest_filter=HostGemm.DISABLED_PrintsTheDigestForAParentProcess 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  const auto at = out.find("gemm digest: ");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_EQ(std::stoull(out.substr(at + 13, 16), nullptr, 16), here) << out;
}

std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Invariant: a GEMM runs on its caller only (the host devices are the parallelism),
// so the process starts no thread for it, however many cores the machine has. The
// GEMMs run on a fresh thread (an OpenMP runtime keeps one pool per calling thread,
// so threads that earlier tests may have started would hide new ones), which counts
// the process's threads before it returns: itself is the only one added.
TEST(HostGemm, RunsOnTheCallingThreadOnly) {
  (void)host_gemm_info();  // the libraries loaded before counting
  const std::size_t before = thread_count();
  std::size_t during = 0;
  std::thread([&] {
    std::mt19937_64 rng(29);
    Case<float> f = random_case<float>(rng, 512, 512, 512);
    Case<double> d = random_case<double>(rng, 512, 512, 512);
    host_gemm(false, false, 512, 512, 512, 1.0f, f.a.data(), f.b.data(), 0.0f, f.c.data());
    host_gemm(false, false, 512, 512, 512, 1.0, d.a.data(), d.b.data(), 0.0, d.c.data());
    during = thread_count();
  }).join();
  EXPECT_EQ(during, before + 1);
}

TEST(HostGemm, OpenBlasCoreFollowsTheFeatureFlags) {
  CpuFeatures none;
  EXPECT_EQ(openblas_core_for(none), std::nullopt);
  CpuFeatures avx;
  avx.avx = true;
  EXPECT_EQ(openblas_core_for(avx), "Sandybridge");
  CpuFeatures avx2 = avx;
  avx2.avx2 = true;
  EXPECT_EQ(openblas_core_for(avx2), "Sandybridge") << "AVX2 without FMA has no Haswell kernels";
  avx2.fma = true;
  EXPECT_EQ(openblas_core_for(avx2), "Haswell");
  CpuFeatures avx512 = avx2;
  avx512.avx512f = avx512.avx512bw = avx512.avx512dq = true;
  EXPECT_EQ(openblas_core_for(avx512), "Haswell") << "SkylakeX kernels need AVX-512 VL too";
  avx512.avx512vl = true;
  EXPECT_EQ(openblas_core_for(avx512), "SkylakeX");
}

// The report names the libraries and, for OpenBLAS, the core and why: the user's
// OPENBLAS_CORETYPE when the environment sets one, else the core the flags call
// for. Loading leaves the environment as it was.
TEST(HostGemm, InfoNamesTheKernelsAndLeavesTheEnvironmentAsItWas) {
  const char* before = std::getenv("OPENBLAS_CORETYPE");
  const std::string user_core = before ? before : "";
  const HostGemmInfo& info = host_gemm_info();
  EXPECT_NE(info.f32.find("oneDNN"), std::string::npos) << info.f32;
  EXPECT_NE(info.f64.find("OpenBLAS"), std::string::npos) << info.f64;
  const char* after = std::getenv("OPENBLAS_CORETYPE");
  if (!before) {
    EXPECT_EQ(after, nullptr) << "OPENBLAS_CORETYPE was left set to " << after;
    const auto core = openblas_core_for(host_cpu_features());
    if (core) {
      EXPECT_NE(info.f64.find(*core + " (core from CPU flags)"), std::string::npos) << info.f64;
    }
  } else {
    ASSERT_NE(after, nullptr);
    EXPECT_EQ(std::string(after), user_core);
    EXPECT_NE(info.f64.find("from OPENBLAS_CORETYPE=" + user_core), std::string::npos) << info.f64;
  }
  EXPECT_NE(info.summary().find("f32 " + info.f32), std::string::npos);
}

}  // namespace
}  // namespace dpt
