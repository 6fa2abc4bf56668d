// DataParallel: torch.nn.DataParallel's semantics on the engine (as read off
// torch/nn/parallel/data_parallel.py). One process, one worker per used device; per step:
//   scatter (torch.chunk along dim 0) -> replicate (broadcast the primary's
//   parameters, coalesced) -> parallel_apply -> gather on output_device -> loss
//   there -> backward: the gathered gradient is scattered back, each replica runs
//   backward, gradients are reduce-added onto the primary -> the optimizer updates
//   the primary only.
// Because the loss is computed on the gathered output, the gradient equals the
// full-batch gradient for any split, uneven ones included. With
// StrategyOptions::dp_loss_per_replica the module computes its loss in each replica
// (a Hugging Face model given labels): the outputs are still gathered, no gradient is
// scattered back, and the step averages the replicas' mean losses (biased for uneven
// chunks, as in PyTorch).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/parallel/strategy.hpp"

namespace dpt {

class DataParallel : public Strategy {
 public:
  // Throws std::invalid_argument for bad device_ids, output_device or dim != 0.
  DataParallel(Backend& backend, const StrategyOptions& options, const ModelBuilder& build_model,
               const OptimizerBuilder& build_optimizer);
  StrategyKind kind() const override { return StrategyKind::data_parallel; }
  StepResult train_step(const Tensor& x, const Tensor& target) override;
  Sequential& module() override { return primary_; }
  std::vector<std::pair<std::string, Tensor>> state_dict() override;

  const std::vector<int>& device_ids() const { return device_ids_; }
  int output_device() const { return output_device_; }
  // Devices that held a replica in the last step (torch.chunk may use fewer).
  int replicas_last_step() const { return replicas_last_step_; }

 private:
  Backend& backend_;
  StrategyOptions options_;
  std::vector<int> device_ids_;
  int output_device_;
  Sequential primary_;
  std::unique_ptr<Optimizer> optimizer_;
  int replicas_last_step_ = 0;
  InputPlacement inputs_{options_.inputs_resident};  // after options_: initialised from it
};

// Validates options.device_ids against the backend: empty means all devices;
// duplicates and out-of-range indices are rejected naming the flag's value.
std::vector<int> resolve_device_ids(Backend& backend, const std::vector<int>& requested, const char* strategy);

}  // namespace dpt
