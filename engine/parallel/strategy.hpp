// Strategy: how one training step runs over devices. "single" (one device),
// "dp" (nn.DataParallel semantics) and "ddp" (DistributedDataParallel semantics)
// are written once against Backend, Device and Communicator, so the host, CUDA
// and SimGrid backends all run the same code.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/backend.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/optim/optim.hpp"
#include "engine/parallel/ddp/comm_hook.hpp"

namespace dpt {

enum class StrategyKind { single, data_parallel, ddp };
StrategyKind strategy_kind_from_name(const std::string& name);  // "single" | "dp" | "ddp"
const char* strategy_kind_name(StrategyKind k);

// How DDP treats uneven local batches : PyTorch averages per-rank means, so 3+2 samples give (g_A + g_B)/2, not the full-batch (3 g_A + 2 g_B)/5.
enum class UnevenMode {
  pytorch,   // average of per-rank means, as PyTorch DDP computes (biased when uneven)
  weighted,  // each rank's gradient weighted by its sample count: the full-batch gradient
};

// Builds the model on a device: construction and, when given, --init loading.
using ModelBuilder = std::function<Sequential(Device&)>;
// Builds the optimizer over a model's parameters.
using OptimizerBuilder = std::function<std::unique_ptr<Optimizer>(std::vector<NamedParameter>)>;

struct StrategyOptions {
  StrategyKind kind = StrategyKind::single;
  std::vector<int> device_ids;           // empty: all of the backend's devices (single: device 0)
  std::optional<int> output_device;      // DataParallel: defaults to device_ids[0]
  int dim = 0;                           // DataParallel scatter dim (only 0 is supported)
  double bucket_cap_mb = 25.0;           // DDP (PyTorch's default); first bucket is 1 MiB
  bool gradient_as_bucket_view = false;  // DDP
  bool broadcast_buffers = true;         // DDP
  UnevenMode uneven = UnevenMode::pytorch;
  LossKind loss = LossKind::mse;
  Reduction reduction = Reduction::mean;
  // DataParallel: the module computes its loss itself (a Hugging Face model given
  // labels): each replica's loss on its own chunk in its worker, the outputs still
  // gathered onto the output device (the model returns them with the loss), the
  // step's loss the mean of the replicas' losses (the Trainer's loss.mean()), so no
  // gradient of the gathered outputs is scattered back. false: the loss on the
  // gathered outputs (DataParallel(model)(x), then loss(y, target)).
  bool dp_loss_per_replica = false;
  // DDP gradient accumulation over K micro-batches (ddp_accumulated_step): each
  // micro-batch's loss is divided by K, as the recipe's `loss / K` does, so the K
  // accumulated gradients average to the full batch's.
  int accumulate = 1;
  // DDP register_comm_hook (fp16_compress, bf16_compress, powersgd:r); none by default.
  CommHookSpec comm_hook;
  // The batch stays on the device across steps, as a synthetic benchmark's
  // torch.randn(..., device="cuda") batch or DALI's GPU pipeline leaves it (see
  // InputPlacement): no host-to-device copy once placed. false: every step copies its
  // batch from host memory, as `x.to(device)` on a DataLoader's batch does.
  bool inputs_resident = false;
};

// Moves a step's input rows to a device. Not resident: a copy every call (`x.to(device)`).
// Resident: the first call for a host tensor (the same storage, offset, shape and dtype)
// and device places it; later calls with that tensor return the placed copy, with no
// transfer, as a batch made on the GPU once and reused every step. The placed copies stay
// allocated (they are the resident batch). Safe to call from several ranks' threads (each
// places on its own device; no lock is held across a copy).
class InputPlacement {
 public:
  explicit InputPlacement(bool resident) : resident_(resident) {}
  Tensor to_device(Backend& backend, const Tensor& host, Device& device);

 private:
  struct Placed {
    Tensor host;  // kept alive, so its storage's address is not reused by another tensor
    Device* device;
    Tensor placed;
  };
  bool resident_;
  std::mutex mutex_;
  std::vector<Placed> placed_;
};

// What one step did, for the trainer's log and the step report.
struct StepResult {
  double loss = 0;                               // the loss as the user's script would print it
  std::vector<std::int64_t> samples_per_device;  // batch rows each device processed
  std::vector<std::string> warnings;             // e.g. DDP's uneven-batch bias
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual StrategyKind kind() const = 0;
  // One optimisation step on a global batch held in host memory: x [B, features],
  // target [B, out] (mse) or [B] int64 class labels (ce).
  virtual StepResult train_step(const Tensor& x, const Tensor& target) = 0;
  // The wrapped model (DataParallel's .module; DDP rank 0's model).
  virtual Sequential& module() = 0;
  // The wrapper's state dict: "module."-prefixed names for dp and ddp, plain for single.
  virtual std::vector<std::pair<std::string, Tensor>> state_dict() = 0;
};

std::unique_ptr<Strategy> make_strategy(Backend& backend, const StrategyOptions& options,
                                        const ModelBuilder& build_model, const OptimizerBuilder& build_optimizer);

}  // namespace dpt
