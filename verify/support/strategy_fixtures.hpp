// Shared pieces of the strategy properties (strategies_test, ddp_test). The cases, data,
// reference and error measure are the product's (scenarios/verify/mlp_cases.hpp, also
// what `dptwin verify` runs); here are the tests' bounds, momentum SGD, host-memory
// reads and the tests' fixed tolerances.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "engine/host/host_backend.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/optim/optim.hpp"
#include "engine/parallel/strategy.hpp"
#include "scenarios/verify/mlp_cases.hpp"

namespace dpt::test {

using verify::Batch;
using verify::describe;
using verify::full_batch_scale;
using verify::gen_mlp_case;
using verify::GradError;
using verify::gradient_error;
using verify::make_batch;
using verify::mean_divisor;
using verify::MlpCase;
using verify::MlpCaseBounds;
using verify::mlp_builder;
using verify::reference_grads;
using verify::sgd_builder;
using verify::summand_scale;
using verify::operator<<;

// depth 1-4 Linear layers, widths 1-max_width, f64 or f32 (mlp_cases.hpp).
inline MlpCase gen_mlp_case(std::int64_t max_batch, int max_devices, int max_width = 64) {
  MlpCaseBounds bounds;
  bounds.max_batch = max_batch;
  bounds.max_devices = max_devices;
  bounds.max_width = max_width;
  const MlpCase c = *gen_mlp_case(bounds);
  RC_TAG(c.loss == LossKind::mse ? "mse" : "ce");
  return c;
}

// Momentum SGD, so parameter errors would compound over steps.
inline OptimizerBuilder momentum_sgd_builder(double lr = 0.05) { return sgd_builder(lr, 0.9); }

inline std::vector<std::vector<double>> grads_of(Sequential& m) {
  std::vector<std::vector<double>> out;
  for (auto& p : m.named_parameters()) out.push_back(tensor_to_f64_vector(p.param->grad));
  return out;
}
inline std::vector<std::vector<double>> values_of(Sequential& m) {
  std::vector<std::vector<double>> out;
  for (auto& p : m.named_parameters()) out.push_back(tensor_to_f64_vector(p.param->value));
  return out;
}

// Parameters after training: each tensor's own norm is its scale.
inline std::vector<double> norms_of(const std::vector<std::vector<double>>& b) {
  std::vector<double> out;
  for (const auto& t : b) {
    double n = 0;
    for (double v : t) n += v * v;
    out.push_back(std::sqrt(n));
  }
  return out;
}

inline double tolerance(DType t) { return t == DType::f64 ? 1e-12 : 1e-5; }

inline bool within_tolerance(const GradError& e, DType t) {
  return e.global <= tolerance(t) && e.per_tensor <= 100 * tolerance(t);
}

// Per tensor: "|a-b| / |b|" with both norms, for the failure log.
inline std::string error_report(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  std::ostringstream os;
  for (size_t t = 0; t < a.size() && t < b.size(); ++t) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a[t].size() && i < b[t].size(); ++i) {
      diff += (a[t][i] - b[t][i]) * (a[t][i] - b[t][i]);
      norm += b[t][i] * b[t][i];
    }
    os << "tensor " << t << ": |a-b| " << std::sqrt(diff) << " |b| " << std::sqrt(norm) << "\n";
  }
  return os.str();
}

}  // namespace dpt::test
