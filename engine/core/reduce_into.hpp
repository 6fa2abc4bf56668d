// The element-wise fold every numeric communicator runs (the host ring, the
// twin's numeric collectives): one copy, so both round alike, bit for bit.
#pragma once
#include <cstdint>
#include <stdexcept>

#include "engine/core/communicator.hpp"
#include "engine/core/dtype.hpp"

namespace dpt {

// dst[i] = op(src[i], dst[i]) for i < n; avg sums here (the caller divides).
template <typename T> void reduce_into(ReduceOp op, Elements n, const T* src, T* dst) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      for (Elements i = 0; i < n; ++i) dst[i] += src[i];
      break;
    case ReduceOp::max:
      for (Elements i = 0; i < n; ++i) dst[i] = src[i] > dst[i] ? src[i] : dst[i];
      break;
    case ReduceOp::min:
      for (Elements i = 0; i < n; ++i) dst[i] = src[i] < dst[i] ? src[i] : dst[i];
      break;
  }
}

// Calls f(T{}) with the C++ type of a dtype that has host arithmetic.
template <typename F> void dispatch_host_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::i64: f(std::int64_t{}); return;
    case DType::i32: f(std::int32_t{}); return;
    case DType::bf16:
    case DType::f16: throw std::invalid_argument("no host arithmetic for bf16/f16 tensors (storage-only types)");
  }
}

}  // namespace dpt
