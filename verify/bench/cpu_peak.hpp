// One core's FP32 peak, from its flags and its clock, for the benchmarks:
//   peak = FMA units x f32 lanes per vector x 2 (an FMA is two FLOPs) x clock.
// - lanes: from the flags (AVX-512F: 16, AVX2/AVX: 8, else SSE: 4);
// - clock: measured, as a chain of dependent integer adds (one cycle each on every
//   x86 core) timed in thread CPU time, so time the thread waits for a core does
//   not count; the median of 5 and their range are reported;
// - FMA units: the flags do not say (a Xeon Silver has one 512-bit FMA unit, a
//   Gold two; Zen 4 splits 512-bit FMAs in two halves), so they are measured: 16
//   independent FMA chains (more than units x latency) timed the same way give FMAs
//   per cycle, rounded to the nearest whole unit.
// The clock of the add chain is the one this core runs scalar code at; under
// sustained AVX-512 FMAs some Xeons lower it, which the measured FMA rate
// (reported beside) includes and the formula does not.
#pragma once

#include <algorithm>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <immintrin.h>

namespace dpt::bench {

inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct CpuPeak {
  std::string isa;           // "AVX-512F", "AVX2+FMA", ...
  int f32_lanes = 4;         // per vector register
  double clock_ghz = 0;      // median of the add-chain measurements
  double clock_min_ghz = 0, clock_max_ghz = 0;
  double fma_per_cycle = 0;  // measured, vectors of f32_lanes
  int fma_units = 1;         // fma_per_cycle rounded
  double measured_fma_gflop_s = 0;
  double peak_gflop_s() const { return fma_units * f32_lanes * 2.0 * clock_ghz; }
};

// Cycles as dependent adds: each add waits for the previous one.
inline double measure_clock_ghz(long adds = 200'000'000) {
  long x = 0;
  const double t0 = thread_cpu_seconds();
  for (long i = 0; i < adds; i += 8)
    asm volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                 "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                 : "+r"(x));
  return static_cast<double>(adds) / (thread_cpu_seconds() - t0) / 1e9;
}

// FMAs per second with 16 independent accumulators of one vector width; the
// empty asm keeps each chain in its register and unfolded.
#define DPT_FMA_LOOP(V, SET, FMA)                                                  \
  V acc[16];                                                                       \
  _Pragma("GCC unroll 16") for (int i = 0; i < 16; ++i) acc[i] = SET(0.001f * static_cast<float>(i)); \
  const V a = SET(0.999999f), b = SET(1e-7f);                                      \
  const double t0 = thread_cpu_seconds();                                          \
  for (long it = 0; it < iterations; ++it) {                                       \
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; ++i) {                        \
      acc[i] = FMA(acc[i], a, b);                                                  \
      asm volatile("" : "+v"(acc[i]));                                             \
    }                                                                              \
  }                                                                                \
  const double s = thread_cpu_seconds() - t0;                                      \
  V total = acc[0];                                                                \
  _Pragma("GCC unroll 16") for (int i = 1; i < 16; ++i) total = total + acc[i];    \
  asm volatile("" : : "v"(total));                                                 \
  return 16.0 * static_cast<double>(iterations) / s;

__attribute__((target("avx512f"))) inline double fma512_per_second(long iterations) {
  DPT_FMA_LOOP(__m512, _mm512_set1_ps, _mm512_fmadd_ps)
}
__attribute__((target("avx2,fma"))) inline double fma256_per_second(long iterations) {
  DPT_FMA_LOOP(__m256, _mm256_set1_ps, _mm256_fmadd_ps)
}
#undef DPT_FMA_LOOP

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// About a second of measurement on one thread.
inline CpuPeak measure_cpu_peak() {
  __builtin_cpu_init();
  CpuPeak p;
  std::vector<double> clocks;
  for (int i = 0; i < 5; ++i) clocks.push_back(measure_clock_ghz());
  p.clock_ghz = median_of(clocks);
  p.clock_min_ghz = *std::min_element(clocks.begin(), clocks.end());
  p.clock_max_ghz = *std::max_element(clocks.begin(), clocks.end());
  std::vector<double> fmas;
  if (__builtin_cpu_supports("avx512f")) {
    p.isa = "AVX-512F", p.f32_lanes = 16;
    for (int i = 0; i < 5; ++i) fmas.push_back(fma512_per_second(20'000'000));
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    p.isa = "AVX2+FMA", p.f32_lanes = 8;
    for (int i = 0; i < 5; ++i) fmas.push_back(fma256_per_second(20'000'000));
  } else {
    p.isa = "SSE (no FMA measured)", p.f32_lanes = 4;
    p.fma_per_cycle = 1, p.fma_units = 1;
    return p;
  }
  const double fma_s = *std::max_element(fmas.begin(), fmas.end());  // the least disturbed run
  p.fma_per_cycle = fma_s / (p.clock_ghz * 1e9);
  p.fma_units = std::max(1, static_cast<int>(p.fma_per_cycle + 0.5));
  p.measured_fma_gflop_s = fma_s * p.f32_lanes * 2 / 1e9;
  return p;
}

}  // namespace dpt::bench
