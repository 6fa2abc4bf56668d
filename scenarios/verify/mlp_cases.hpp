// Random MLP training cases for the strategy properties, shared by `dptwin verify`
// and the engine's property tests: the generator, the data, the single-device
// reference computed with the layers and the loss directly (no strategy involved),
// and how far a strategy's gradients may be from it.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "engine/core/backend.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/parallel/strategy.hpp"

namespace dpt::verify {

struct MlpCase {
  MlpSpec spec;
  DType dtype = DType::f64;
  LossKind loss = LossKind::mse;
  std::int64_t batch = 1;
  int devices = 1;
  std::uint64_t seed = 0;  // model initialisation and data
};

// One line that `dptwin train` flags mirror ("mlp:4-8-2 gelu +LN f64 mse batch 5 devices 2 seed 7").
std::string describe(const MlpCase& c);
std::ostream& operator<<(std::ostream& os, const MlpCase& c);  // how RapidCheck prints a counterexample

struct MlpCaseBounds {
  std::int64_t max_batch = 64;
  int max_devices = 8;
  std::int64_t max_width = 64;
  int max_depth = 4;                              // Linear layers
  std::vector<DType> dtypes{DType::f64, DType::f32};
};

// Depth 1-max_depth Linear layers of widths 1-max_width, ReLU or GELU, with or without
// LayerNorm, MSE or cross-entropy (at least 2 classes), batch 1-max_batch on
// 1-max_devices devices. LayerNorm over fewer than 4 features is degenerate (1
// feature: a constant output; 2: outputs of exactly +-1), so its backward is pure
// cancellation noise no summation-order bound covers in f32: f32 cases with LayerNorm
// get hidden widths of at least 4 (narrower ones are exercised in f64).
rc::Gen<MlpCase> gen_mlp_case(const MlpCaseBounds& bounds);

struct Batch {
  Tensor x, target;  // in host memory
};

// Inputs and MSE targets uniform in [-1, 1); CE labels uniform over the classes, all
// drawn from dptwin's seeded Generator (the same on every machine); `salt` gives a
// different batch of the same case (the next step).
Batch make_batch(Backend& backend, const MlpCase& c, std::uint64_t salt = 0);

ModelBuilder mlp_builder(const MlpCase& c);
// The same model on any of `backend`'s devices: on one whose memory the CPU cannot write
// (a GPU), built in host memory with the same generator and copied over, as `dptwin train`
// does, so every device starts from the host's exact weights.
ModelBuilder mlp_builder(Backend& backend, const MlpCase& c);
OptimizerBuilder sgd_builder(double lr = 0.05, double momentum = 0.0);

// A tensor's values, read through host memory where the CPU cannot read the device's.
std::vector<double> read_values(Backend& backend, const Tensor& t);
std::vector<std::vector<double>> grads_of(Backend& backend, Sequential& m);

// The single-device gradient of the loss over rows [begin, begin + count) of the
// batch (the whole batch by default), computed with the layers and the loss directly.
std::vector<std::vector<double>> reference_grads(Backend& backend, const MlpCase& c, const Batch& b,
                                                 std::int64_t begin = 0, std::optional<std::int64_t> count = {},
                                                 std::optional<double> divisor = std::nullopt);

// Sum over samples of ||g_i||, per tensor: the magnitudes a gradient is summed from
// (g_i is sample i's term of the loss, with the divisor `divisor_of(i)`). Summation
// roundoff is bounded by eps times the sum of |terms|, not by the size of what is left
// after cancellation, so errors are measured against this scale.
std::vector<double> summand_scale(Backend& backend, const MlpCase& c, const Batch& b,
                                  const std::function<double(std::int64_t)>& divisor_of);
// The full batch's mean-loss divisor: elements for MSE, samples for CE (PyTorch's).
double mean_divisor(const MlpCase& c, std::int64_t samples);
std::vector<double> full_batch_scale(Backend& backend, const MlpCase& c, const Batch& b);

// How far gradients a are from the reference b, relative to `scale` (summand_scale):
//  * global: ||a - b|| / ||scale|| over all tensors together;
//  * per tensor: ||a_t - b_t|| / max(scale_t, 1e-2 ||scale||), allowed 100x the
//    global tolerance, so a bug confined to one small tensor (a bias) is still caught.
//    The floor covers tensors under a LayerNorm of width 1 or 2, whose backward cancels
//    terms of order one within each sample.
// Without cancellation scale_t = ||b_t|| and this is the plain relative error.
struct GradError {
  double global = 0;
  double per_tensor = 0;
  int worst_tensor = -1;  // index of the tensor with the largest per-tensor error
};
GradError gradient_error(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b,
                         const std::vector<double>& scale);
std::ostream& operator<<(std::ostream& os, const GradError& e);

// The tolerance a correct strategy's global error stays within, from the rounding of
// what it reorders. Every gradient element is a sum over the batch of per-sample
// terms, each the product of a forward and a backward chain of `depth` layers whose
// sums run over at most `width` features. A strategy sums the batch in
// another order (chunks per device, then across at most `devices` partial sums) and may
// block those inner products differently; each of the two computations is within
// gamma_n = n u / (1 - n u) of the exact sum of |terms| (u: the unit roundoff of the
// dtype) with n = batch + devices + depth x (the sums one layer adds to a term's
// forward and backward chain: 2 (width + 1) inner-product terms, plus 4 width for
// LayerNorm's mean and variance and their backward sums), so they differ by at most
// 2 gamma_n. Planted bugs move whole tensors by O(1).
double rounding_tolerance(const MlpCase& c);

}  // namespace dpt::verify
