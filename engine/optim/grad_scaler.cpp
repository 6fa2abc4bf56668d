#include "engine/optim/grad_scaler.hpp"

#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"

namespace dpt {

namespace {

// Multiplies g by inv_scale on its device and reports whether every element is
// finite. One op: the twin charges what torch's fused unscale-and-check kernel does.
// `launches`: the multi-tensor launches of torch's _amp_foreach_non_finite_check_and_unscale_
// that this gradient's chunks fire (multi_tensor_launches_by_tensor, one list: depth 1).
bool unscale_and_check(Tensor& g, double inv_scale, int launches) {
  Device& d = g.device();
  bool finite = true;
  // The name ends in _step: the twin counts it with the optimizer, as the profiler does.
  OpCost cost{"amp_unscale_step", OpKind::compute, 2.0 * static_cast<double>(g.numel()), g.size_bytes(),
              g.size_bytes()};
  cost.launches = launches;
  d.submit(cost,
           [&] {
             Kernels& k = d.kernels();
             k.scale(g.dtype(), g.numel(), inv_scale, g.data());
             // A sum in double of finite f32 values stays finite; inf or NaN anywhere
             // makes it inf or NaN.
             finite = std::isfinite(k.sum(g.dtype(), g.numel(), g.data()));
           });
  return finite;
}

}  // namespace

void check_loss_scaler_options(const GradScalerOptions& o, const char* who) {
  if (!(o.init_scale > 0) || !std::isfinite(o.init_scale))
    throw std::invalid_argument(fmt::format("{}: init_scale must be positive and finite, got {}", who, o.init_scale));
  if (!(o.growth_factor > 1) || !std::isfinite(o.growth_factor))
    throw std::invalid_argument(fmt::format("{}: growth_factor must be above 1, got {}", who, o.growth_factor));
  if (!(o.backoff_factor > 0 && o.backoff_factor < 1))
    throw std::invalid_argument(fmt::format("{}: backoff_factor must be in (0, 1), got {}", who, o.backoff_factor));
  if (o.growth_interval < 1)
    throw std::invalid_argument(fmt::format("{}: growth_interval must be at least 1, got {}", who, o.growth_interval));
}

GradScaler::GradScaler(std::unique_ptr<Optimizer> inner, std::vector<NamedParameter> params, GradScalerOptions o)
    : inner_(std::move(inner)), params_(std::move(params)), options_(o), scale_(o.init_scale) {
  if (!inner_) throw std::invalid_argument("GradScaler: the wrapped optimizer is null");
  check_loss_scaler_options(o, "GradScaler");
}

void GradScaler::step() {
  bool found_inf = false;
  const double inv_scale = 1.0 / scale_;
  std::vector<std::int64_t> numels;
  for (const auto& p : params_) numels.push_back(p.param->grad.numel());
  const std::vector<int> launches = multi_tensor_launches_by_tensor(numels, 1);
  for (size_t i = 0; i < params_.size(); ++i)
    if (!unscale_and_check(params_[i].param->grad, inv_scale, launches[i])) found_inf = true;
  if (fault_active(Fault::grad_scaler_steps_on_inf)) found_inf = false;  // planted fault
  last_skipped_ = found_inf;
  if (found_inf) {
    ++skipped_;
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
    return;
  }
  inner_->step();
  if (++growth_tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
}

std::unique_ptr<Optimizer> wrap_with_grad_scaler(std::unique_ptr<Optimizer> inner,
                                                 std::vector<NamedParameter> params) {
  return std::make_unique<GradScaler>(std::move(inner), std::move(params));
}

}  // namespace dpt
