// torch.optim.SGD and torch.optim.AdamW (PyTorch 1.13 single-tensor formulas; the
// per-element arithmetic is in kernels_impl.hpp). State is allocated on the first
// step, as PyTorch creates it lazily, and counted as MemoryCategory::optimizer_state.
#include "engine/optim/optim.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace dpt {
namespace {

void require_grads(const std::vector<NamedParameter>& params, const char* optimizer) {
  for (auto& p : params) {
    if (!p.param) throw std::invalid_argument(fmt::format("{}: parameter '{}' is null", optimizer, p.name));
    if (!p.param->grad.defined())
      throw std::invalid_argument(fmt::format("{}: parameter '{}' has no gradient tensor", optimizer, p.name));
  }
}

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<NamedParameter> params, const SgdOptions& o) : params_(std::move(params)), o_(o) {
    // The same checks and messages as torch.optim.SGD's constructor.
    if (!(o.lr >= 0)) throw std::invalid_argument(fmt::format("SGD: invalid learning rate {}", o.lr));
    if (!(o.momentum >= 0)) throw std::invalid_argument(fmt::format("SGD: invalid momentum value {}", o.momentum));
    if (!(o.weight_decay >= 0))
      throw std::invalid_argument(fmt::format("SGD: invalid weight_decay value {}", o.weight_decay));
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
      throw std::invalid_argument("SGD: nesterov momentum requires a momentum and zero dampening");
    require_grads(params_, "SGD");
    buffers_.resize(params_.size());
  }

  void step() override {
    const bool first = !started_;
    for (size_t i = 0; i < params_.size(); ++i) {
      Parameter& p = *params_[i].param;
      Tensor* buf = nullptr;
      if (o_.momentum != 0) {
        // momentum_buffer = clone(d_p) on the first step: allocated now, written by the kernel.
        if (!buffers_[i].defined())
          buffers_[i] = Tensor::empty(p.value.device(), p.value.shape(), p.value.dtype(),
                                      MemoryCategory::optimizer_state);
        buf = &buffers_[i];
      }
      kernel_sgd_step(o_, first, p.value, p.grad, buf);
    }
    started_ = true;
  }
  std::string name() const override { return "sgd"; }
  int state_tensors_per_parameter() const override { return o_.momentum != 0 ? 1 : 0; }

 private:
  std::vector<NamedParameter> params_;
  SgdOptions o_;
  std::vector<Tensor> buffers_;
  bool started_ = false;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<NamedParameter> params, const AdamWOptions& o) : params_(std::move(params)), o_(o) {
    if (!(o.lr >= 0)) throw std::invalid_argument(fmt::format("AdamW: invalid learning rate {}", o.lr));
    if (!(o.eps >= 0)) throw std::invalid_argument(fmt::format("AdamW: invalid epsilon value {}", o.eps));
    if (!(o.beta1 >= 0 && o.beta1 < 1))
      throw std::invalid_argument(fmt::format("AdamW: invalid beta parameter at index 0: {}", o.beta1));
    if (!(o.beta2 >= 0 && o.beta2 < 1))
      throw std::invalid_argument(fmt::format("AdamW: invalid beta parameter at index 1: {}", o.beta2));
    if (!(o.weight_decay >= 0))
      throw std::invalid_argument(fmt::format("AdamW: invalid weight_decay value {}", o.weight_decay));
    require_grads(params_, "AdamW");
    exp_avg_.resize(params_.size());
    exp_avg_sq_.resize(params_.size());
  }

  void step() override {
    ++step_;  // PyTorch increments state['step'] before the update, so the first step is 1
    for (size_t i = 0; i < params_.size(); ++i) {
      Parameter& p = *params_[i].param;
      if (!exp_avg_[i].defined()) {
        exp_avg_[i] = Tensor::zeros(p.value.device(), p.value.shape(), p.value.dtype(),
                                    MemoryCategory::optimizer_state);
        exp_avg_sq_[i] = Tensor::zeros(p.value.device(), p.value.shape(), p.value.dtype(),
                                       MemoryCategory::optimizer_state);
      }
      kernel_adamw_step(o_, step_, p.value, p.grad, exp_avg_[i], exp_avg_sq_[i]);
    }
  }
  std::string name() const override { return "adamw"; }
  int state_tensors_per_parameter() const override { return 2; }

 private:
  std::vector<NamedParameter> params_;
  AdamWOptions o_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  std::int64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(std::vector<NamedParameter> params, const SgdOptions& o) {
  return std::make_unique<Sgd>(std::move(params), o);
}

std::unique_ptr<Optimizer> make_adamw(std::vector<NamedParameter> params, const AdamWOptions& o) {
  return std::make_unique<AdamW>(std::move(params), o);
}

const char* optimizer_kind_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::sgd_momentum: return "sgd_momentum";
    case OptimizerKind::adamw: return "adamw";
  }
  return "?";
}

OptimizerKind parse_optimizer_kind(const std::string& name) {
  for (auto k : {OptimizerKind::sgd, OptimizerKind::sgd_momentum, OptimizerKind::adamw})
    if (name == optimizer_kind_name(k)) return k;
  throw std::invalid_argument(fmt::format("unknown optimizer '{}' (allowed: sgd, sgd_momentum, adamw)", name));
}

int optimizer_state_tensors(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::sgd: return 0;
    case OptimizerKind::sgd_momentum: return 1;
    case OptimizerKind::adamw: return 2;
  }
  return 0;
}

}  // namespace dpt
