#include "engine/core/tensor.hpp"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/kernels.hpp"

namespace dpt {

std::string shape_to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Elements shape_numel(const Shape& s) {
  Elements n = 1;
  for (auto d : s) {
    if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_to_string(s));
    n *= d;
  }
  return n;
}

Tensor Tensor::empty(Device& device, const Shape& shape, DType dtype, MemoryCategory category) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = device.allocate(shape_numel(shape) * dtype_size_bytes(dtype), category);
  return t;
}

Tensor Tensor::zeros(Device& device, const Shape& shape, DType dtype, MemoryCategory category) {
  Tensor t = empty(device, shape, dtype, category);
  kernel_fill(t, 0.0);
  return t;
}

void* Tensor::data() const {
  if (!storage_ || !storage_->data()) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

Tensor Tensor::slice_rows(std::int64_t begin, std::int64_t count) const {
  if (shape_.empty()) throw std::invalid_argument("slice_rows on a 0-d tensor");
  if (begin < 0 || count < 0 || begin + count > shape_[0])
    throw std::out_of_range(fmt::format("slice_rows({}, {}) out of range for shape {}", begin, count,
                                        shape_to_string(shape_)));
  Tensor t = *this;
  Elements row = shape_numel(shape_) / (shape_[0] == 0 ? 1 : shape_[0]);
  if (shape_[0] == 0) row = 0;
  t.shape_[0] = count;
  t.offset_bytes_ = offset_bytes_ + begin * row * dtype_size_bytes(dtype_);
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (shape_numel(shape) != numel())
    throw std::invalid_argument(fmt::format("reshape {} -> {}: element counts differ", shape_to_string(shape_),
                                            shape_to_string(shape)));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

template <typename T>
static void read_as_f64(const Tensor& t, std::vector<double>& out) {
  const T* p = t.data_as<T>();
  for (Elements i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = static_cast<double>(p[i]);
}

std::vector<double> tensor_to_f64_vector(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  if (t.numel() == 0) return out;
  if (!t.data()) throw std::logic_error("tensor_to_f64_vector: tensor has no data (shape-only)");
  t.device().synchronize();
  switch (t.dtype()) {
    case DType::f32: read_as_f64<float>(t, out); break;
    case DType::f64: read_as_f64<double>(t, out); break;
    case DType::i64: read_as_f64<std::int64_t>(t, out); break;
    case DType::i32: read_as_f64<std::int32_t>(t, out); break;
    case DType::bf16:
    case DType::f16:
      throw std::invalid_argument("tensor_to_f64_vector: bf16/f16 tensors are storage-only (no host values)");
  }
  return out;
}

template <typename T>
static void write_from_f64(Tensor& t, const std::vector<double>& v) {
  T* p = t.data_as<T>();
  for (Elements i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(v[static_cast<size_t>(i)]);
}

void tensor_fill_from_f64(Tensor& t, const std::vector<double>& values) {
  if (static_cast<Elements>(values.size()) != t.numel())
    throw std::invalid_argument(fmt::format("tensor_fill_from_f64: {} values for shape {}", values.size(),
                                            shape_to_string(t.shape())));
  if (t.numel() == 0) return;
  t.device().synchronize();
  switch (t.dtype()) {
    case DType::f32: write_from_f64<float>(t, values); break;
    case DType::f64: write_from_f64<double>(t, values); break;
    case DType::i64: write_from_f64<std::int64_t>(t, values); break;
    case DType::i32: write_from_f64<std::int32_t>(t, values); break;
    case DType::bf16:
    case DType::f16:
      throw std::invalid_argument("tensor_fill_from_f64: bf16/f16 tensors are storage-only (no host values)");
  }
}

}  // namespace dpt
