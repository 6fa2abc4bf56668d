// One device, one step: zero_grad, forward, loss, backward, optimizer step, in the
// order of a PyTorch training loop. The reference every other strategy must equal.
#include "engine/parallel/single.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dpt {
namespace {

class SingleDevice : public Strategy {
 public:
  SingleDevice(Backend& backend, const StrategyOptions& o, const ModelBuilder& build_model,
               const OptimizerBuilder& build_optimizer)
      : backend_(backend), options_(o), device_(backend.device(o.device_ids.empty() ? 0 : o.device_ids[0])),
        model_(build_model(device_)), optimizer_(build_optimizer(model_.named_parameters())),
        inputs_(o.inputs_resident) {
    if (o.device_ids.size() > 1)
      throw std::invalid_argument(fmt::format("strategy 'single' runs on one device, got {} device ids",
                                              o.device_ids.size()));
  }

  StrategyKind kind() const override { return StrategyKind::single; }

  StepResult train_step(const Tensor& x, const Tensor& target) override {
    if (x.ndim() < 1 || target.ndim() < 1 || x.dim(0) != target.dim(0))
      throw std::invalid_argument(fmt::format("train_step: input {} and target {} differ in batch size",
                                              shape_to_string(x.shape()), shape_to_string(target.shape())));
    // Python-level dispatch of a PyTorch step, for the twin, counted as DataParallel
    // and DDP count it (so the three differ only in what they add): the input copy,
    // one call per layer for forward and for backward, the loss, and the optimizer
    // step (one foreach call; zero_grad sets grads to None and launches nothing).
    backend_.host_dispatch(1);
    // The input batch moves to the device, as `x.to(device)` does in a script (once, when
    // resident: options_.inputs_resident).
    const Tensor xd = &x.device() == &device_ ? x : inputs_.to_device(backend_, x, device_);
    const Tensor td = &target.device() == &device_ ? target : inputs_.to_device(backend_, target, device_);
    model_.zero_grad();
    backend_.host_dispatch(static_cast<int>(model_.size()));
    const Tensor out = model_.forward(xd);
    backend_.host_dispatch(1);
    LossResult loss = loss_forward_backward(options_.loss, options_.reduction, out, td, std::nullopt,
                                             optimizer_->loss_scale());
    backend_.host_dispatch(static_cast<int>(model_.size()));
    model_.backward(loss.grad);
    backend_.host_dispatch(1);
    optimizer_->step();
    model_.clear_saved();
    StepResult r;
    r.loss = loss.value;
    r.samples_per_device = {x.dim(0)};
    return r;
  }

  Sequential& module() override { return model_; }

  std::vector<std::pair<std::string, Tensor>> state_dict() override {
    std::vector<std::pair<std::string, Tensor>> out;
    for (auto& p : model_.named_parameters()) out.emplace_back(p.name, p.param->value);
    return out;
  }

 private:
  Backend& backend_;
  StrategyOptions options_;
  Device& device_;
  Sequential model_;
  std::unique_ptr<Optimizer> optimizer_;
  InputPlacement inputs_;
};

}  // namespace

std::unique_ptr<Strategy> make_single_strategy(Backend& backend, const StrategyOptions& options,
                                               const ModelBuilder& build_model,
                                               const OptimizerBuilder& build_optimizer) {
  return std::make_unique<SingleDevice>(backend, options, build_model, build_optimizer);
}

}  // namespace dpt
