// The step report: what one training step cost, predicted by the twin or measured
// on a real backend, in one versioned JSON format ("dptwin.step_report/1") so the
// two can be laid side by side. The report renderer, `dptwin predict`, the host and
// CUDA backends and the lesson all read and write this struct.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/core/units.hpp"
#include "engine/io/atomic_file.hpp"

namespace dpt {

inline constexpr const char* kStepReportSchema = "dptwin.step_report/1";

// Where the step time went, in seconds of the step's critical path. The parts add
// up to at most step_time_s (work that overlaps is counted once, in the first part
// that covers it, in this order: compute, optimizer, exposed communication, dispatch).
struct StepBreakdown {
  Seconds compute = 0;                // forward, loss and backward kernels on the busiest device
  Seconds exposed_communication = 0;  // copies and collectives not hidden behind compute
  Seconds dispatch = 0;               // host-side dispatch not hidden behind device work
  Seconds optimizer = 0;              // the optimizer's update kernels
  Seconds interference = 0;           // compute slowed by the NCCL kernels it overlapped (SMs, bandwidth)
  // The part of exposed_communication when only copies between host memory and the GPU ran
  // (the batch's x.to(device)), no collective: not all-reduce time.
  Seconds exposed_host_copy = 0;
};

struct DeviceReport {
  std::string device;                               // "sim:gpu0", "host:1", "cuda:0"
  Bytes peak_memory_bytes = 0;                      // highest live bytes during the step
  std::map<std::string, Bytes> memory_breakdown_bytes;  // by MemoryCategory name, at the peak
  std::optional<Bytes> capacity_bytes;              // the device's memory, when known
  Seconds busy_s = 0;                               // time its compute stream ran kernels (optimizer included)
  // busy_s by op class ("gemm", "conv", "attention", "norm", "elementwise", "embedding",
  // "loss", "optimizer"; classes with no kernel time left out). Predicted reports only;
  // empty in measured ones and in reports written before it (the JSON key is optional).
  std::map<std::string, Seconds> kernel_time_by_class_s;
};

class Device;
// A device's name, peak memory, breakdown at the peak (the categories that held bytes) and
// capacity; busy_s is left to the caller, which knows the window.
DeviceReport device_memory_report(Device& device);

struct LinkReport {
  std::string name;        // the platform's link name, e.g. "nvlink:gpu0-gpu1:up"
  Bytes bytes = 0;         // bytes that crossed it during the step
  Seconds busy_s = 0;      // bytes / bandwidth: the time it would need at full rate
  double utilisation = 0;  // busy_s / step_time_s, in [0, 1]
};

// A prediction that did not fit: which device ran out and what filled it.
struct OutOfMemoryReport {
  std::string device;
  std::string message;                              // the OutOfMemory exception's text
  Bytes requested_bytes = 0;                        // the allocation that failed (0 when unknown)
  std::map<std::string, Bytes> memory_breakdown_bytes;  // live bytes by category when it failed
  std::optional<Bytes> capacity_bytes;
};

struct StepReport {
  std::string source = "predicted";  // "predicted" (the twin) or "measured" (host, CUDA)
  std::string backend;               // "sim", "host", "cuda"
  std::string hardware;              // hardware file name, or the machine measured on
  std::string model;                 // model name, e.g. "resnet50", "mlp:64-256-10"
  std::string strategy;              // "single", "dp" or "ddp"
  int devices = 1;
  int nodes = 1;
  std::string dtype = "f32";
  // The training precision (engine/core/precision.hpp: "f32", "tf32", "bf16-amp", ...)
  // of a prediction. Null for measured reports. Optional in the JSON (absent = null).
  std::optional<std::string> precision;
  // The model's memory format when it is not PyTorch's default ("channels_last"). Null:
  // contiguous (NCHW), or a measured report. Optional in the JSON (absent = null).
  std::optional<std::string> memory_format;
  // The optimizer a prediction stepped ("sgd", "sgd_momentum", "adamw": its state is part of
  // every GPU's memory). Null for measured reports. Optional in the JSON (absent = null).
  std::optional<std::string> optimizer;
  // Its kernels as PyTorch runs them ("foreach", "for_loop", "fused"; OptimizerImpl); null in
  // reports written before 2026-12-07 and in measured ones.
  std::optional<std::string> optimizer_impl;
  // Where the input batch lives when not copied from the host each step ("device": resident
  // on the GPUs, as a synthetic benchmark's or DALI's batch). Null: copied every step, or a
  // measured report. Optional in the JSON (absent = null).
  std::optional<std::string> inputs;
  // DDP gradient accumulation: micro-batches per step (batch_global counts them all).
  // Null: none. Optional in the JSON (absent = null).
  std::optional<int> accumulate;
  // DDP comm hook ("fp16_compress", "powersgd:4"). Null: none. Optional in the JSON.
  std::optional<std::string> comm_hook;
  // Activation checkpointing: layers per checkpoint_sequential segment (1: every layer).
  // Null: none. Optional in the JSON.
  std::optional<std::int64_t> checkpoint_layers;
  // DDP's bucket cap in MiB (bucket_cap_mb). Null: not DDP, or a report written before it.
  std::optional<double> bucket_cap_mb;
  // The hardware overrides the prediction ran with ("nvswitch.link_bandwidth = 10 GB/s");
  // empty: none. Null: not recorded (a measured report, or one written before the key).
  std::optional<std::vector<std::string>> hardware_overrides;
  std::int64_t batch_global = 0;      // samples in one step over all devices
  std::int64_t batch_per_device = 0;  // the largest per-device batch (DataParallel chunk, DDP rank batch)
  // Null when the step did not run (out of memory).
  std::optional<Seconds> step_time_s;
  StepBreakdown breakdown_s;
  std::optional<double> throughput_samples_per_s;
  // Tokens in one sample, for a model whose sample is a sequence (null otherwise): tokens/s
  // is throughput_samples_per_s x this.
  std::optional<double> tokens_per_sample;
  // The same model and per-device batch on one device, with the same K micro-batches
  // (K forward and backward passes, one optimizer update); null when not computed.
  std::optional<Seconds> single_device_step_time_s;
  // throughput / (devices x single-device throughput); null when not computed.
  std::optional<double> scaling_efficiency;
  std::vector<DeviceReport> devices_detail;
  // Devices whose engine work the twin simulated when fewer than `devices`: node 0's
  // ranks standing for every node's identical ranks (predict.hpp, symmetric_ranks);
  // the other devices' details are copies of the simulated ones. Null: all simulated
  // (and always for measured reports). Optional in the JSON (absent = null).
  std::optional<int> simulated_devices;
  std::vector<LinkReport> links;
  std::string trace;                  // path of the Chrome trace, empty when none was written
  std::optional<OutOfMemoryReport> out_of_memory;
  std::vector<std::string> warnings;
};

nlohmann::json step_report_to_json(const StepReport& r);
// Parses and validates a report. Throws std::invalid_argument naming `where` (a
// file name, or "<json>") and the offending key on a wrong schema, a missing or
// mistyped field, or an unknown key.
StepReport step_report_from_json(const nlohmann::json& j, const std::string& where = "<json>");

// Writes the report as indented JSON with write_file_atomic (atomically, through links;
// straight through to a FIFO or pipe), creating missing directories.
void write_step_report(const StepReport& r, const std::string& path);
StepReport read_step_report(const std::string& path);

}  // namespace dpt
