// The one source of the element-wise and reduction kernels, written with Thrust.
// Compiled by g++ with Thrust's CPP system for the host (host_kernels.cpp) and by
// nvcc with the CUDA system for GPUs (cuda/cuda_kernels.cu). Only GEMM differs:
// host_gemm (oneDNN, OpenBLAS) on the host, cuBLAS on the GPU, injected as `Blas`.
//
// Every functor is a plain struct with DPT_HD operator(), so the same code runs on
// either side without extended lambdas.
#pragma once
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/reduce.h>
#include <thrust/transform_reduce.h>
#include <thrust/functional.h>
#include <thrust/logical.h>

#include "engine/core/half_round.hpp"
#include "engine/core/kernels.hpp"

#if defined(__CUDACC__)
#define DPT_HD __host__ __device__
#else
#define DPT_HD
#endif

namespace dpt::impl {

using i64 = std::int64_t;

template <typename T> struct Fill {
  T* x; T v;
  DPT_HD void operator()(i64 i) const { x[i] = v; }
};
template <typename T> struct Axpy {
  const T* x; T* y; T a;
  DPT_HD void operator()(i64 i) const { y[i] += a * x[i]; }
};
template <typename T> struct Scale {
  T* x; T a;
  DPT_HD void operator()(i64 i) const { x[i] *= a; }
};
// Kernels over the columns of a row-major matrix take B adjacent columns per work
// item: B = 1 on GPUs (one thread per column, coalesced), a block on the CPU so the
// sequential loop walks each row in order instead of striding down columns. A
// Policy sets B with `static constexpr i64 column_block`; without it B is 1. The
// arithmetic, and so the result, is the same for every B.
template <typename P, typename = void> struct ColumnBlock { static constexpr i64 value = 1; };
template <typename P> struct ColumnBlock<P, std::void_t<decltype(P::column_block)>> {
  static constexpr i64 value = P::column_block;
};
DPT_HD inline i64 column_blocks(i64 cols, i64 block) { return (cols + block - 1) / block; }

template <typename T, i64 B> struct AddRowBias {  // one item per (row, column block)
  const T* b; T* y; i64 cols, blocks;
  DPT_HD void operator()(i64 item) const {
    const i64 r = item / blocks, j0 = (item - r * blocks) * B, w = cols - j0 < B ? cols - j0 : B;
    T* yr = y + r * cols + j0;
    for (i64 j = 0; j < w; ++j) yr[j] += b[j0 + j];
  }
};
template <typename T, i64 B> struct SumRows {  // one item per column block; each column summed from row 0 up
  const T* x; T* out; i64 rows, cols; T beta;
  DPT_HD void operator()(i64 blk) const {
    const i64 j0 = blk * B, w = cols - j0 < B ? cols - j0 : B;
    T acc[B];
    for (i64 j = 0; j < w; ++j) acc[j] = T(0);
    for (i64 r = 0; r < rows; ++r) {
      const T* xr = x + r * cols + j0;
      for (i64 j = 0; j < w; ++j) acc[j] += xr[j];
    }
    for (i64 j = 0; j < w; ++j) out[j0 + j] = (beta == T(0) ? T(0) : beta * out[j0 + j]) + acc[j];
  }
};

// GELU with the exact erf form (PyTorch's default approximate='none').
template <typename T> DPT_HD inline T gelu_f(T x) { return T(0.5) * x * (T(1) + erf(x * T(0.70710678118654752440))); }
template <typename T> DPT_HD inline T gelu_df(T x) {
  const T cdf = T(0.5) * (T(1) + erf(x * T(0.70710678118654752440)));
  const T pdf = exp(T(-0.5) * x * x) * T(0.39894228040143267794);
  return cdf + x * pdf;
}
// One functor per activation, so the ReLU loops are branch-free selects the compiler
// vectorises. NaN handling follows PyTorch: relu(NaN) = NaN (clamp_min), and the
// backward passes dy where the input is not <= 0 (threshold_backward).
template <typename T> struct ReluFwd {
  const T* x; T* y;
  DPT_HD void operator()(i64 i) const { y[i] = x[i] < T(0) ? T(0) : x[i]; }
};
template <typename T> struct ReluBwd {
  const T* x; const T* dy; T* dx;
  DPT_HD void operator()(i64 i) const {
    // Both operands loaded unconditionally: a select, not a branch (the sign of x is
    // random, and a conditional load of dy cost 9 ms per 1M elements in mispredictions).
    const T g = dy[i], v = x[i];
    dx[i] = v <= T(0) ? T(0) : g;
  }
};
template <typename T> struct GeluFwd {
  const T* x; T* y;
  DPT_HD void operator()(i64 i) const { y[i] = gelu_f(x[i]); }
};
template <typename T> struct GeluBwd {
  const T* x; const T* dy; T* dx;
  DPT_HD void operator()(i64 i) const { dx[i] = dy[i] * gelu_df(x[i]); }
};

// LayerNorm over the last dim (biased variance, as PyTorch).
template <typename T> struct LnFwd {  // one thread per row
  const T* x; const T* g; const T* b; T* y; T* mean; T* rstd; i64 cols; T eps;
  DPT_HD void operator()(i64 r) const {
    const T* xr = x + r * cols;
    T m = 0;
    for (i64 j = 0; j < cols; ++j) m += xr[j];
    m /= T(cols);
    T v = 0;
    for (i64 j = 0; j < cols; ++j) { T d = xr[j] - m; v += d * d; }
    v /= T(cols);
    T rs = T(1) / sqrt(v + eps);
    mean[r] = m; rstd[r] = rs;
    for (i64 j = 0; j < cols; ++j) y[r * cols + j] = (xr[j] - m) * rs * g[j] + b[j];
  }
};
template <typename T> struct LnBwdDx {  // one thread per row
  const T* x; const T* g; const T* mean; const T* rstd; const T* dy; T* dx; i64 cols;
  DPT_HD void operator()(i64 r) const {
    const T* xr = x + r * cols; const T* dyr = dy + r * cols;
    T m = mean[r], rs = rstd[r];
    T s1 = 0, s2 = 0;  // sum(dxhat), sum(dxhat * xhat)
    for (i64 j = 0; j < cols; ++j) {
      T xh = (xr[j] - m) * rs, dxh = dyr[j] * g[j];
      s1 += dxh; s2 += dxh * xh;
    }
    for (i64 j = 0; j < cols; ++j) {
      T xh = (xr[j] - m) * rs, dxh = dyr[j] * g[j];
      dx[r * cols + j] = rs * (dxh - s1 / T(cols) - xh * s2 / T(cols));
    }
  }
};
template <typename T, i64 B> struct LnBwdParams {  // one item per column block (see ColumnBlock)
  const T* x; const T* mean; const T* rstd; const T* dy; T* dg; T* db; i64 rows, cols;
  DPT_HD void operator()(i64 blk) const {
    const i64 j0 = blk * B, w = cols - j0 < B ? cols - j0 : B;
    T ag[B], ab[B];
    for (i64 j = 0; j < w; ++j) ag[j] = ab[j] = T(0);
    for (i64 r = 0; r < rows; ++r) {
      const T m = mean[r], rs = rstd[r];
      const T* xr = x + r * cols + j0; const T* dyr = dy + r * cols + j0;
      for (i64 j = 0; j < w; ++j) {
        T xh = (xr[j] - m) * rs;
        ag[j] += dyr[j] * xh; ab[j] += dyr[j];
      }
    }
    for (i64 j = 0; j < w; ++j) { dg[j0 + j] += ag[j]; db[j0 + j] += ab[j]; }
  }
};

template <typename T> struct MseTerm {
  const T* p; const T* t; T* grad; T inv_div;
  DPT_HD T operator()(i64 i) const {
    T d = p[i] - t[i];
    if (grad) grad[i] = T(2) * d * inv_div;
    return d * d;
  }
};
template <typename T> struct CeRow {  // returns -log softmax(x_r)[y_r]; writes the row's grad; -1 on a bad label
  const T* x; const i64* y; T* grad; i64 classes; T inv_div;
  DPT_HD T operator()(i64 r) const {
    const T* xr = x + r * classes;
    i64 label = y[r];
    if (label < 0 || label >= classes) return T(-1);
    T mx = xr[0];
    for (i64 j = 1; j < classes; ++j) mx = xr[j] > mx ? xr[j] : mx;
    T s = 0;
    for (i64 j = 0; j < classes; ++j) s += exp(xr[j] - mx);
    T lse = mx + log(s);
    if (grad)
      for (i64 j = 0; j < classes; ++j)
        grad[r * classes + j] = (exp(xr[j] - lse) - (j == label ? T(1) : T(0))) * inv_div;
    return lse - xr[label];
  }
};
template <typename T> struct CeBadLabel {
  const i64* y; i64 classes;
  DPT_HD bool operator()(i64 r) const { return y[r] < 0 || y[r] >= classes; }
};

template <typename T> struct SgdStep {
  T* p; const T* g; T* buf; T lr, mom, damp, wd; int nesterov, first;
  DPT_HD void operator()(i64 i) const {
    T d = g[i];
    if (wd != T(0)) d += wd * p[i];
    if (mom != T(0)) {
      T b = first ? d : mom * buf[i] + (T(1) - damp) * d;
      buf[i] = b;
      d = nesterov ? d + mom * b : b;
    }
    p[i] -= lr * d;
  }
};
template <typename T> struct AdamWStep {
  T* p; const T* g; T* m; T* v; T lr, b1, b2, eps, wd, step_size, bc2_sqrt;
  DPT_HD void operator()(i64 i) const {
    p[i] *= T(1) - lr * wd;
    m[i] = m[i] * b1 + (T(1) - b1) * g[i];
    v[i] = v[i] * b2 + (T(1) - b2) * g[i] * g[i];
    T denom = sqrt(v[i]) / bc2_sqrt + eps;
    p[i] -= step_size * (m[i] / denom);
  }
};
// x rounded to a low format (bf16, f16), kept in f32: exact, since both formats'
// values are f32 values.
struct RoundToFormat {
  float* x; LowFormat f;
  DPT_HD void operator()(i64 i) const { x[i] = static_cast<float>(round_to_format(static_cast<double>(x[i]), f)); }
};
template <typename T> struct Identity {
  const T* x;
  DPT_HD T operator()(i64 i) const { return x[i]; }
};

// Kernels for one execution policy. `Policy` yields a Thrust execution policy,
// `Blas` provides gemm<T>(...), gemm_autocast(...) and copy(...).
template <typename Policy, typename Blas>
class ThrustKernels : public Kernels {
 public:
  ThrustKernels(Policy policy, Blas blas) : policy_(policy), blas_(blas) {}
  static constexpr i64 kColumnBlock = ColumnBlock<Policy>::value;

