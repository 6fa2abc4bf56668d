// Deterministic parameter initialisation and random numbers from a seed.
//
// The generator is std::mt19937_64, whose output sequence the C++ standard fixes,
// turned into doubles and integers by formulas written here (the standard
// distributions are not reproducible across library implementations). So a seed
// gives the same weights and the same synthetic data on every machine.
#pragma once
#include <cstdint>
#include <random>

#include "engine/core/tensor.hpp"

namespace dpt {

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : engine_(seed) {}
  std::uint64_t next_u64() { return engine_(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal (Box-Muller; the second value of each pair is kept for the next call).
  double normal();
  // Uniform integer in [0, n), unbiased (rejection sampling); n must be positive.
  std::int64_t randint(std::int64_t n);

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0;
};

// Fills `t` with values uniform in [-bound, bound), drawn in element order. The
// tensor must be readable from the CPU (host, host-worker or numeric sim device);
// on a shape-only device the draws are made and nothing is written.
void init_uniform(Tensor& t, double bound, Generator& gen);

// nn.Linear.reset_parameters(): kaiming_uniform_(weight, a=sqrt(5)) is uniform in
// +-gain*sqrt(3/fan_in) with gain = sqrt(2/(1+a^2)) = sqrt(1/3), i.e. +-1/sqrt(fan_in);
// the bias is uniform in +-1/sqrt(fan_in) as well. fan_in = weight.dim(1).
// Weight first, then bias, as PyTorch draws them.
double linear_init_bound(std::int64_t fan_in);
void init_linear(Tensor& weight, Tensor* bias, Generator& gen);

}  // namespace dpt
