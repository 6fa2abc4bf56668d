// Gradient accumulation with DDP, as the PyTorch recipe writes it:
//
//   for k, (x, y) in enumerate(micro_batches):
//       ctx = model.no_sync() if k < K - 1 else nullcontext()
//       with ctx:
//           (loss_fn(model(x), y) / K).backward()
//   optimizer.step(); optimizer.zero_grad()
//
// The first K-1 backward passes keep their gradients local (no all-reduce); the
// last one all-reduces the accumulated sum, so a step costs one all-reduce per
// bucket instead of K. The strategy must be built with StrategyOptions::accumulate
// = K (its losses are divided by K), so K equal micro-batches give the gradient of
// one step on their concatenation.
#pragma once
#include "engine/parallel/ddp/ddp.hpp"

namespace dpt {

// One optimizer step over `x` [B, ...] and `target` [B, ...] taken as K contiguous
// micro-batches of B / K rows (K = ddp's StrategyOptions::accumulate): K-1
// no_sync_steps, then a train_step. Throws std::invalid_argument when B is not a
// multiple of K. The result's loss is the mean of the micro-batches' losses (the
// full batch's for equal micro-batches) and its samples per device are summed.
StepResult ddp_accumulated_step(DistributedDataParallel& ddp, int accumulate, const Tensor& x, const Tensor& target);

}  // namespace dpt
