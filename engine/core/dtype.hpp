// Element types a Tensor can hold. Floating types carry parameters and
// activations; integer types carry class labels (int64, as in PyTorch). bf16 and
// f16 are storage types only: the twin's shape-only mode sizes memory and bytes on
// the wire with them; no host kernel computes in them.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "engine/core/units.hpp"

namespace dpt {

enum class DType { f32, f64, i64, i32, bf16, f16 };

constexpr Bytes dtype_size_bytes(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i64: return 8;
    case DType::i32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
  }
  return 0;
}

// Floating types the kernels compute in.
constexpr bool dtype_is_floating(DType t) { return t == DType::f32 || t == DType::f64; }
// Floating storage types without kernels (cost-only models in the twin).
constexpr bool dtype_is_half(DType t) { return t == DType::bf16 || t == DType::f16; }

// Short lower-case name as used on the command line: "f32", "f64", "i64", "i32", "bf16", "f16".
std::string_view dtype_name(DType t);
// Parses the short names (and "float32", "float64", "int64", "int32", "bfloat16", "float16");
// throws std::invalid_argument naming the bad value otherwise.
DType dtype_from_name(std::string_view name);
// safetensors names: "F32", "F64", "I64", "I32".
std::string_view dtype_safetensors_name(DType t);
// Throws std::invalid_argument naming the value for a safetensors dtype dptwin does not read.
DType dtype_from_safetensors_name(std::string_view name);

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::i32; }

}  // namespace dpt
