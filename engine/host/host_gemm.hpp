// Host GEMM dispatch. Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) picks its kernels by
// CPU model number and may fall back to old ones (Prescott SSE3 on a recent Xeon
// it does not know), so dptwin picks by CPU feature flags:
//   f32: oneDNN's dnnl_sgemm, JIT-compiled for the ISA the CPU reports;
//   f64: OpenBLAS (oneDNN has no dgemm), loaded with dlopen after
//        OPENBLAS_CORETYPE names the core the flags call for, because OpenBLAS
//        reads it once, in its load-time constructor. A core the user already
//        set in OPENBLAS_CORETYPE is used as it is.
// Both run on the calling thread only (one BLAS thread per host device) and are
// deterministic: the same inputs give the same bits, whatever the alignment of
// the buffers or the thread that calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dpt {

// The flags the core choice depends on (from cpuid, via the compiler's builtins).
struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
};
CpuFeatures host_cpu_features();

// The OpenBLAS core (an OPENBLAS_CORETYPE value) whose kernels the flags allow:
// SkylakeX for AVX-512 F/BW/DQ/VL, Haswell for AVX2 with FMA, Sandybridge for
// AVX; none (OpenBLAS's own choice) below that.
std::optional<std::string> openblas_core_for(const CpuFeatures& f);

// What runs each dtype's GEMM, for reports: "oneDNN 2.6.3 sgemm (JIT avx512_core_bf16)",
// "OpenBLAS 0.3.21 SkylakeX (core from CPU flags)".
struct HostGemmInfo {
  std::string f32;
  std::string f64;
  std::string summary() const { return "f32 " + f32 + "; f64 " + f64; }
};
// Loads the libraries on the first call (thread-safe); throws std::runtime_error
// when OpenBLAS cannot be loaded (the message names the file and dlerror()).
const HostGemmInfo& host_gemm_info();

// Row-major C[M,N] = alpha op(A) op(B) + beta C with op(A) [M,K], op(B) [K,N],
// leading dimensions those of dense row-major storage. k == 0 gives beta * C
// (C zeroed when beta == 0); m == 0 or n == 0 touches nothing.
void host_gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
               const float* a, const float* b, float beta, float* c);
void host_gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
               const double* a, const double* b, double beta, double* c);

}  // namespace dpt
