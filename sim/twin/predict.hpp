// predict_step: the twin's answer to "how long does one training step take on this
// machine?". It runs the real strategy code (make_strategy: single, DataParallel or
// DDP) on the SimBackend in a forked child (one SimGrid Engine per process), after
// warm-up steps (DDP rebuilds its buckets after the first step), and measures the
// steady-state step: its time and breakdown, per-device peak memory and breakdown
// (from the engine's own allocations), link utilisation, and the single-device
// baseline for scaling efficiency. Out of memory is a result, not a crash: the
// report names the device and what filled it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/parallel/strategy.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_backend.hpp"
#include "sim/twin/step_report.hpp"

namespace dpt {

struct PredictConfig {
  StrategyKind strategy = StrategyKind::ddp;
  int devices = 1;  // GPUs in all (the world size); devices / nodes per node
  int nodes = 1;    // nodes used (the hardware is resized to this many)
  // Exactly one of these: the global batch of one step (as a DataParallel user
  // writes it) or the per-rank batch (as a DDP script writes it).
  std::optional<std::int64_t> batch_global;
  std::optional<std::int64_t> batch_per_device;
  DType dtype = DType::f32;  // the inputs' and (without a precision) the model's dtype
  // The training precision; none: the dtype's (f32: PyTorch defaults, f64). With one,
  // the SimDevices charge each op class at its compute type and `dtype` should be
  // precision_parameter_dtype(precision) (make_cost_only_model's parameters).
  std::optional<Precision> precision;
  // The model's memory format, for the report (the model builder applies it to the layers).
  MemoryFormat memory_format = MemoryFormat::contiguous;
  // The batch stays on the devices across steps (StrategyOptions::inputs_resident: a
  // synthetic benchmark's on-GPU batch, DALI): placed during the warm-up step, so the
  // measured step copies nothing from the host. false: each step copies its batch.
  bool inputs_resident = false;
  // DDP gradient accumulation: K micro-batches per optimizer step, the first K-1
  // under no_sync (ddp_accumulated_step). The batch fields describe one micro-batch;
  // the report's batch_global and throughput count every sample of the step.
  int accumulate = 1;
  // DDP register_comm_hook: the compress hooks all-reduce half-precision copies of the
  // buckets with cast kernels around them; PowerSGD all-reduces the uncompressed
  // tensors, P and Q, with its matmuls and orthogonalisations (comm_hook.hpp).
  CommHookSpec comm_hook;
  // Activation checkpointing (Sequential::set_checkpoint): segments of this many
  // layers, all but the last recomputed in backward; 0: none.
  size_t checkpoint_layers = 0;
  double bucket_cap_mb = 25.0;  // DDP, PyTorch's default
  // DataParallel: the module computes its loss in each replica (StrategyOptions::dp_loss_per_replica).
  bool dp_loss_per_replica = false;
  bool numeric = false;         // true: compute for real (small models); false: shape-only
  int warmup_steps = 1;         // steps before the measured one (DDP's buckets are rebuilt after step 1)
  std::string trace_path;       // Chrome trace of the measured step; empty: none
  std::string model_name;       // for the report
  std::int64_t input_features = 0;   // per-sample input size the model takes
  std::int64_t output_features = 0;  // per-sample output size (the classes of the cross-entropy loss)
  OptimizerBuilder optimizer;        // default: SGD (lr 0.01, no momentum)
  bool single_device_baseline = true;  // also predict one device for scaling efficiency
  // Multi-node shape-only DDP with equal batches: simulate node 0's ranks only and let
  // them stand for every node's (symmetric_ranks_apply says when). Every rank of a
  // homogeneous cluster then does the same work at the same times, so node 0's ranks
  // are the others' twins; collectives are still timed, and their link traffic
  // accounted, for all ranks (CollectiveGroup's participants). Cost: one node's engine
  // work instead of every rank's. false: simulate every rank (what the tests compare).
  bool symmetric_ranks = true;
  // The report's per-link usage (StepReport::links): every link direction that carried
  // traffic. false: none, for a caller that prints only the summary (at 32,768 GPUs the
  // ~262,000 links took about a sixth of the prediction).
  bool link_usage = true;
};

// Whether predict_step simulates only node 0's ranks for `c` (see symmetric_ranks):
// DDP, shape-only, more than one node, more ranks than the collectives simulate
// message by message (CollectiveSettings::exact_max_ranks), every rank the same batch.
bool symmetric_ranks_apply(const PredictConfig& c);

// The global and per-device batch of a config on `world` devices: DataParallel
// chunks a global batch (torch.chunk: ceil(B/N) per device); DDP ranks each take
// batch_per_device (from a global batch: ceil(B/N), as DistributedSampler pads).
// Throws std::invalid_argument when neither or both are set, or one is < 1.
std::pair<std::int64_t, std::int64_t> predict_batches(const PredictConfig& c);

// Runs the prediction (forks twice: the configuration and its single-device
// baseline). Throws std::invalid_argument for an impossible configuration (more
// GPUs than the hardware has, devices not a multiple of nodes, ...).
// A fitting step whose fullest GPU has less than this share of its memory free gets a
// warning: the twin counts tensors, not the CUDA context, library workspaces or the caching
// allocator's fragmentation (a judgement of the margin they need, not a measured figure).
inline constexpr double kMemoryHeadroomShare = 0.05;
// A prediction warns that its GEMMs ran at efficiency.gemm's default (no op_efficiency.gemm for
// their compute type in the hardware file) where they took at least this share of a GPU's
// kernel time.
inline constexpr double kUnmeasuredGemmShare = 0.10;
StepReport predict_step(const sim::HardwareSpec& hw, const ModelBuilder& build_model, const PredictConfig& c);

// The report and the totals behind the step-time bounds the tests check.
struct PredictDetail {
  StepReport report;
  Seconds dispatch_total_s = 0;       // host dispatch charged during the measured step, all actors
  Seconds communication_total_s = 0;  // durations of its copies and collectives (per rank), summed
};
PredictDetail predict_step_detailed(const sim::HardwareSpec& hw, const ModelBuilder& build_model,
                                    const PredictConfig& c);

// One GPU's rates from the hardware file: peaks, bandwidth, efficiencies per op class,
// launch latency, capacity (nccl_channels left 0: they depend on the GPUs used).
SimGpuRates sim_gpu_rates(const sim::HardwareSpec& hw);

// The SimMachine for GPUs `gpus` (global indices) of a built platform: rates from
// the hardware file with its efficiency fields, copies and collectives on the
// platform's links (h4a's collectives).
SimMachine sim_machine_from_platform(sim::Platform& platform, const std::vector<int>& gpus);

// The global GPU indices a run on `devices` GPUs over `nodes` nodes uses:
// devices / nodes consecutive GPUs on each node.
std::vector<int> predict_gpu_indices(const sim::HardwareSpec& hw, int devices, int nodes);

}  // namespace dpt
