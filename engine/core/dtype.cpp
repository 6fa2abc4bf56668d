#include "engine/core/dtype.hpp"

namespace dpt {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
  }
  return "?";
}

DType dtype_from_name(std::string_view name) {
  if (name == "f32" || name == "float32") return DType::f32;
  if (name == "f64" || name == "float64") return DType::f64;
  if (name == "i64" || name == "int64") return DType::i64;
  if (name == "i32" || name == "int32") return DType::i32;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "f16" || name == "float16") return DType::f16;
  throw std::invalid_argument("unknown dtype '" + std::string(name) + "' (expected f32, f64, i64, i32, bf16 or f16)");
}

std::string_view dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i64: return "I64";
    case DType::i32: return "I32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
  }
  return "?";
}

DType dtype_from_safetensors_name(std::string_view name) {
  if (name == "F32") return DType::f32;
  if (name == "F64") return DType::f64;
  if (name == "I64") return DType::i64;
  if (name == "I32") return DType::i32;
  if (name == "F16") return DType::f16;
  if (name == "BF16") return DType::bf16;
  throw std::invalid_argument("unsupported safetensors dtype '" + std::string(name) +
                              "' (dptwin reads F32, F64, F16, BF16, I64, I32)");
}

}  // namespace dpt
