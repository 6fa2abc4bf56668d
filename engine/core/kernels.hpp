// Kernels: the numeric primitives every layer, loss and optimizer is built from.
//
// Two levels:
//  * class Kernels: raw primitives on one device's memory (type-erased pointers plus
//    a DType). The host backend implements them with Thrust's CPP system and
//    host GEMM (oneDNN, OpenBLAS); the CUDA backend with the same Thrust sources and cuBLAS
//    (kernels_impl.hpp is that one source).
//  * kernel_* functions: tensor-level calls that check shapes, state each op's cost
//    and submit it through Device::submit, so the twin charges exactly this work.
//    Layers, losses and optimizers call only these.
#pragma once
#include <optional>
#include <cstdint>

#include "engine/core/dtype.hpp"
#include "engine/core/tensor.hpp"

namespace dpt {

enum class Activation { relu, gelu };
enum class Reduction { mean, sum };

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // PyTorch's AdamW default
};

class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual void fill(DType t, Elements n, double value, void* x) = 0;
  virtual void copy(Bytes n, const void* src, void* dst) = 0;  // within this device
  virtual void axpy(DType t, Elements n, double alpha, const void* x, void* y) = 0;  // y += alpha x
  virtual void scale(DType t, Elements n, double alpha, void* x) = 0;              // x *= alpha
  // Row-major C[M,N] = alpha op(A) op(B) + beta C, op(A) is [M,K], op(B) is [K,N].
  virtual void gemm(DType t, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    double alpha, const void* a, const void* b, double beta, void* c) = 0;
  // Autocast's GEMM on f32 memory, as cublasGemmEx with bf16/f16 inputs and
  // CUBLAS_COMPUTE_32F runs it: op(A) and op(B) rounded to `low` (bf16 or f16), the
  // products summed in f32, C = alpha op(A) op(B) + beta C in f32.
  virtual void gemm_autocast(DType low, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                             double alpha, const float* a, const float* b, double beta, float* c) = 0;
  // Rounds n f32 values in place to the nearest bf16 or f16 value (`low`), ties to even.
  virtual void round_to(DType low, Elements n, float* x) = 0;
  virtual void add_row_bias(DType t, std::int64_t rows, std::int64_t cols, const void* bias, void* y) = 0;
  // out[j] = beta * out[j] + sum_i x[i, j]
  virtual void sum_rows(DType t, std::int64_t rows, std::int64_t cols, const void* x, double beta, void* out) = 0;
  virtual void activation_forward(DType t, Activation a, Elements n, const void* x, void* y) = 0;
  virtual void activation_backward(DType t, Activation a, Elements n, const void* x, const void* dy, void* dx) = 0;
  virtual void layernorm_forward(DType t, std::int64_t rows, std::int64_t cols, double eps, const void* x,
                                 const void* gamma, const void* beta, void* y, void* mean, void* rstd) = 0;
  // dgamma and dbeta are accumulated (+=), dx is written.
  virtual void layernorm_backward(DType t, std::int64_t rows, std::int64_t cols, const void* x, const void* gamma,
                                  const void* mean, const void* rstd, const void* dy, void* dx, void* dgamma,
                                  void* dbeta) = 0;
  // Returns sum((pred - target)^2) / divisor; grad = 2 (pred - target) / divisor (if grad != null).
  virtual double mse(DType t, Elements n, const void* pred, const void* target, double divisor, void* grad) = 0;
  // Softmax cross-entropy with int64 class labels; returns sum_i -log softmax(x_i)[y_i] / divisor;
  // grad = (softmax - onehot) / divisor. Throws std::invalid_argument on a label outside [0, classes).
  virtual double cross_entropy(DType t, std::int64_t rows, std::int64_t classes, const void* logits,
                               const std::int64_t* labels, double divisor, void* grad) = 0;
  // One PyTorch SGD step for n elements; momentum_buffer may be null when momentum == 0.
  virtual void sgd_step(DType t, Elements n, const SgdOptions& o, bool first_step, void* param, const void* grad,
                        void* momentum_buffer) = 0;
  // One PyTorch AdamW step (step counts from 1).
  virtual void adamw_step(DType t, Elements n, const AdamWOptions& o, std::int64_t step, void* param,
                          const void* grad, void* exp_avg, void* exp_avg_sq) = 0;
  virtual double sum(DType t, Elements n, const void* x) = 0;
};

// The host implementation (Thrust CPP system + engine/host/host_gemm.hpp), shared by
// the host and sim backends. Each GEMM runs on its calling thread only.
Kernels& host_kernels();

// ---- tensor-level ops: shape checks, cost, submit -------------------------------
void kernel_fill(Tensor& x, double value);
void kernel_copy(const Tensor& src, Tensor& dst);           // same device, same numel and dtype
void kernel_axpy(double alpha, const Tensor& x, Tensor& y); // y += alpha x
void kernel_scale(Tensor& x, double alpha);
// y[M,N] = x[M,K] W[N,K]^T (+ b)   (nn.Linear forward)
void kernel_linear_forward(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y);
// dx = dy W ; dW += dy^T x ; db += sum_rows(dy)   (dx skipped when null)
void kernel_linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor* dx, Tensor& dw,
                            Tensor* db);
// The same under autocast (bf16-amp, f16-amp) on f32 tensors: x and W rounded to
// `low`, the GEMM summing in f32, the bias added in f32 and y rounded to `low`, as
// autocast's linear returns a bf16/f16 tensor.
void kernel_linear_forward_autocast(DType low, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y);
// Its backward: dy, x and W rounded to `low`; dx rounded to `low`; dW and db
// accumulated into the f32 gradients in f32 (PyTorch first rounds each backward's
// dW to `low`: one rounding less here, within the tolerance the tests state).
void kernel_linear_backward_autocast(DType low, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor* dx,
                                     Tensor& dw, Tensor* db);
void kernel_activation_forward(Activation a, const Tensor& x, Tensor& y);
void kernel_activation_backward(Activation a, const Tensor& x, const Tensor& dy, Tensor& dx);
void kernel_layernorm_forward(double eps, const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                              Tensor& mean, Tensor& rstd);
void kernel_layernorm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                               const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta);
double kernel_mse(const Tensor& pred, const Tensor& target, double divisor, Tensor* grad);
double kernel_cross_entropy(const Tensor& logits, const Tensor& labels, double divisor, Tensor* grad);
// What one parameter's update charges its device: tensors of the parameter's size read and
// written, and kernel launches (OpCost::launches). Unset: dptwin's own kernel, one launch
// (SGD reads the parameter and its gradient, with momentum its buffer too, and writes the
// parameter and buffer; AdamW reads 4 tensors and writes 3). An optimizer implementation of
// PyTorch's charges its own (engine/optim/optim.hpp, OptimizerImpl); the numerics are the same.
struct OptimizerCharge {
  double tensors_read = 0;
  double tensors_written = 0;
  int launches = 1;
};
void kernel_sgd_step(const SgdOptions& o, bool first_step, Tensor& param, const Tensor& grad,
                     Tensor* momentum_buffer, const std::optional<OptimizerCharge>& charge = std::nullopt);
void kernel_adamw_step(const AdamWOptions& o, std::int64_t step, Tensor& param, const Tensor& grad,
                       Tensor& exp_avg, Tensor& exp_avg_sq, const std::optional<OptimizerCharge>& charge = std::nullopt);
double kernel_sum(const Tensor& x);

// A generic cost-only op: charges `cost` on `device` and computes nothing. Used by
// the model library's cost-only layers, so they emit the same ops as numeric ones.
void kernel_charge(Device& device, const OpCost& cost);

}  // namespace dpt
