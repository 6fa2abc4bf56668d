// torch.cuda.amp.GradScaler for f16 autocast, backend-blind: the strategies scale
// the loss's gradient by loss_scale() (scaler.scale(loss).backward()); step()
// unscales every gradient (times 1/scale) and checks it for inf/NaN, as
// _amp_foreach_non_finite_check_and_unscale_ does, runs the wrapped optimizer only
// when every gradient is finite, and updates the scale as _amp_update_scale_:
// halved (backoff) after an overflow, doubled (growth) after growth_interval
// finite steps in a row. The scale is a power of two, so scaling and unscaling are
// exact unless a value overflows or underflows.
//
// Its cost is one kernel per parameter ("amp_unscale_step": a multiply and a
// finiteness test per element, the gradient read and rewritten); the twin counts it
// with the optimizer. In the twin's shape-only mode nothing is computed and no
// step is skipped.
#pragma once
#include <cstdint>
#include <memory>

#include "engine/optim/optim.hpp"

namespace dpt {

// torch.cuda.amp.GradScaler's defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
};

// Throws std::invalid_argument, prefixed with `who`, for a non-positive or non-finite
// init_scale, growth_factor <= 1, backoff_factor outside (0, 1) or growth_interval < 1.
void check_loss_scaler_options(const GradScalerOptions& o, const char* who);

class GradScaler final : public Optimizer {
 public:
  // Throws std::invalid_argument naming the option for a non-positive scale or
  // interval, growth_factor <= 1 or backoff_factor outside (0, 1).
  GradScaler(std::unique_ptr<Optimizer> inner, std::vector<NamedParameter> params, GradScalerOptions options = {});
  void step() override;
  std::string name() const override { return inner_->name() + "+GradScaler"; }
  int state_tensors_per_parameter() const override { return inner_->state_tensors_per_parameter(); }
  double loss_scale() const override { return scale_; }

  double scale() const { return scale_; }
  // Whether the last step() found an inf/NaN gradient and skipped the update.
  bool last_step_skipped() const { return last_skipped_; }
  std::int64_t skipped_steps() const { return skipped_; }
  // Finite steps since the scale last changed (torch's _growth_tracker).
  std::int64_t growth_tracker() const { return growth_tracker_; }

 private:
  std::unique_ptr<Optimizer> inner_;
  std::vector<NamedParameter> params_;
  GradScalerOptions options_;
  double scale_;
  std::int64_t growth_tracker_ = 0, skipped_ = 0;
  bool last_skipped_ = false;
};

// `inner` wrapped in a GradScaler with PyTorch's defaults.
std::unique_ptr<Optimizer> wrap_with_grad_scaler(std::unique_ptr<Optimizer> inner,
                                                 std::vector<NamedParameter> params);

}  // namespace dpt
