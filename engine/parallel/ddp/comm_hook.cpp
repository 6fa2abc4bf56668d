#include "engine/parallel/ddp/comm_hook.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/device.hpp"
#include "engine/core/half_round.hpp"

namespace dpt {

namespace {

constexpr const char* kChoices = "none, fp16_compress, bf16_compress, powersgd, powersgd:R (R in 1..1024)";

// PyTorch's compress hooks: buffer.to(half).div_(world_size). c10::Half and c10::BFloat16
// are built from a float, so an f64 value reaches the half format through f32 (rounded
// twice, as PyTorch rounds it), and div_ on a half tensor divides in f32 and rounds the
// f32 quotient.
template <typename T>
void round_all(void* data, Elements n, DType half, double divisor) {
  T* x = static_cast<T*>(data);
  const auto div = static_cast<float>(divisor);
  for (Elements i = 0; i < n; ++i) {
    const auto h = static_cast<float>(round_to_half(static_cast<double>(static_cast<float>(x[i])), half));
    x[i] = static_cast<T>(round_to_half(static_cast<double>(h / div), half));
  }
}

void cast_kernel(Tensor& bucket, DType half, double divisor, const char* name) {
  Device& d = bucket.device();
  if (!d.host_readable())
    throw std::invalid_argument(fmt::format("comm hook on {}: the compress hooks' numerics run on host-readable "
                                            "devices only",
                                            d.name()));
  if (bucket.dtype() != DType::f32 && bucket.dtype() != DType::f64)
    throw std::invalid_argument(fmt::format("comm hook: a {} bucket; the compress hooks take f32 or f64 gradients",
                                            dtype_name(bucket.dtype())));
  const Elements n = bucket.numel();
  const Bytes half_bytes = static_cast<Bytes>(n) * dtype_size_bytes(half);
  d.submit({name, OpKind::memory, static_cast<double>(n), bucket.size_bytes(), half_bytes}, [&bucket, half, divisor, n] {
    if (bucket.dtype() == DType::f32) round_all<float>(bucket.data(), n, half, divisor);
    else round_all<double>(bucket.data(), n, half, divisor);
  });
}

}  // namespace

CommHookSpec comm_hook_from_name(std::string_view text) {
  if (text == "none") return {};
  if (text == "fp16_compress") return {CommHook::fp16_compress, 1};
  if (text == "bf16_compress") return {CommHook::bf16_compress, 1};
  if (text == "powersgd") return {CommHook::powersgd, 1};
  constexpr std::string_view prefix = "powersgd:";
  if (text.substr(0, prefix.size()) == prefix) {
    const std::string_view digits = text.substr(prefix.size());
    int rank = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
    if (ec == std::errc() && end == digits.data() + digits.size() && rank >= 1 && rank <= 1024)
      return {CommHook::powersgd, rank};
  }
  throw std::invalid_argument(fmt::format("unknown comm hook '{}' (choices: {})", text, kChoices));
}

std::string comm_hook_name(const CommHookSpec& h) {
  switch (h.kind) {
    case CommHook::none: return "none";
    case CommHook::fp16_compress: return "fp16_compress";
    case CommHook::bf16_compress: return "bf16_compress";
    case CommHook::powersgd: return h.powersgd_rank == 1 ? "powersgd" : fmt::format("powersgd:{}", h.powersgd_rank);
  }
  return "?";
}

std::optional<DType> comm_hook_wire_dtype(CommHook h) {
  if (h == CommHook::fp16_compress) return DType::f16;
  if (h == CommHook::bf16_compress) return DType::bf16;
  return std::nullopt;
}

double round_to_half(double v, DType half) { return round_to_format(v, low_format(half)); }

void comm_hook_compress_in_place(Tensor& bucket, DType half, int world_size) {
  if (world_size < 1) throw std::invalid_argument(fmt::format("comm hook: world size {}", world_size));
  cast_kernel(bucket, half, static_cast<double>(world_size), half == DType::f16 ? "fp16_compress" : "bf16_compress");
}

void comm_hook_decompress_in_place(Tensor& bucket, DType half) {
  cast_kernel(bucket, half, 1.0, half == DType::f16 ? "fp16_decompress" : "bf16_decompress");
}

PowerSgdPlan powersgd_plan(const std::vector<Shape>& shapes, int rank, double min_compression_rate) {
  if (rank < 1) throw std::invalid_argument(fmt::format("powersgd: rank {} (at least 1)", rank));
  PowerSgdPlan plan;
  for (const Shape& s : shapes) {
    const Elements numel = shape_numel(s);
    // tensor.view(tensor.shape[0], -1): a vector of n is an n x 1 matrix.
    const Elements n = s.empty() ? 1 : s.front();
    const Elements m = n == 0 ? 0 : numel / n;
    const Elements r = std::min<Elements>({n, m, rank});
    if (static_cast<double>((n + m) * r) * min_compression_rate < static_cast<double>(numel)) {
      plan.p_elements += n * r;
      plan.q_elements += m * r;
      plan.matmul_flops += 3.0 * 2.0 * static_cast<double>(n) * static_cast<double>(m) * static_cast<double>(r);
      const auto gram_schmidt = [r](Elements k) {
        return 2.0 * static_cast<double>(k) * static_cast<double>(r * r) + 3.0 * static_cast<double>(k * r);
      };
      plan.orthogonalize_flops += gram_schmidt(n) + gram_schmidt(m);
    } else {
      plan.uncompressed_elements += numel;
    }
  }
  return plan;
}

}  // namespace dpt
