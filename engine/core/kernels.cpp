// Tensor-level kernel calls: shape checks, the cost of each op, and submission
// through the tensor's device.
#include "engine/core/kernels.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dpt {
namespace {

void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw std::invalid_argument(fmt::format("{}: {}", op, what));
}
void require_same_device(const char* op, const Tensor& a, const Tensor& b) {
  require(&a.device() == &b.device(), op,
          fmt::format("tensors on different devices ({} and {})", a.device().name(), b.device().name()));
}
void require_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  require(a.dtype() == b.dtype(), op,
          fmt::format("dtypes differ ({} and {})", dtype_name(a.dtype()), dtype_name(b.dtype())));
}
Bytes elt(const Tensor& t) { return dtype_size_bytes(t.dtype()); }

}  // namespace

void kernel_fill(Tensor& x, double value) {
  Device& d = x.device();
  d.submit({"fill", OpKind::memory, 0, 0, x.size_bytes()},
           [&] { d.kernels().fill(x.dtype(), x.numel(), value, x.data()); });
}

void kernel_copy(const Tensor& src, Tensor& dst) {
  require_same_device("copy", src, dst);
  require_same_dtype("copy", src, dst);
  require(src.numel() == dst.numel(), "copy",
          fmt::format("element counts differ ({} and {})", src.numel(), dst.numel()));
  Device& d = dst.device();
  d.submit({"copy", OpKind::memory, 0, src.size_bytes(), dst.size_bytes()},
           [&] { d.kernels().copy(src.size_bytes(), src.data(), dst.data()); });
}

void kernel_axpy(double alpha, const Tensor& x, Tensor& y) {
  require_same_device("axpy", x, y);
  require_same_dtype("axpy", x, y);
  require(x.numel() == y.numel(), "axpy", fmt::format("element counts differ ({} and {})", x.numel(), y.numel()));
  Device& d = y.device();
  d.submit({"axpy", OpKind::memory, 2.0 * static_cast<double>(x.numel()), 2 * x.size_bytes(), y.size_bytes()},
           [&] { d.kernels().axpy(y.dtype(), y.numel(), alpha, x.data(), y.data()); });
}

void kernel_scale(Tensor& x, double alpha) {
  Device& d = x.device();
  d.submit({"scale", OpKind::memory, static_cast<double>(x.numel()), x.size_bytes(), x.size_bytes()},
           [&] { d.kernels().scale(x.dtype(), x.numel(), alpha, x.data()); });
}

void kernel_linear_forward(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
  require(x.ndim() == 2 && w.ndim() == 2 && y.ndim() == 2, "linear_forward", "x, W and y must be 2-d");
  const auto m = x.dim(0), k = x.dim(1), n = w.dim(0);
  require(w.dim(1) == k && y.dim(0) == m && y.dim(1) == n, "linear_forward",
          fmt::format("shapes x{} W{} y{} do not match", shape_to_string(x.shape()), shape_to_string(w.shape()),
                      shape_to_string(y.shape())));
  Device& d = y.device();
  d.submit({"gemm_fwd", OpKind::compute, 2.0 * m * n * k, (m * k + n * k) * elt(x), m * n * elt(y)},
           [&] { d.kernels().gemm(x.dtype(), false, true, m, n, k, 1.0, x.data(), w.data(), 0.0, y.data()); });
  if (b) {
    require(b->numel() == n, "linear_forward", "bias length differs from out_features");
    d.submit({"bias_add", OpKind::memory, static_cast<double>(m * n), (m * n + n) * elt(y), m * n * elt(y)},
             [&] { d.kernels().add_row_bias(y.dtype(), m, n, b->data(), y.data()); });
  }
}

