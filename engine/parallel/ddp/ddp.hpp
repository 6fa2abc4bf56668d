// DistributedDataParallel: torch DDP's semantics on the engine. One rank per
// device, run as the backend's workers (threads on host and CUDA, actors in the
// twin), each with its own model replica, optimizer and Reducer. Parameters are
// broadcast from rank 0 at construction; gradients are averaged by bucketed
// all-reduce overlapped with backward; every rank then steps its own optimizer, so
// all ranks hold the same parameters.
//
// The global batch of a step is split into contiguous per-rank local batches with
// torch.chunk (rank r gets chunk r), the same split DataParallel uses. A DDP script
// feeds each rank its own slice (usually from a DistributedSampler, whose strided
// assignment `dptwin split --strategy ddp` shows); contiguous chunks make the
// comparison with single-device and DataParallel runs on the same data exact, and
// weighted mode's full-batch gradient is the same whichever rows a rank holds.
// A split that leaves a rank without samples is rejected (PyTorch would produce
// NaN from an empty mean).
//
// Uneven local batches: DDP averages per-rank means, so with 5 samples split 3+2 the
// gradient is (g_A + g_B)/2, not the full-batch (3 g_A + 2 g_B)/5. UnevenMode::pytorch
// (default) reproduces that and reports the bias in StepResult::warnings;
// UnevenMode::weighted scales each rank's loss so the result is the full-batch gradient.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/parallel/strategy.hpp"
#include "engine/parallel/ddp/reducer.hpp"

namespace dpt {

class DistributedDataParallel : public Strategy {
 public:
  // `communicators` replaces the backend's (tests inject a FaultCommunicator); empty: the backend's.
  DistributedDataParallel(Backend& backend, const StrategyOptions& options, const ModelBuilder& build_model,
                          const OptimizerBuilder& build_optimizer,
                          std::vector<std::unique_ptr<Communicator>> communicators = {});
  ~DistributedDataParallel() override;
  StrategyKind kind() const override { return StrategyKind::ddp; }
  // Forward, backward with gradient synchronisation, optimizer step on every rank.
  // Gradients stay in .grad until the next step zeroes them.
  StepResult train_step(const Tensor& x, const Tensor& target) override;
  // Forward and backward inside no_sync(): gradients accumulate locally and are
  // synchronised (with the accumulated sum) by the next train_step, which then
  // does not zero them first. No optimizer step.
  StepResult no_sync_step(const Tensor& x, const Tensor& target);
  Sequential& module() override { return rank_module(0); }
  std::vector<std::pair<std::string, Tensor>> state_dict() override;

  int world_size() const { return static_cast<int>(device_ids_.size()); }
  Sequential& rank_module(int rank);
  const Reducer& reducer(int rank) const;

 private:
  struct Rank;
  StepResult run(const Tensor& x, const Tensor& target, bool sync);

  Backend& backend_;
  StrategyOptions options_;
  std::vector<int> device_ids_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  bool accumulating_ = false;  // a no_sync_step left gradients to keep
  InputPlacement inputs_{options_.inputs_resident};  // after options_: initialised from it
};

}  // namespace dpt
