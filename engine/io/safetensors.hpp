// safetensors files: the checkpoint and data exchange format (also PyTorch's).
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON header
// ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// optional "__metadata__": {str: str}}), then the raw little-endian tensor bytes,
// offsets relative to the start of that data buffer. The header is padded with
// spaces so the data buffer starts on an 8-byte boundary.
//
// Reads are validated as the reference implementation validates them, so a
// truncated or corrupt file is an std::invalid_argument naming the file (and the
// tensor where one is at fault), never a crash or an out-of-bounds read.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/backend.hpp"
#include "engine/io/atomic_file.hpp"
#include "engine/core/dtype.hpp"
#include "engine/core/tensor.hpp"

namespace dpt {

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  std::vector<std::byte> data;  // numel(shape) * dtype_size_bytes(dtype) bytes, little-endian
};

struct SafetensorsFile {
  std::string path;                             // where it was read from (for error messages)
  std::vector<SafetensorsTensor> tensors;       // in the order of their data in the file
  std::map<std::string, std::string> metadata;  // the "__metadata__" entry, if any
  // The tensor called `name`, or nullptr.
  const SafetensorsTensor* find(const std::string& name) const;
  // As find(), but throws std::invalid_argument naming the file and the tensor when absent.
  const SafetensorsTensor& at(const std::string& name) const;
};

// Header lengths above this are rejected as corrupt (the reference reader's limit).
constexpr Bytes kSafetensorsMaxHeaderBytes = 100 * 1000 * 1000;

// Reads and validates a whole file. Throws std::invalid_argument naming the file
// (and the tensor) for a missing, truncated or corrupt file, an unsupported dtype,
// or data offsets inconsistent with the shape and dtype.
SafetensorsFile read_safetensors(const std::string& path);
// The same validation on bytes already in memory; `path` only names them in errors.
SafetensorsFile parse_safetensors(const std::vector<std::byte>& bytes, const std::string& path);

// The file's bytes for these tensors (in this order) and metadata. Throws
// std::invalid_argument on duplicate or empty names, or data of the wrong size.
std::vector<std::byte> encode_safetensors(const std::vector<SafetensorsTensor>& tensors,
                                          const std::map<std::string, std::string>& metadata = {});

// Host copy of a tensor's bytes. Tensors that the CPU cannot read (CUDA) are copied
// to backend->host_memory() through backend->copy; without a backend that is an
// std::invalid_argument naming `name`, as is a shape-only tensor (no data).
SafetensorsTensor safetensors_tensor_from(const std::string& name, const Tensor& t, Backend* backend = nullptr);

// Saves named tensors (a state dict, or data "x" and "y") atomically as safetensors
// (write_file_atomic as OutputKind::replaceable: a regular file, or a link to one).
void write_safetensors_atomic(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                              Backend* backend = nullptr, const std::map<std::string, std::string>& metadata = {});

// True when the CPU can read and write the device's memory directly (host and
// numeric twin devices; not CUDA, not the twin's shape-only mode).
bool device_is_cpu_readable(const Device& device);

// A new tensor on `device` holding the safetensors tensor's data. Devices the CPU
// cannot write are filled through backend->copy (std::invalid_argument without one).
Tensor tensor_from_safetensors(const SafetensorsTensor& st, Device& device,
                               MemoryCategory category = MemoryCategory::inputs, Backend* backend = nullptr);

}  // namespace dpt
