// Host kernels whose loop structure depends on the backend (column blocks of 64 on
// the CPU): results against plain reference loops written here, on widths that
// span several blocks and end in a partial one; ReLU's NaN handling as PyTorch's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/host/host_backend.hpp"
#include "engine/nn/init.hpp"
#include "engine/core/kernels.hpp"

namespace dpt {
namespace {

Tensor random_tensor(Device& d, const Shape& s, Generator& gen) {
  Tensor t = Tensor::empty(d, s, DType::f64);
  init_uniform(t, 2.0, gen);
  return t;
}

TEST(HostKernels, BiasAddAndBiasGradientMatchReferenceLoopsAcrossColumnBlocks) {
  HostDevice d(0, DeviceKind::host_worker);
  Generator gen(11);
  for (std::int64_t cols : {1, 63, 64, 65, 150, 257}) {
    const std::int64_t rows = 7;
    Tensor x = random_tensor(d, {rows, cols}, gen), w = random_tensor(d, {cols, cols}, gen);
    Tensor b = random_tensor(d, {cols}, gen), y = Tensor::empty(d, {rows, cols}, DType::f64);
    kernel_linear_forward(x, w, &b, y);
    const auto xv = tensor_to_f64_vector(x), wv = tensor_to_f64_vector(w), bv = tensor_to_f64_vector(b),
               yv = tensor_to_f64_vector(y);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < cols; ++j) {
        double ref = 0;
        for (std::int64_t k = 0; k < cols; ++k) ref += xv[r * cols + k] * wv[j * cols + k];
        ref += bv[j];
        EXPECT_NEAR(yv[r * cols + j], ref, 1e-12 * (1 + std::abs(ref))) << "cols " << cols;
      }
    // db += sum over rows of dy, accumulated onto what db held (here 0.5 everywhere).
    Tensor dy = random_tensor(d, {rows, cols}, gen), dw = Tensor::zeros(d, {cols, cols}, DType::f64);
    Tensor db = Tensor::empty(d, {cols}, DType::f64);
    kernel_fill(db, 0.5);
    kernel_linear_backward(x, w, dy, nullptr, dw, &db);
    const auto dyv = tensor_to_f64_vector(dy), dbv = tensor_to_f64_vector(db);
    for (std::int64_t j = 0; j < cols; ++j) {
      double acc = 0;
      for (std::int64_t r = 0; r < rows; ++r) acc += dyv[r * cols + j];
      EXPECT_EQ(dbv[j], 0.5 + acc) << "cols " << cols << " column " << j;  // same summation order: exact
    }
  }
}

TEST(HostKernels, LayerNormParameterGradientsMatchReferenceLoopsAcrossColumnBlocks) {
  HostDevice d(0, DeviceKind::host_worker);
  Generator gen(12);
  for (std::int64_t cols : {2, 64, 100, 129}) {
    const std::int64_t rows = 5;
    Tensor x = random_tensor(d, {rows, cols}, gen), g = random_tensor(d, {cols}, gen),
           beta = random_tensor(d, {cols}, gen), dy = random_tensor(d, {rows, cols}, gen);
    Tensor y = Tensor::empty(d, {rows, cols}, DType::f64), mean = Tensor::empty(d, {rows}, DType::f64),
           rstd = Tensor::empty(d, {rows}, DType::f64), dx = Tensor::empty(d, {rows, cols}, DType::f64);
    Tensor dg = Tensor::zeros(d, {cols}, DType::f64), db = Tensor::zeros(d, {cols}, DType::f64);
    kernel_layernorm_forward(1e-5, x, g, beta, y, mean, rstd);
    kernel_layernorm_backward(x, g, mean, rstd, dy, dx, dg, db);
    const auto xv = tensor_to_f64_vector(x), dyv = tensor_to_f64_vector(dy), dgv = tensor_to_f64_vector(dg),
               dbv = tensor_to_f64_vector(db);
    std::vector<double> ref_g(static_cast<size_t>(cols)), ref_b(static_cast<size_t>(cols));
    for (std::int64_t r = 0; r < rows; ++r) {
      double m = 0, v = 0;
      for (std::int64_t j = 0; j < cols; ++j) m += xv[r * cols + j] / static_cast<double>(cols);
      for (std::int64_t j = 0; j < cols; ++j) v += std::pow(xv[r * cols + j] - m, 2) / static_cast<double>(cols);
      for (std::int64_t j = 0; j < cols; ++j) {
        ref_g[j] += dyv[r * cols + j] * (xv[r * cols + j] - m) / std::sqrt(v + 1e-5);
        ref_b[j] += dyv[r * cols + j];
      }
    }
    for (std::int64_t j = 0; j < cols; ++j) {
      EXPECT_NEAR(dgv[j], ref_g[j], 1e-12 * (1 + std::abs(ref_g[j]))) << "cols " << cols;
      EXPECT_NEAR(dbv[j], ref_b[j], 1e-12 * (1 + std::abs(ref_b[j]))) << "cols " << cols;
    }
  }
}

TEST(HostKernels, ReluPropagatesNanAsPyTorchDoes) {
  HostDevice d(0, DeviceKind::host_worker);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = Tensor::empty(d, {4}, DType::f64), y = Tensor::empty(d, {4}, DType::f64);
  Tensor dy = Tensor::empty(d, {4}, DType::f64), dx = Tensor::empty(d, {4}, DType::f64);
  tensor_fill_from_f64(x, {-1.0, 0.0, 2.0, nan});
  tensor_fill_from_f64(dy, {10.0, 20.0, 30.0, 40.0});
  kernel_activation_forward(Activation::relu, x, y);
  kernel_activation_backward(Activation::relu, x, dy, dx);
  const auto yv = tensor_to_f64_vector(y), dxv = tensor_to_f64_vector(dx);
  // torch.relu: clamp_min(x, 0); threshold_backward: dy where not (x <= 0).
  EXPECT_EQ(yv[0], 0.0);
  EXPECT_EQ(yv[1], 0.0);
  EXPECT_EQ(yv[2], 2.0);
  EXPECT_TRUE(std::isnan(yv[3]));
  EXPECT_EQ(dxv, (std::vector<double>{0.0, 0.0, 30.0, 40.0}));
}

}  // namespace
}  // namespace dpt
