// GradScaler's cost for f16 autocast (torch.cuda.amp.GradScaler): before each
// optimizer step, scaler.unscale_ runs _amp_foreach_non_finite_check_and_unscale_
// over every gradient (read it, multiply by 1/scale, check for inf/NaN, write it
// back) and scaler.update adjusts the scale. The wrapper charges that kernel per
// parameter on the parameter's device, then runs the wrapped optimizer's step.
// It computes nothing: with a finite loss scale of 1 the unscale is the identity,
// so host numerics are unchanged; the step-skip on inf never fires on finite data.
#pragma once
#include <memory>

#include "engine/optim/optim.hpp"

namespace dpt {

std::unique_ptr<Optimizer> wrap_with_grad_scaler(std::unique_ptr<Optimizer> inner,
                                                 std::vector<NamedParameter> params);

}  // namespace dpt
