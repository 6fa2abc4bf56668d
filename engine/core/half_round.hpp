// Rounding to bf16 and f16 (round to nearest, ties to even; overflow to inf,
// gradual underflow), for values kept in wider containers. One definition for
// the host and for CUDA device code, so autocast's emulation on the host and the
// CUDA backend's casts round alike, and the DDP compress hooks use it too.
#pragma once
#include <math.h>

#include <stdexcept>
#include <string>

#include "engine/core/dtype.hpp"

#if defined(__CUDACC__)
#define DPT_HALF_HD __host__ __device__
#else
#define DPT_HALF_HD
#endif

namespace dpt {

// A binary format's significand digits (with the implicit bit), its smallest normal
// exponent and its largest finite value: f16 (IEEE binary16) and bf16.
struct LowFormat {
  int digits;
  int min_exponent;
  double max_finite;
};
constexpr LowFormat kF16Format{11, -14, 65504.0};
constexpr LowFormat kBf16Format{8, -126, 3.3895313892515355e38};  // (2 - 2^-7) 2^127

// v rounded to the format; zero, inf and NaN unchanged.
DPT_HALF_HD inline double round_to_format(double v, LowFormat f) {
  if (v == 0 || !isfinite(v)) return v;
  int exponent = 0;
  frexp(v, &exponent);  // v = m 2^exponent, 0.5 <= |m| < 1: the leading bit is 2^(exponent-1)
  const int lead = exponent - 1 > f.min_exponent ? exponent - 1 : f.min_exponent;
  const int quantum = lead - (f.digits - 1);
  const double r = ldexp(nearbyint(ldexp(v, -quantum)), quantum);  // ties to even (default mode)
  if (fabs(r) > f.max_finite) return v > 0 ? HUGE_VAL : -HUGE_VAL;
  return r;
}

// The format of bf16 or f16; throws std::invalid_argument for any other dtype.
inline LowFormat low_format(DType t) {
  if (t == DType::f16) return kF16Format;
  if (t == DType::bf16) return kBf16Format;
  throw std::invalid_argument("round to " + std::string(dtype_name(t)) + ": not a half-precision dtype (bf16, f16)");
}

// Unit roundoff of bf16 (2^-8) and f16 (2^-11): the largest relative error of one rounding.
inline double unit_roundoff(DType t) { return ldexp(1.0, -low_format(t).digits); }

}  // namespace dpt
