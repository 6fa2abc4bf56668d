#include "engine/nn/init.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <vector>

namespace dpt {

double Generator::uniform() {
  // The top 53 bits give every double in [0, 1) on a 2^-53 grid.
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

double Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // 1 - uniform() lies in (0, 1], so the logarithm is finite.
  const double u1 = 1.0 - uniform(), u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1)), theta = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return r * std::cos(theta);
}

std::int64_t Generator::randint(std::int64_t n) {
  if (n <= 0) throw std::invalid_argument(fmt::format("randint: range size must be positive, got {}", n));
  const auto un = static_cast<std::uint64_t>(n);
  // Reject the top partial block of 2^64 so every value is equally likely.
  const std::uint64_t limit =
      std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % un;
  std::uint64_t v;
  do v = engine_();
  while (v >= limit);
  return static_cast<std::int64_t>(v % un);
}

void init_uniform(Tensor& t, double bound, Generator& gen) {
  std::vector<double> values(static_cast<size_t>(t.numel()));
  for (auto& v : values) v = gen.uniform(-bound, bound);
  if (!t.device().computes()) return;
  if (!t.device().host_readable())
    throw std::logic_error(
        fmt::format("init_uniform: {} memory is not writable from the CPU; initialise on a host "
                    "device and copy (make_mlp(spec, backend, device, ...) does)",
                    t.device().name()));
  tensor_fill_from_f64(t, values);
}

double linear_init_bound(std::int64_t fan_in) {
  return fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
}

void init_linear(Tensor& weight, Tensor* bias, Generator& gen) {
  if (weight.ndim() != 2)
    throw std::invalid_argument(
        fmt::format("init_linear: weight must be 2-d, got {}", shape_to_string(weight.shape())));
  const double bound = linear_init_bound(weight.dim(1));
  init_uniform(weight, bound, gen);
  if (bias) init_uniform(*bias, bound, gen);
}

}  // namespace dpt
