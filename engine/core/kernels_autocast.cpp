// Autocast's nn.Linear (bf16-amp, f16-amp) on f32 tensors: the casts to the low
// type, the GEMMs with f32 accumulation and the rounding of the outputs, each op
// with its cost. The casts of x and W are charged as autocast runs them (one read
// of the f32 tensor, one write of its low copy); the GEMMs read the low copies.
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "engine/core/kernels.hpp"
#include "engine/core/tensor.hpp"

namespace dpt {
namespace {

void require_autocast(const char* op, DType low, std::initializer_list<const Tensor*> tensors) {
  if (low != DType::bf16 && low != DType::f16)
    throw std::invalid_argument(fmt::format("{}: autocast runs in bf16 or f16, got {}", op, dtype_name(low)));
  for (const Tensor* t : tensors)
    if (t && t->dtype() != DType::f32)
      throw std::invalid_argument(fmt::format("{}: autocast takes f32 tensors (f32 master weights), got {}", op,
                                              dtype_name(t->dtype())));
}

// The cast of an f32 tensor to its low copy: read 4 bytes, write 2 per element.
void charge_cast(Device& d, const Tensor& t, DType low) {
  kernel_charge(d, {"autocast_cast", OpKind::memory, static_cast<double>(t.numel()), t.size_bytes(),
                    static_cast<Bytes>(t.numel()) * dtype_size_bytes(low)});
}

}  // namespace

void kernel_linear_forward_autocast(DType low, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
  require_autocast("linear_forward_autocast", low, {&x, &w, b, &y});
  if (x.ndim() != 2 || w.ndim() != 2 || y.ndim() != 2 || w.dim(1) != x.dim(1) || y.dim(0) != x.dim(0) ||
      y.dim(1) != w.dim(0) || (b && b->numel() != w.dim(0)))
    throw std::invalid_argument(fmt::format("linear_forward_autocast: shapes x{} W{} y{} do not match",
                                            shape_to_string(x.shape()), shape_to_string(w.shape()),
                                            shape_to_string(y.shape())));
  const auto m = x.dim(0), k = x.dim(1), n = w.dim(0);
  const Bytes lo = dtype_size_bytes(low);
  Device& d = y.device();
  charge_cast(d, x, low);
  charge_cast(d, w, low);
  d.submit({"gemm_fwd", OpKind::compute, 2.0 * m * n * k, (m * k + n * k) * lo, m * n * 4, OpClass::matmul}, [&] {
    d.kernels().gemm_autocast(low, false, true, m, n, k, 1.0, x.data_as<float>(), w.data_as<float>(), 0.0,
                              y.data_as<float>());
  });
  if (b) {
    // Autocast casts every floating argument of linear, the bias too: its low copy is added
    // to the f32 accumulation before the output is rounded (an outside-user review matched
    // PyTorch's loss only with the bias rounded). Planted fault: the f32 bias added as is.
    Tensor b_low = Tensor::empty(d, b->shape(), DType::f32);  // the low copy's values, held in f32
    d.submit({"autocast_cast", OpKind::memory, static_cast<double>(n), n * 4, n * lo}, [&] {
      d.kernels().copy(n * 4, b->data(), b_low.data());
      if (!fault_active(Fault::autocast_bias_unrounded)) d.kernels().round_to(low, n, b_low.data_as<float>());
    });
    d.submit({"bias_add", OpKind::memory, static_cast<double>(m * n), (m * n + n) * 4, m * n * 4},
             [&] { d.kernels().add_row_bias(DType::f32, m, n, b_low.data(), y.data()); });
  }
  if (fault_active(Fault::autocast_output_unrounded)) return;  // planted fault: y left in f32
  d.submit({"autocast_round", OpKind::memory, static_cast<double>(m * n), m * n * 4, m * n * 4},
           [&] { d.kernels().round_to(low, m * n, y.data_as<float>()); });
}

void kernel_linear_backward_autocast(DType low, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor* dx,
                                     Tensor& dw, Tensor* db) {
  require_autocast("linear_backward_autocast", low, {&x, &w, &dy, dx, &dw, db});
  const auto m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (dy.ndim() != 2 || dy.dim(0) != m || dy.dim(1) != n || dw.numel() != n * k || (db && db->numel() != n) ||
      (dx && dx->numel() != m * k))
    throw std::invalid_argument(fmt::format("linear_backward_autocast: dy{} does not match x{} W{}",
                                            shape_to_string(dy.shape()), shape_to_string(x.shape()),
                                            shape_to_string(w.shape())));
  const Bytes lo = dtype_size_bytes(low);
  Device& d = dw.device();
  charge_cast(d, dy, low);
  // dW[n,k] += dy^T[n,m] x[m,k], the low copies of x and W kept from forward.
  d.submit({"gemm_dw", OpKind::compute, 2.0 * m * n * k, (m * n + m * k) * lo + n * k * 4, n * k * 4,
            OpClass::matmul},
           [&] {
             d.kernels().gemm_autocast(low, true, false, n, k, m, 1.0, dy.data_as<float>(), x.data_as<float>(), 1.0,
                                       dw.data_as<float>());
           });
  if (db)
    d.submit({"bias_grad", OpKind::memory, static_cast<double>(m * n), (m * n + n) * 4, n * 4},
             [&] { d.kernels().sum_rows(DType::f32, m, n, dy.data(), 1.0, db->data()); });
  if (!dx) return;
  // dx[m,k] = dy[m,n] W[n,k], returned in the low type.
  d.submit({"gemm_dx", OpKind::compute, 2.0 * m * n * k, (m * n + n * k) * lo, m * k * 4, OpClass::matmul}, [&] {
    d.kernels().gemm_autocast(low, false, false, m, k, n, 1.0, dy.data_as<float>(), w.data_as<float>(), 0.0,
                              dx->data_as<float>());
  });
  d.submit({"autocast_round", OpKind::memory, static_cast<double>(m * k), m * k * 4, m * k * 4},
           [&] { d.kernels().round_to(low, m * k, dx->data_as<float>()); });
}

}  // namespace dpt
