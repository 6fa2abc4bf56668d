// Checkpoints of tensors the CPU cannot read (ctest label `gpu`): saving copies
// CUDA tensors to host memory through Backend::copy, loading fills CUDA
// parameters the same way, and without a backend both are refused naming the
// tensor. Skipped, with the CUDA runtime's reason, where no GPU is present.
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/io/checkpoint.hpp"
#include "engine/cuda/cuda_backend.hpp"
#include "engine/cuda/cuda_check.hpp"

namespace fs = std::filesystem;
using namespace dpt;

namespace {

std::string test_path(const std::string& name) {
  fs::path d = fs::path(DPT_BINARY_DIR) / "test-tmp" / "checkpoint_cuda";
  fs::create_directories(d);
  return (d / name).string();
}

// A host tensor of distinct values, and its copy on `device`.
std::pair<Tensor, Tensor> host_and_device(CudaBackend& backend, Device& device, const Shape& shape, DType dtype,
                                          double start) {
  Tensor h = Tensor::empty(backend.host_memory(), shape, dtype, MemoryCategory::parameters);
  std::vector<double> v(static_cast<size_t>(h.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + 1.0 / static_cast<double>(i + 3);
  tensor_fill_from_f64(h, v);
  return {h, copy_to(backend, h, device, MemoryCategory::parameters)};
}

}  // namespace

TEST(CheckpointCuda, SaveAndLoadThroughBackendCopy) {
  std::string why;
  if (cuda_device_count(&why) < 1) GTEST_SKIP() << "needs a CUDA device: " << why;
  CudaBackend backend;
  Device& gpu = backend.device(0);
  auto [w_host, w_gpu] = host_and_device(backend, gpu, {5, 3}, DType::f32, 0.5);
  auto [b_host, b_gpu] = host_and_device(backend, gpu, {5}, DType::f64, -2.0);

  const std::string path = test_path("gpu.safetensors");
  // Without the backend, a CUDA tensor cannot be read: refused naming it.
  try {
    write_safetensors_atomic(path, {{"0.weight", w_gpu}});
    FAIL() << "a CUDA tensor was saved without a backend";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'0.weight'"), std::string::npos) << e.what();
  }
  write_safetensors_atomic(path, {{"0.weight", w_gpu}, {"0.bias", b_gpu}}, &backend);
  auto f = read_safetensors(path);
  // Invariant: the file holds exactly the bytes of the host originals.
  EXPECT_EQ(std::memcmp(f.at("0.weight").data.data(), w_host.data(), 15 * 4), 0);
  EXPECT_EQ(std::memcmp(f.at("0.bias").data.data(), b_host.data(), 5 * 8), 0);

  // Loading into parameters on the GPU goes through the backend as well.
  Parameter w{"weight", Tensor::zeros(gpu, {5, 3}, DType::f32, MemoryCategory::parameters), Tensor()};
  Parameter b{"bias", Tensor::zeros(gpu, {5}, DType::f64, MemoryCategory::parameters), Tensor()};
  std::vector<NamedParameter> params{{"0.weight", &w}, {"0.bias", &b}};
  EXPECT_THROW(load_state_dict(params, f), std::invalid_argument);  // no backend
  load_state_dict(params, f, {}, &backend);
  Tensor w_back = copy_to(backend, w.value, backend.host_memory(), MemoryCategory::workspace);
  Tensor b_back = copy_to(backend, b.value, backend.host_memory(), MemoryCategory::workspace);
  EXPECT_EQ(std::memcmp(w_back.data(), w_host.data(), 15 * 4), 0);
  EXPECT_EQ(std::memcmp(b_back.data(), b_host.data(), 5 * 8), 0);

  Tensor t = tensor_from_safetensors(f.at("0.bias"), gpu, MemoryCategory::parameters, &backend);
  Tensor t_back = copy_to(backend, t, backend.host_memory(), MemoryCategory::workspace);
  EXPECT_EQ(std::memcmp(t_back.data(), b_host.data(), 5 * 8), 0);
}
