#include "engine/optim/grad_scaler.hpp"

#include <utility>

namespace dpt {

namespace {

class GradScalerCost final : public Optimizer {
 public:
  GradScalerCost(std::unique_ptr<Optimizer> inner, std::vector<NamedParameter> params)
      : inner_(std::move(inner)), params_(std::move(params)) {}

  void step() override {
    for (const auto& p : params_) {
      const Tensor& g = p.param->grad;
      // One multiply and one finiteness test per element; the gradient is read and rewritten.
      // The name ends in _step: the twin counts it with the optimizer, as the profiler does.
      kernel_charge(g.device(), {"amp_unscale_step", OpKind::compute, 2.0 * static_cast<double>(g.numel()),
                                 g.size_bytes(), g.size_bytes()});
    }
    inner_->step();
  }
  std::string name() const override { return inner_->name() + "+GradScaler"; }
  int state_tensors_per_parameter() const override { return inner_->state_tensors_per_parameter(); }

 private:
  std::unique_ptr<Optimizer> inner_;
  std::vector<NamedParameter> params_;
};

}  // namespace

std::unique_ptr<Optimizer> wrap_with_grad_scaler(std::unique_ptr<Optimizer> inner,
                                                 std::vector<NamedParameter> params) {
  return std::make_unique<GradScalerCost>(std::move(inner), std::move(params));
}

}  // namespace dpt
