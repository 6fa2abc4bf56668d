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

// How the update's kernels run: the same numerics, the costs of a PyTorch implementation
// (what the twin charges; host and CUDA devices run dptwin's own kernel whichever):
//   per_parameter: dptwin's own kernel, one fused launch per parameter (4 tensors read and 3
//     written for AdamW; the engine's default);
//   for_loop: PyTorch's single-tensor loop (torch.optim's default before 2.0, BertAdam and
//     other hand-written loops): per AdamW parameter 9 kernels reading 14 and writing 9 of its
//     tensors (mul_, mul_, add_, mul_, addcmul_, sqrt, div, add_, addcdiv_); per SGD-momentum
//     parameter 3 kernels, 5 read and 3 written; plain SGD 1 kernel, 2 and 1;
//   foreach: the same ops as torch._foreach_* over all parameters (torch.optim's default on
//     CUDA since 2.0), each launched as multi_tensor_apply groups them (multi_tensor_launches);
//   fused: one multi-tensor kernel (fused=True, apex's FusedAdam/FusedSGD): AdamW reads 4 and
//     writes 3, SGD-momentum 3 and 2.
// Sources: torch/optim/adamw.py and sgd.py of PyTorch 1.13 (_single_tensor_*, _multi_tensor_*:
// the op lists above; 2.x's foreach AdamW folds mul_ and add_ into one lerp_, 2 of 23
// tensor passes); aten/src/ATen/native/cuda/MultiTensorApply.cuh (chunks of 65,536 elements,
// at most 320 blocks and depth_to_max_tensors {110, 64, 48, 36, 30} per launch).
enum class OptimizerImpl { per_parameter, for_loop, foreach, fused };
const char* optimizer_impl_name(OptimizerImpl i);  // "per_parameter" | "for_loop" | "foreach" | "fused"
// Parses a name; throws std::invalid_argument naming the value and the allowed names.
OptimizerImpl parse_optimizer_impl(const std::string& name);
// The kernels multi_tensor_apply launches for one foreach op of `depth` tensor lists (1-5)
// over tensors of these element counts, in order: a launch when 320 chunks of 65,536
// elements are queued, when the depth's tensor limit is reached at a tensor's last chunk,
// or at the end (a tensor cut by the block limit carries over to the next launch).
// `scalar_list`: an op taking a list of scalars (depth_to_max_tensors_scalarlist: 96 at depth 1).
int multi_tensor_launches(const std::vector<std::int64_t>& numels, int depth, bool scalar_list = false);
// The same launches, each counted on the tensor whose chunk fires it (the final one on the
// last non-empty tensor); they sum to multi_tensor_launches.
std::vector<int> multi_tensor_launches_by_tensor(const std::vector<std::int64_t>& numels, int depth,
                                                 bool scalar_list = false);

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

std::unique_ptr<Optimizer> make_sgd(std::vector<NamedParameter> params, const SgdOptions& o,
                                    OptimizerImpl impl = OptimizerImpl::per_parameter);
std::unique_ptr<Optimizer> make_adamw(std::vector<NamedParameter> params, const AdamWOptions& o,
                                      OptimizerImpl impl = OptimizerImpl::per_parameter);

}  // namespace dpt