void kernel_linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor* dx, Tensor& dw,
                            Tensor* db) {
  const auto m = x.dim(0), k = x.dim(1), n = w.dim(0);
  require(dy.ndim() == 2 && dy.dim(0) == m && dy.dim(1) == n, "linear_backward",
          fmt::format("dy{} does not match x{} W{}", shape_to_string(dy.shape()), shape_to_string(x.shape()),
                      shape_to_string(w.shape())));
  Device& d = dw.device();
  // dW[n,k] += dy^T[n,m] x[m,k]
  d.submit({"gemm_dw", OpKind::compute, 2.0 * m * n * k, (m * n + m * k + n * k) * elt(x), n * k * elt(x)},
           [&] { d.kernels().gemm(x.dtype(), true, false, n, k, m, 1.0, dy.data(), x.data(), 1.0, dw.data()); });
  if (db)
    d.submit({"bias_grad", OpKind::memory, static_cast<double>(m * n), (m * n + n) * elt(dy), n * elt(dy)},
             [&] { d.kernels().sum_rows(dy.dtype(), m, n, dy.data(), 1.0, db->data()); });
  if (dx)  // dx[m,k] = dy[m,n] W[n,k]
    d.submit({"gemm_dx", OpKind::compute, 2.0 * m * n * k, (m * n + n * k) * elt(x), m * k * elt(x)},
             [&] { d.kernels().gemm(x.dtype(), false, false, m, k, n, 1.0, dy.data(), w.data(), 0.0, dx->data()); });
}

void kernel_activation_forward(Activation a, const Tensor& x, Tensor& y) {
  require(x.numel() == y.numel(), "activation_forward", "element counts differ");
  Device& d = y.device();
  const double flops_per = a == Activation::relu ? 1.0 : 12.0;
  d.submit({a == Activation::relu ? "relu_fwd" : "gelu_fwd", OpKind::memory, flops_per * x.numel(), x.size_bytes(),
            y.size_bytes()},
           [&] { d.kernels().activation_forward(x.dtype(), a, x.numel(), x.data(), y.data()); });
}

void kernel_activation_backward(Activation a, const Tensor& x, const Tensor& dy, Tensor& dx) {
  require(x.numel() == dy.numel() && x.numel() == dx.numel(), "activation_backward", "element counts differ");
  Device& d = dx.device();
  const double flops_per = a == Activation::relu ? 1.0 : 20.0;
  d.submit({a == Activation::relu ? "relu_bwd" : "gelu_bwd", OpKind::memory, flops_per * x.numel(),
            2 * x.size_bytes(), dx.size_bytes()},
           [&] { d.kernels().activation_backward(x.dtype(), a, x.numel(), x.data(), dy.data(), dx.data()); });
}

void kernel_layernorm_forward(double eps, const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                              Tensor& mean, Tensor& rstd) {
  const auto rows = x.dim(0), cols = x.dim(1);
  require(gamma.numel() == cols && beta.numel() == cols && mean.numel() == rows && rstd.numel() == rows,
          "layernorm_forward", "parameter or statistics shapes do not match the input");
  Device& d = y.device();
  d.submit({"layernorm_fwd", OpKind::memory, 8.0 * rows * cols, x.size_bytes() + 2 * cols * elt(x), y.size_bytes()},
           [&] {
             d.kernels().layernorm_forward(x.dtype(), rows, cols, eps, x.data(), gamma.data(), beta.data(), y.data(),
                                           mean.data(), rstd.data());
           });
}

void kernel_layernorm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                               const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const auto rows = x.dim(0), cols = x.dim(1);
  Device& d = dx.device();
  d.submit({"layernorm_bwd", OpKind::memory, 16.0 * rows * cols, 2 * x.size_bytes(), dx.size_bytes()}, [&] {
    d.kernels().layernorm_backward(x.dtype(), rows, cols, x.data(), gamma.data(), mean.data(), rstd.data(),
                                   dy.data(), dx.data(), dgamma.data(), dbeta.data());
  });
}

double kernel_mse(const Tensor& pred, const Tensor& target, double divisor, Tensor* grad) {
  require(pred.shape() == target.shape(), "mse",
          fmt::format("prediction {} and target {} shapes differ", shape_to_string(pred.shape()),
                      shape_to_string(target.shape())));
  require_same_dtype("mse", pred, target);
  Device& d = pred.device();
  double loss = 0;
  d.submit({"mse", OpKind::memory, 3.0 * pred.numel(), 2 * pred.size_bytes(), grad ? pred.size_bytes() : 0}, [&] {
    loss = d.kernels().mse(pred.dtype(), pred.numel(), pred.data(), target.data(), divisor,
                           grad ? grad->data() : nullptr);
  });
  return loss;
}

