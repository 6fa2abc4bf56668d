// The performance figures of `dptwin verify`, measured through the Backend
// interface only, so the very same code measures a real machine (host threads,
// CUDA GPUs) and, run on the twin's SimBackend, predicts it:
//   - GEMM rate of each device (kernel_linear_forward, a square f32 GEMM);
//   - memory bandwidth of each device (kernel_copy: bytes read + written / time);
//   - peer copy bandwidth of every ordered device pair (Backend::copy);
//   - collective bus bandwidth over sizes (all_reduce and all_gather, busbw as
//     nccl-tests defines it), timed on rank 0 between barriers as nccl-tests does;
//   - one training step of an MLP on each device alone (single), and under
//     DataParallel and DDP on all devices.
// Each figure is the best (shortest) of `repeats` timed runs after a warm-up.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/backend.hpp"
#include "engine/nn/model.hpp"

namespace dpt::verify {

struct MeasureConfig {
  int devices = 1;                          // devices 0..devices-1 of the backend
  std::int64_t gemm_size = 512;             // M = N = K of the GEMM
  Bytes copy_bytes = 16 * kMiB;             // buffer of the memory and peer copies
  std::vector<Bytes> collective_sizes = {64 * kKiB, 1 * kMiB, 8 * kMiB};  // nccl-tests "size"
  MlpSpec step_model;                       // the training-step model (f32, MSE, SGD)
  std::int64_t batch_per_device = 64;       // per-device batch of the steps (DP global = this x devices)
  int repeats = 3;                          // timed runs per figure (best kept); one warm-up before
};

// Defaults sized for a backend: small on the host (seconds on two cores), large
// enough on GPUs that launch latency does not dominate.
MeasureConfig default_measure_config(const std::string& backend_name, int devices);

struct CollectiveFigure {
  std::string op;              // "all_reduce" | "all_gather"
  Bytes size_bytes = 0;        // nccl-tests' size: the whole buffer (all_gather: the output)
  Seconds time_s = 0;
  BytesPerSecond busbw_Bps = 0;
};

struct PeerFigure {
  int src = 0, dst = 0;
  BytesPerSecond bandwidth_Bps = 0;
};

struct Figures {
  std::vector<std::string> device_names;      // Device::name() of each measured device
  std::vector<FlopsPerSecond> gemm_flops_per_s;  // per device
  std::vector<BytesPerSecond> memory_Bps;        // per device
  std::vector<PeerFigure> peers;                 // every ordered pair src != dst
  std::vector<CollectiveFigure> collectives;     // only with 2+ devices
  std::vector<Seconds> single_step_s;            // per device: one device alone
  Seconds dp_step_s = 0;                         // DataParallel over all devices (0 with one device)
  Seconds ddp_step_s = 0;                        // DDP over all devices (0 with one device)
};

nlohmann::json figures_to_json(const Figures& f);
Figures figures_from_json(const nlohmann::json& j);

// Points where the twin injects a straggler's delay (verify_faults.hpp); real
// backends leave them empty.
struct MeasureHooks {
  std::function<void()> before_parallel_step;         // before each DP/DDP train_step
  std::function<void(int device)> before_single_step; // before each single-device train_step
};

// Which figures to take. The twin measures DP and DDP in separate simulations
// (their host models differ: one process, or one per rank).
struct MeasureParts {
  bool compute = true;      // GEMM rate and memory bandwidth of each device
  bool peers = true;        // peer copies
  bool collectives = true;  // busbw sweeps
  bool single = true;       // single-device steps
  bool dp = true;
  bool ddp = true;
};

Figures measure_figures(Backend& backend, const MeasureConfig& config, const MeasureParts& parts = {},
                        const MeasureHooks& hooks = {});

// "gpu1" style labels for messages: the device's index in the run.
std::string device_label(int index);

}  // namespace dpt::verify
