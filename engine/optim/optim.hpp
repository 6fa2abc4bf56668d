// Optimizers with PyTorch's update formulas (torch.optim.SGD, torch.optim.AdamW).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/core/kernels.hpp"
#include "engine/nn/model.hpp"

namespace dpt {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Applies one update to every parameter from its .grad.
  virtual void step() = 0;
  virtual std::string name() const = 0;
  // Bytes of optimizer state per parameter byte (0 SGD, 1 SGD+momentum, 2 AdamW).
  virtual int state_tensors_per_parameter() const = 0;
};

std::unique_ptr<Optimizer> make_sgd(std::vector<NamedParameter> params, const SgdOptions& o);
std::unique_ptr<Optimizer> make_adamw(std::vector<NamedParameter> params, const AdamWOptions& o);

}  // namespace dpt
