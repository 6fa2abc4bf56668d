// torch.optim.SGD and torch.optim.AdamW (PyTorch 1.13 single-tensor formulas; the
// per-element arithmetic is in kernels_impl.hpp). State is allocated on the first
// step, as PyTorch creates it lazily, and counted as MemoryCategory::optimizer_state.
#include "engine/optim/optim.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"

namespace dpt {

std::vector<int> multi_tensor_launches_by_tensor(const std::vector<std::int64_t>& numels, int depth,
                                                bool scalar_list) {
  // aten/src/ATen/native/cuda/MultiTensorApply.cuh (the classic limits, without the large
  // kernel arguments of CUDA 12.1+ on Volta and later): depth_to_max_tensors, and
  // depth_to_max_tensors_scalarlist for an op that takes a list of scalars.
  static constexpr int kMaxTensors[5] = {110, 64, 48, 36, 30};
  static constexpr int kMaxTensorsScalarList[5] = {96, 64, 48, 36, 30};
  static constexpr int kMaxBlocks = 320;
  static constexpr std::int64_t kChunk = 65536;
  if (depth < 1 || depth > 5) throw std::invalid_argument(fmt::format("multi_tensor_launches: depth {}", depth));
  const int max_tensors = (scalar_list ? kMaxTensorsScalarList : kMaxTensors)[depth - 1];
  std::vector<int> out(numels.size(), 0);
  int tensors = 0, blocks = 0;
  size_t last = numels.size();
  for (size_t t = 0; t < numels.size(); ++t) {
    if (numels[t] <= 0) continue;  // empty tensors are skipped
    last = t;
    ++tensors;
    const std::int64_t chunks = (numels[t] + kChunk - 1) / kChunk;
    for (std::int64_t c = 0; c < chunks; ++c) {
      ++blocks;
      const bool last_chunk_of_tensor = c == chunks - 1;
      const bool tensors_full = tensors == max_tensors && last_chunk_of_tensor;
      const bool blocks_full = blocks == kMaxBlocks;
      if (tensors_full || blocks_full) {
        ++out[t];
        blocks = 0;
        tensors = last_chunk_of_tensor ? 0 : 1;  // a tensor cut mid-way carries over
      }
    }
  }
  if (blocks > 0) ++out[last];
  return out;
}

int multi_tensor_launches(const std::vector<std::int64_t>& numels, int depth, bool scalar_list) {
  int n = 0;
  for (int k : multi_tensor_launches_by_tensor(numels, depth, scalar_list)) n += k;
  return n;
}

const char* optimizer_impl_name(OptimizerImpl i) {
  switch (i) {
    case OptimizerImpl::per_parameter: return "per_parameter";
    case OptimizerImpl::for_loop: return "for_loop";
    case OptimizerImpl::foreach: return "foreach";
    case OptimizerImpl::fused: return "fused";
  }
  return "?";
}

OptimizerImpl parse_optimizer_impl(const std::string& name) {
  for (auto i : {OptimizerImpl::per_parameter, OptimizerImpl::for_loop, OptimizerImpl::foreach, OptimizerImpl::fused})
    if (name == optimizer_impl_name(i)) return i;
  throw std::invalid_argument(
      fmt::format("unknown optimizer implementation '{}' (allowed: foreach, for_loop, fused, per_parameter)", name));
}

namespace {

// One kernel of an update, in tensors of a parameter's size; for foreach, its tensor lists
// and whether it takes a list of scalars (a lower tensor limit at depth 1).
struct UpdateOp {
  double read = 0, written = 0;
  int depth = 1;
  bool scalar_list = false;
};

// Each parameter's charge for an update made of `ops`: for_loop launches every op per
// non-empty parameter; foreach launches each op over all parameters as multi_tensor_apply
// does, each launch charged on the parameter whose chunk fires it (so the GPU starts on the
// first launch while the host dispatches the next), the bytes on each parameter. Planted
// fault: foreach charged one launch per op, whatever the tensor lists.
std::vector<std::optional<OptimizerCharge>> update_charges(const std::vector<NamedParameter>& params,
                                                           const std::vector<UpdateOp>& ops, OptimizerImpl impl) {
  std::vector<std::optional<OptimizerCharge>> out(params.size());
  if (impl == OptimizerImpl::per_parameter) return out;
  double read = 0, written = 0;
  for (const auto& op : ops) {
    read += op.read;
    written += op.written;
  }
  std::vector<std::int64_t> numels;
  for (const auto& p : params) numels.push_back(p.param->value.numel());
  std::vector<int> launches(params.size(), 0);
  if (impl == OptimizerImpl::for_loop) {
    for (size_t i = 0; i < params.size(); ++i) launches[i] = numels[i] > 0 ? static_cast<int>(ops.size()) : 0;
  } else if (fault_active(Fault::foreach_one_launch_per_op)) {
    const auto first = std::find_if(numels.begin(), numels.end(), [](std::int64_t n) { return n > 0; });
    if (first != numels.end()) launches[static_cast<size_t>(first - numels.begin())] = static_cast<int>(ops.size());
  } else {
    for (const auto& op : ops) {
      const auto by = multi_tensor_launches_by_tensor(numels, op.depth, op.scalar_list);
      for (size_t i = 0; i < params.size(); ++i) launches[i] += by[i];
    }
  }
  for (size_t i = 0; i < params.size(); ++i) out[i] = OptimizerCharge{read, written, launches[i]};
  return out;
}

// torch.optim.SGD's kernels (1.13 _single_tensor_sgd / _multi_tensor_sgd with every momentum
// buffer allocated, the steady state): weight decay's add, momentum's mul_ and add_,
// nesterov's add_, then the parameter's add_; fused: one kernel over the lists it touches.
std::vector<UpdateOp> sgd_ops(const SgdOptions& o, OptimizerImpl impl) {
  const bool momentum = o.momentum != 0;
  if (impl == OptimizerImpl::fused) return {{momentum ? 3.0 : 2.0, momentum ? 2.0 : 1.0, momentum ? 3 : 2}};
  std::vector<UpdateOp> ops;
  if (o.weight_decay != 0) ops.push_back({2, 1, 3});  // grads = _foreach_add(grads, params): a new list
  if (momentum) {
    ops.push_back({1, 1, 1});  // buf.mul_(momentum)
    ops.push_back({2, 1, 2});  // buf.add_(d_p)
    if (o.nesterov) ops.push_back({2, 1, 2});  // d_p.add_(buf, alpha=momentum)
  }
  ops.push_back({2, 1, 2});  // param.add_(d_p, alpha=-lr)
  return ops;
}

// torch.optim.AdamW's kernels (1.13 _single_tensor_adamw / _multi_tensor_adamw): decay
// mul_, exp_avg mul_ and add_, exp_avg_sq mul_ and addcmul_(grad, grad), sqrt (a new
// list), div_ by sqrt(bias_correction2), add eps (a new list), addcdiv_ into the
// parameters; fused: one kernel over parameters, gradients and both moments.
std::vector<UpdateOp> adamw_ops(OptimizerImpl impl) {
  if (impl == OptimizerImpl::fused) return {{4, 3, 4}};
  return {{1, 1, 1},       {1, 1, 1}, {2, 1, 2}, {1, 1, 1},      {3, 1, 3},
          {1, 1, 2},       // sqrt
          {1, 1, 1, true}, // div_ by the list of sqrt(bias_correction2)
          {1, 1, 2},       // add eps
          {3, 1, 3, true}};  // addcdiv_ with the list of step sizes
}

void require_grads(const std::vector<NamedParameter>& params, const char* optimizer) {
  for (auto& p : params) {
    if (!p.param) throw std::invalid_argument(fmt::format("{}: parameter '{}' is null", optimizer, p.name));
    if (!p.param->grad.defined())
      throw std::invalid_argument(fmt::format("{}: parameter '{}' has no gradient tensor", optimizer, p.name));
  }
}

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<NamedParameter> params, const SgdOptions& o, OptimizerImpl impl)
      : params_(std::move(params)), o_(o), impl_(impl) {
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
    const auto charges = update_charges(params_, sgd_ops(o_, impl_), impl_);
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
      kernel_sgd_step(o_, first, p.value, p.grad, buf, charges[i]);
    }
    started_ = true;
  }
  std::string name() const override { return "sgd"; }
  int state_tensors_per_parameter() const override { return o_.momentum != 0 ? 1 : 0; }

 private:
  std::vector<NamedParameter> params_;
  SgdOptions o_;
  OptimizerImpl impl_;
  std::vector<Tensor> buffers_;
  bool started_ = false;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<NamedParameter> params, const AdamWOptions& o, OptimizerImpl impl)
      : params_(std::move(params)), o_(o), impl_(impl) {
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
    const auto charges = update_charges(params_, adamw_ops(impl_), impl_);
    for (size_t i = 0; i < params_.size(); ++i) {
      Parameter& p = *params_[i].param;
      if (!exp_avg_[i].defined()) {
        exp_avg_[i] = Tensor::zeros(p.value.device(), p.value.shape(), p.value.dtype(),
                                    MemoryCategory::optimizer_state);
        exp_avg_sq_[i] = Tensor::zeros(p.value.device(), p.value.shape(), p.value.dtype(),
                                       MemoryCategory::optimizer_state);
      }
      kernel_adamw_step(o_, step_, p.value, p.grad, exp_avg_[i], exp_avg_sq_[i], charges[i]);
    }
  }
  std::string name() const override { return "adamw"; }
  int state_tensors_per_parameter() const override { return 2; }

 private:
  std::vector<NamedParameter> params_;
  AdamWOptions o_;
  OptimizerImpl impl_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  std::int64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(std::vector<NamedParameter> params, const SgdOptions& o, OptimizerImpl impl) {
  return std::make_unique<Sgd>(std::move(params), o, impl);
}

std::unique_ptr<Optimizer> make_adamw(std::vector<NamedParameter> params, const AdamWOptions& o, OptimizerImpl impl) {
  return std::make_unique<AdamW>(std::move(params), o, impl);
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
