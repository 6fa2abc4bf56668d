// Tensor: a shape, a dtype and a view into owning storage on one device.
// Row-major and contiguous; a dim-0 slice shares its parent's storage.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/core/dtype.hpp"

namespace dpt {

using Shape = std::vector<std::int64_t>;
std::string shape_to_string(const Shape& s);
Elements shape_numel(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  // Allocates a tensor of the given shape on `device` (contents uninitialised).
  static Tensor empty(Device& device, const Shape& shape, DType dtype,
                      MemoryCategory category = MemoryCategory::workspace);
  // As empty(), then filled with zeros through the device's kernels.
  static Tensor zeros(Device& device, const Shape& shape, DType dtype,
                      MemoryCategory category = MemoryCategory::workspace);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  std::int64_t dim(int i) const { return shape_.at(static_cast<size_t>(i)); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  DType dtype() const { return dtype_; }
  Elements numel() const { return shape_numel(shape_); }
  Bytes size_bytes() const { return numel() * dtype_size_bytes(dtype_); }
  Device& device() const { return storage_->device(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // Where this tensor starts in its storage (a row slice's offset).
  Bytes offset_bytes() const { return offset_bytes_; }

  // Raw pointer to the first element (device memory for CUDA; null in shape-only mode).
  void* data() const;
  template <typename T> T* data_as() const { return static_cast<T*>(data()); }

  // Rows [begin, begin + count) along dim 0, sharing storage.
  Tensor slice_rows(std::int64_t begin, std::int64_t count) const;
  // Same storage, new shape with the same element count.
  Tensor reshape(const Shape& shape) const;

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::f32;
  Bytes offset_bytes_ = 0;
};

// Host-memory helpers (the tensor must be readable from the CPU: host, host-worker
// or sim-numeric devices; for CUDA use Backend::copy to a host tensor first).
std::vector<double> tensor_to_f64_vector(const Tensor& t);
void tensor_fill_from_f64(Tensor& t, const std::vector<double>& values);

}  // namespace dpt
