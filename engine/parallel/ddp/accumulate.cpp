#include "engine/parallel/ddp/accumulate.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dpt {

StepResult ddp_accumulated_step(DistributedDataParallel& ddp, int accumulate, const Tensor& x, const Tensor& target) {
  if (accumulate < 1) throw std::invalid_argument(fmt::format("accumulate must be at least 1, got {}", accumulate));
  const std::int64_t batch = x.ndim() >= 1 ? x.dim(0) : 0;
  if (batch % accumulate != 0 || batch == 0)
    throw std::invalid_argument(fmt::format("gradient accumulation: a batch of {} does not split into {} equal "
                                            "micro-batches",
                                            batch, accumulate));
  const std::int64_t micro = batch / accumulate;
  StepResult total;
  double loss_sum = 0;
  for (int k = 0; k < accumulate; ++k) {
    const Tensor xk = x.slice_rows(k * micro, micro), tk = target.slice_rows(k * micro, micro);
    // The recipe's loss / K: the strategy's losses are already divided by K, so the
    // micro-batch's own loss is K times what it reports.
    StepResult r = k + 1 < accumulate ? ddp.no_sync_step(xk, tk) : ddp.train_step(xk, tk);
    loss_sum += r.loss;
    if (total.samples_per_device.empty()) total.samples_per_device.assign(r.samples_per_device.size(), 0);
    for (size_t i = 0; i < r.samples_per_device.size(); ++i) total.samples_per_device[i] += r.samples_per_device[i];
    total.warnings.insert(total.warnings.end(), r.warnings.begin(), r.warnings.end());
  }
  total.loss = loss_sum;  // K micro-batch losses each divided by K: their mean
  return total;
}

}  // namespace dpt
