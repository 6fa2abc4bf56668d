// f32 master weights under an f16 model, with dynamic loss scaling: what apex amp O2,
// DeepSpeed's "fp16" optimizer and Megatron-LM's --fp16 do (precision f16-master).
// The model's weights and gradients are f16 (so DDP all-reduces f16 gradients); this
// optimizer holds an f32 copy of every weight (the master), an f32 gradient for it and the
// wrapped optimizer's state on the masters (f32). Each step():
//   1. unscales every f16 gradient into its f32 master gradient, checking for inf/NaN
//      ("amp_master_unscale_step": reads 2 bytes and writes 4 per element; apex's
//      multi_tensor_scale from the model's gradients to the masters');
//   2. runs the wrapped optimizer on the masters and grows the scale after
//      growth_interval steps in a row (GradScalerOptions: apex's dynamic loss scaler has
//      the same 2^16, x2, x0.5, 2000). Nothing is computed in the shape-only mode, so no
//      overflow is found and no step skipped (an overflow would skip the update and halve
//      the scale, as GradScaler does);
//   3. copies every updated master into its f16 weight ("amp_master_to_model_step":
//      reads 4 bytes and writes 2 per element).
// The names end in _step: the twin counts the kernels with the optimizer.
// f16 is a storage type of the twin's shape-only mode: on a device that computes this
// throws (the host and CUDA engines run f32, f64 and autocast, not model.half()).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "engine/core/precision.hpp"
#include "engine/optim/grad_scaler.hpp"

namespace dpt {

using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(std::vector<NamedParameter>)>;

class MasterWeights final : public Optimizer {
 public:
  // `make_inner` builds the wrapped optimizer on the master parameters. Throws
  // std::invalid_argument on a computing device, for a null factory, or for options a
  // GradScaler refuses.
  MasterWeights(const OptimizerFactory& make_inner, std::vector<NamedParameter> params,
                GradScalerOptions options = {});
  void step() override;
  std::string name() const override { return inner_->name() + "+f32 master weights"; }
  int state_tensors_per_parameter() const override { return inner_->state_tensors_per_parameter(); }
  double loss_scale() const override { return scale_; }

 private:
  std::vector<NamedParameter> params_;
  std::vector<Parameter> masters_;
  std::unique_ptr<Optimizer> inner_;
  GradScalerOptions options_;
  double scale_;
  std::int64_t growth_tracker_ = 0;
};

// make_inner's optimizer on f32 masters of `params` (precision f16-master).
std::unique_ptr<Optimizer> wrap_with_master_weights(const OptimizerFactory& make_inner,
                                                    std::vector<NamedParameter> params);

// `inner` as training in precision `p` runs it: wrapped in a GradScaler (f16-amp) or
// stepping f32 masters of the f16 weights (f16-master); as it is otherwise.
OptimizerFactory optimizer_for_precision(OptimizerFactory inner, Precision p);

}  // namespace dpt