double kernel_cross_entropy(const Tensor& logits, const Tensor& labels, double divisor, Tensor* grad) {
  require(logits.ndim() == 2, "cross_entropy", "logits must be 2-d [batch, classes]");
  require(labels.dtype() == DType::i64, "cross_entropy",
          fmt::format("labels must be int64 class indices, got {}", dtype_name(labels.dtype())));
  require(labels.numel() == logits.dim(0), "cross_entropy",
          fmt::format("{} labels for {} rows of logits", labels.numel(), logits.dim(0)));
  Device& d = logits.device();
  double loss = 0;
  d.submit({"cross_entropy", OpKind::memory, 6.0 * logits.numel(), logits.size_bytes() + labels.size_bytes(),
            grad ? logits.size_bytes() : 0},
           [&] {
             loss = d.kernels().cross_entropy(logits.dtype(), logits.dim(0), logits.dim(1), logits.data(),
                                              labels.data_as<std::int64_t>(), divisor, grad ? grad->data() : nullptr);
           });
  return loss;
}

namespace {
OpCost optimizer_cost(const char* name, double flops_per_element, const Tensor& param, Bytes read, Bytes written,
                      const std::optional<OptimizerCharge>& charge) {
  OpCost c{name, OpKind::memory, flops_per_element * static_cast<double>(param.numel()), read, written};
  if (charge) {
    const double tensor = static_cast<double>(param.size_bytes());
    c.bytes_read = static_cast<Bytes>(charge->tensors_read * tensor);
    c.bytes_written = static_cast<Bytes>(charge->tensors_written * tensor);
    c.launches = charge->launches;
  }
  return c;
}
}  // namespace

void kernel_sgd_step(const SgdOptions& o, bool first_step, Tensor& param, const Tensor& grad,
                     Tensor* momentum_buffer, const std::optional<OptimizerCharge>& charge) {
  require(param.numel() == grad.numel(), "sgd_step", "parameter and gradient sizes differ");
  Device& d = param.device();
  // Reads the parameter and its gradient and writes the parameter; with momentum it also
  // reads and writes the momentum buffer (torch.optim.SGD's update, one pass per tensor).
  const Bytes buffer_bytes = momentum_buffer ? param.size_bytes() : 0;
  d.submit(optimizer_cost("sgd_step", 5.0, param, 2 * param.size_bytes() + buffer_bytes,
                          param.size_bytes() + buffer_bytes, charge),
           [&] {
    d.kernels().sgd_step(param.dtype(), param.numel(), o, first_step, param.data(), grad.data(),
                         momentum_buffer ? momentum_buffer->data() : nullptr);
  });
}

void kernel_adamw_step(const AdamWOptions& o, std::int64_t step, Tensor& param, const Tensor& grad,
                       Tensor& exp_avg, Tensor& exp_avg_sq, const std::optional<OptimizerCharge>& charge) {
  require(param.numel() == grad.numel(), "adamw_step", "parameter and gradient sizes differ");
  Device& d = param.device();
  d.submit(optimizer_cost("adamw_step", 14.0, param, 4 * param.size_bytes(), 3 * param.size_bytes(), charge),
           [&] {
             d.kernels().adamw_step(param.dtype(), param.numel(), o, step, param.data(), grad.data(), exp_avg.data(),
                                    exp_avg_sq.data());
           });
}

double kernel_sum(const Tensor& x) {
  Device& d = x.device();
  double s = 0;
  d.submit({"sum", OpKind::memory, static_cast<double>(x.numel()), x.size_bytes(), 0},
           [&] { s = d.kernels().sum(x.dtype(), x.numel(), x.data()); });
  return s;
}

void kernel_charge(Device& device, const OpCost& cost) {
  device.submit(cost, [] {});
}

}  // namespace dpt
