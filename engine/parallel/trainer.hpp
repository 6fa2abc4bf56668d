// The training loop behind `dptwin train`: builds the model (from a seed or an
// --init state dict), takes each step's batch from the data in order, runs the
// chosen strategy and reports the loss of every step.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/backend.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/io/safetensors.hpp"
#include "engine/parallel/strategy.hpp"

namespace dpt {

// The optimizers the trainer runs (OptimizerKind, engine/optim/optim.hpp): "sgd" (with
// SgdOptions' momentum) or "adamw"; throws naming the value otherwise.
OptimizerKind optimizer_kind_from_name(const std::string& name);

struct TrainConfig {
  MlpSpec model;                                 // widths, activation, LayerNorm
  LossKind loss = LossKind::mse;
  Reduction reduction = Reduction::mean;
  OptimizerKind optimizer = OptimizerKind::sgd;
  SgdOptions sgd;                                // used when optimizer == sgd
  AdamWOptions adamw;                            // used when optimizer == adamw
  std::int64_t batch = 32;                       // global batch of one step (all devices together)
  int steps = 10;
  std::uint64_t seed = 0;                        // model initialisation and synthetic data
  std::optional<DType> dtype;                    // explicit --dtype; otherwise --init's dtype, else f32
  bool shuffle = false;                          // permute the samples each pass (epoch) over the data
  StrategyOptions strategy;                      // kind, devices, DDP options (loss and reduction are set from above)
  std::optional<std::string> init_path;          // safetensors state dict to start from
  // Removed from every --init key that starts with it before the strict load, as
  // torch.nn.modules.utils.consume_prefix_in_state_dict_if_present: "module." starts a
  // single-device run from a DataParallel/DDP checkpoint. Empty: dp and ddp load a file
  // whose every key has "module." into the wrapper (as DataParallel(model).load_state_dict
  // does), a plain file into the module; single loads the file as it is.
  std::string init_strip_prefix;
  std::optional<std::string> data_path;          // safetensors with "x" [N, in] and "y"
  std::optional<std::string> checkpoint_path;    // where the final state dict is written
  std::int64_t synthetic_samples = 1024;         // data set size when no data_path is given
  // torch.autocast's low type for every Linear (bf16-amp: bf16; f16-amp: f16, with a
  // GradScaler around the optimizer, as PyTorch's f16 recipe); f32 master weights.
  std::optional<DType> autocast;
  // Activation checkpointing (Sequential::set_checkpoint): 0 none, N layers per segment.
  size_t checkpoint_segment_layers = 0;
};

// Samples held in host memory: x [N, in] floating; y [N, out] (mse) or [N] int64 (ce).
struct Dataset {
  Tensor x, y;
  std::int64_t samples() const { return x.dim(0); }
};

// A data set generated from the seed: x ~ N(0, 1); a fixed random linear "teacher"
// A [out, in] gives regression targets y = x A^T (mse) or class labels argmax(x A^T) (ce).
Dataset make_synthetic_dataset(Backend& backend, const MlpSpec& spec, LossKind loss, DType dtype,
                               std::int64_t samples, std::uint64_t seed);
// Reads tensors "x" and "y" from a safetensors file and checks them against the
// model and loss (widths, dtype, label range); errors name the file and tensor.
// Integer labels stored as I32 are widened to int64.
Dataset load_dataset(Backend& backend, const std::string& path, const MlpSpec& spec, LossKind loss, DType dtype);

// Which samples step `step` (0-based) takes: positions [step*batch, (step+1)*batch)
// of the sample stream, which runs over the data again and again (wrapping to the
// start). Without shuffle each pass is 0..N-1 in order; with shuffle pass e is a
// permutation drawn from (seed, e).
std::vector<std::int64_t> batch_indices(std::int64_t step, std::int64_t batch, std::int64_t samples, bool shuffle,
                                        std::uint64_t seed);

// The dtype of a state-dict file: that of its floating tensors, which must agree.
DType state_dict_dtype(const SafetensorsFile& file);

struct StepLog {
  int step = 0;            // 1-based
  double loss = 0;
  Seconds step_s = 0;      // the backend's clock around train_step
  const StepResult* result = nullptr;
};

struct TrainResult {
  DType dtype = DType::f32;              // the dtype the run used
  std::int64_t data_samples = 0;         // size of the data set the steps drew from
  std::vector<double> losses;            // one per step
  std::vector<Seconds> step_s;           // one per step
  std::vector<std::string> warnings;     // distinct warnings the strategy raised, in order of first appearance
  Elements parameters = 0;
  // f16-amp: the GradScaler's (rank 0's) loss scale after the last step and the
  // steps it skipped on an inf/NaN gradient.
  std::optional<double> loss_scale;
  std::int64_t skipped_steps = 0;
};

// Runs config.steps steps. `on_step` is called after every step. The data comes
// from config.data_path, else from make_synthetic_dataset.
TrainResult train(Backend& backend, const TrainConfig& config, const std::function<void(const StepLog&)>& on_step = {});
// The same with the data given in memory (tests; data already loaded).
TrainResult train_on(Backend& backend, const TrainConfig& config, const Dataset& data,
                     const std::function<void(const StepLog&)>& on_step = {});

}  // namespace dpt