  template <typename F> void each(i64 n, F f) {
    if (n > 0) thrust::for_each(policy_(), thrust::counting_iterator<i64>(0), thrust::counting_iterator<i64>(n), f);
  }
  template <typename T, typename F> T reduce_sum(i64 n, F f) {
    if (n <= 0) return T(0);
    return thrust::transform_reduce(policy_(), thrust::counting_iterator<i64>(0), thrust::counting_iterator<i64>(n),
                                    f, T(0), thrust::plus<T>());
  }

#define DPT_DISPATCH_FLOAT(t, ...)                                                     \
  switch (t) {                                                                         \
    case DType::f32: { using T = float; __VA_ARGS__; break; }                          \
    case DType::f64: { using T = double; __VA_ARGS__; break; }                         \
    default: throw std::invalid_argument("kernel needs a floating dtype, got " +       \
                                         std::string(dtype_name(t)));                  \
  }

  void fill(DType t, Elements n, double v, void* x) override {
    switch (t) {
      case DType::i64: each(n, Fill<i64>{static_cast<i64*>(x), static_cast<i64>(v)}); return;
      case DType::i32: each(n, Fill<std::int32_t>{static_cast<std::int32_t*>(x), static_cast<std::int32_t>(v)}); return;
      default: break;
    }
    DPT_DISPATCH_FLOAT(t, each(n, Fill<T>{static_cast<T*>(x), static_cast<T>(v)}));
  }
  void copy(Bytes n, const void* src, void* dst) override { blas_.copy(n, src, dst); }
  void axpy(DType t, Elements n, double a, const void* x, void* y) override {
    DPT_DISPATCH_FLOAT(t, each(n, Axpy<T>{static_cast<const T*>(x), static_cast<T*>(y), static_cast<T>(a)}));
  }
  void scale(DType t, Elements n, double a, void* x) override {
    DPT_DISPATCH_FLOAT(t, each(n, Scale<T>{static_cast<T*>(x), static_cast<T>(a)}));
  }
  void gemm(DType t, bool ta, bool tb, i64 m, i64 n, i64 k, double alpha, const void* a, const void* b, double beta,
            void* c) override {
    DPT_DISPATCH_FLOAT(t, blas_.template gemm<T>(ta, tb, m, n, k, static_cast<T>(alpha), static_cast<const T*>(a),
                                                 static_cast<const T*>(b), static_cast<T>(beta), static_cast<T*>(c)));
  }
  void gemm_autocast(DType low, bool ta, bool tb, i64 m, i64 n, i64 k, double alpha, const float* a, const float* b,
                     double beta, float* c) override {
    blas_.gemm_autocast(low, ta, tb, m, n, k, static_cast<float>(alpha), a, b, static_cast<float>(beta), c);
  }
  void round_to(DType low, Elements n, float* x) override { each(n, RoundToFormat{x, low_format(low)}); }
  void add_row_bias(DType t, i64 rows, i64 cols, const void* bias, void* y) override {
    const i64 blocks = column_blocks(cols, kColumnBlock);
    DPT_DISPATCH_FLOAT(t, each(rows * blocks, AddRowBias<T, kColumnBlock>{static_cast<const T*>(bias),
                                                                          static_cast<T*>(y), cols, blocks}));
  }
  void sum_rows(DType t, i64 rows, i64 cols, const void* x, double beta, void* out) override {
    DPT_DISPATCH_FLOAT(t, each(column_blocks(cols, kColumnBlock),
                               SumRows<T, kColumnBlock>{static_cast<const T*>(x), static_cast<T*>(out), rows, cols,
                                                        static_cast<T>(beta)}));
  }
  void activation_forward(DType t, Activation a, Elements n, const void* x, void* y) override {
    DPT_DISPATCH_FLOAT(t, {
      if (a == Activation::relu) each(n, ReluFwd<T>{static_cast<const T*>(x), static_cast<T*>(y)});
      else each(n, GeluFwd<T>{static_cast<const T*>(x), static_cast<T*>(y)});
    });
  }
  void activation_backward(DType t, Activation a, Elements n, const void* x, const void* dy, void* dx) override {
    DPT_DISPATCH_FLOAT(t, {
      if (a == Activation::relu)
        each(n, ReluBwd<T>{static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx)});
      else
        each(n, GeluBwd<T>{static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx)});
    });
  }
  void layernorm_forward(DType t, i64 rows, i64 cols, double eps, const void* x, const void* g, const void* b, void* y,
                         void* mean, void* rstd) override {
    DPT_DISPATCH_FLOAT(t, each(rows, LnFwd<T>{static_cast<const T*>(x), static_cast<const T*>(g),
                                              static_cast<const T*>(b), static_cast<T*>(y), static_cast<T*>(mean),
                                              static_cast<T*>(rstd), cols, static_cast<T>(eps)}));
  }
  void layernorm_backward(DType t, i64 rows, i64 cols, const void* x, const void* g, const void* mean,
                          const void* rstd, const void* dy, void* dx, void* dg, void* db) override {
    DPT_DISPATCH_FLOAT(t, {
      each(rows, LnBwdDx<T>{static_cast<const T*>(x), static_cast<const T*>(g), static_cast<const T*>(mean),
                            static_cast<const T*>(rstd), static_cast<const T*>(dy), static_cast<T*>(dx), cols});
      each(column_blocks(cols, kColumnBlock),
           LnBwdParams<T, kColumnBlock>{static_cast<const T*>(x), static_cast<const T*>(mean),
                                        static_cast<const T*>(rstd), static_cast<const T*>(dy), static_cast<T*>(dg),
                                        static_cast<T*>(db), rows, cols});
    });
  }
  double mse(DType t, Elements n, const void* pred, const void* target, double divisor, void* grad) override {
    double out = 0;
    DPT_DISPATCH_FLOAT(t, out = static_cast<double>(reduce_sum<T>(
                              n, MseTerm<T>{static_cast<const T*>(pred), static_cast<const T*>(target),
                                            static_cast<T*>(grad), static_cast<T>(1.0 / divisor)})) / divisor);
    return out;
  }
  double cross_entropy(DType t, i64 rows, i64 classes, const void* logits, const i64* labels, double divisor,
                       void* grad) override {
    if (rows > 0 && thrust::any_of(policy_(), thrust::counting_iterator<i64>(0), thrust::counting_iterator<i64>(rows),
                                   CeBadLabel<float>{labels, classes}))
      throw std::invalid_argument("cross_entropy: a label is outside [0, " + std::to_string(classes) + ")");
    double out = 0;
    DPT_DISPATCH_FLOAT(t, out = static_cast<double>(reduce_sum<T>(
                              rows, CeRow<T>{static_cast<const T*>(logits), labels, static_cast<T*>(grad), classes,
                                             static_cast<T>(1.0 / divisor)})) / divisor);
    return out;
  }
  void sgd_step(DType t, Elements n, const SgdOptions& o, bool first, void* p, const void* g, void* buf) override {
    DPT_DISPATCH_FLOAT(t, each(n, SgdStep<T>{static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(buf),
                                             static_cast<T>(o.lr), static_cast<T>(o.momentum),
                                             static_cast<T>(o.dampening), static_cast<T>(o.weight_decay), o.nesterov,
                                             first}));
  }
  void adamw_step(DType t, Elements n, const AdamWOptions& o, i64 step, void* p, const void* g, void* m,
                  void* v) override {
    const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
    DPT_DISPATCH_FLOAT(t, each(n, AdamWStep<T>{static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(m),
                                               static_cast<T*>(v), static_cast<T>(o.lr), static_cast<T>(o.beta1),
                                               static_cast<T>(o.beta2), static_cast<T>(o.eps),
                                               static_cast<T>(o.weight_decay), static_cast<T>(o.lr / bc1),
                                               static_cast<T>(std::sqrt(bc2))}));
  }
  double sum(DType t, Elements n, const void* x) override {
    double out = 0;
    DPT_DISPATCH_FLOAT(t, out = static_cast<double>(reduce_sum<T>(n, Identity<T>{static_cast<const T*>(x)})));
    return out;
  }
#undef DPT_DISPATCH_FLOAT

 private:
  Policy policy_;
  Blas blas_;
};

}  // namespace dpt::impl
