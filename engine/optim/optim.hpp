// Optimizers with PyTorch's update formulas (torch.optim.SGD, torch.optim.AdamW).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/core/kernels.hpp"
#include "engine/nn/model.hpp"

namespace dpt {

// The optimizers by name: plain SGD, SGD with momentum (one state tensor per parameter),
// AdamW (two). The trainer runs sgd (with an optional momentum) and adamw; scenarios
// name all three to size optimizer state.
enum class OptimizerKind { sgd, sgd_momentum, adamw };
const char* optimizer_kind_name(OptimizerKind k);  // "sgd" | "sgd_momentum" | "adamw"
// Parses a name; throws std::invalid_argument naming the value and the allowed names.
OptimizerKind parse_optimizer_kind(const std::string& name);
// Optimizer state tensors per parameter: 0 (SGD), 1 (momentum buffer), 2 (AdamW moments).
int optimizer_state_tensors(OptimizerKind k);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Applies one update to every parameter from its .grad.
  virtual void step() = 0;
  virtual std::string name() const = 0;
  // Bytes of optimizer state per parameter byte (0 SGD, 1 SGD+momentum, 2 AdamW).
  virtual int state_tensors_per_parameter() const = 0;
  // The factor the loss's gradient is multiplied by before backward: 1, or a
  // GradScaler's current scale (scaler.scale(loss).backward()).
  virtual double loss_scale() const { return 1.0; }
};

std::unique_ptr<Optimizer> make_sgd(std::vector<NamedParameter> params, const SgdOptions& o);
std::unique_ptr<Optimizer> make_adamw(std::vector<NamedParameter> params, const AdamWOptions& o);

}  // namespace dpt
