#include "engine/optim/master_weights.hpp"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"

namespace dpt {

MasterWeights::MasterWeights(const OptimizerFactory& make_inner, std::vector<NamedParameter> params,
                             GradScalerOptions o)
    : params_(std::move(params)), options_(o), scale_(o.init_scale) {
  if (!make_inner) throw std::invalid_argument("f32 master weights: the wrapped optimizer's factory is null");
  check_loss_scaler_options(o, "f32 master weights' loss scaler");
  masters_.reserve(params_.size());
  for (const auto& p : params_) {
    Device& d = p.param->value.device();
    if (d.computes())
      throw std::invalid_argument(fmt::format(
          "f32 master weights ({}): {} computes, and f16-master's model.half() is cost-only here (f16 is a storage "
          "type of the twin's shape-only mode; the host and CUDA engines train in f32, f64 or autocast)",
          p.name, d.name()));
    Parameter m;
    m.name = p.name;
    // Planted fault: the masters kept in the model's dtype, as if no f32 copy were held.
    const DType master_dtype = fault_active(Fault::master_weights_free) ? p.param->value.dtype() : DType::f32;
    m.value = Tensor::empty(d, p.param->value.shape(), master_dtype, MemoryCategory::optimizer_state);
    m.grad = Tensor::empty(d, p.param->value.shape(), master_dtype, MemoryCategory::gradients);
    masters_.push_back(std::move(m));
  }
  std::vector<NamedParameter> named;
  named.reserve(masters_.size());
  for (std::size_t i = 0; i < masters_.size(); ++i) named.push_back({params_[i].name, &masters_[i]});
  inner_ = make_inner(std::move(named));
  if (!inner_) throw std::invalid_argument("f32 master weights: the factory built no optimizer");
}

void MasterWeights::step() {
  // 1. f16 gradient -> f32 master gradient, times 1/scale, with the inf/NaN check. In the
  // shape-only mode nothing is computed and no step is skipped.
  // Both copies are apex's multi_tensor_scale over two lists (f16 and f32): multi-tensor
  // launches, each charged on the tensor whose chunk fires it.
  std::vector<std::int64_t> numels;
  for (const auto& p : params_) numels.push_back(p.param->value.numel());
  const std::vector<int> launches = multi_tensor_launches_by_tensor(numels, 2);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& g = params_[i].param->grad;
    Device& d = g.device();
    OpCost cost{"amp_master_unscale_step", OpKind::compute, 2.0 * static_cast<double>(g.numel()), g.size_bytes(),
                masters_[i].grad.size_bytes()};
    cost.launches = launches[i];
    d.submit(cost, [] {});
  }
  inner_->step();
  // 3. f32 master -> f16 weight.
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& w = params_[i].param->value;
    Device& d = w.device();
    OpCost cost{"amp_master_to_model_step", OpKind::memory, 0.0, masters_[i].value.size_bytes(), w.size_bytes()};
    cost.launches = launches[i];
    d.submit(cost, [] {});
  }
  if (++growth_tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
}

std::unique_ptr<Optimizer> wrap_with_master_weights(const OptimizerFactory& make_inner,
                                                    std::vector<NamedParameter> params) {
  return std::make_unique<MasterWeights>(make_inner, std::move(params));
}

OptimizerFactory optimizer_for_precision(OptimizerFactory inner, Precision p) {
  if (precision_uses_grad_scaler(p))
    return [inner](std::vector<NamedParameter> params) { return wrap_with_grad_scaler(inner(params), params); };
  if (precision_uses_master_weights(p))
    return [inner](std::vector<NamedParameter> params) { return wrap_with_master_weights(inner, std::move(params)); };
  return inner;
}

}  // namespace dpt
