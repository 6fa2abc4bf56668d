// The public fidelity table: published measurements of real machines (one YAML
// file per source in scenarios/measured/public/), each with the twin's prediction
// of the same configuration and the signed error.
//
// A source file:
//
//   schema_version: 1
//   source:
//     url: https://...             # where the figures were read
//     title: "..."                 # optional
//     date: 2024-10-01             # publication (or measurement) date
//     hardware: "8x A100-SXM4-80GB, NVSwitch gen2"
//     software: "NCCL 2.18.5, CUDA 12.5"
//     notes: "..."                 # optional
//   entries:
//     - id: nd-a100-v4-allreduce-16MiB
//       hardware_file: dgx-a100     # library name or YAML path (relative to this file)
//       overrides: {gpu.memory: 40 GiB}    # optional hardware fields, as a scenario's
//       nccl_version: "2.18.5"     # optional: the NCCL the source ran (hardware nccl_version)
//       collective: {op: all_reduce, bytes: 16777216, dtype: float, gpus: 8, nodes: 1}
//       measured: {busbw_GB_per_s: 109.22}
//     - id: dle-rn50-a100-8gpu-tf32
//       hardware_file: dgx-a100
//       training: {model: resnet50, strategy: ddp, gpus: 8, nodes: 1, batch_per_device: 256,
//                  measured_precision: tf32, precision: tf32, optimizer: sgd_momentum}
//       measured: {samples_per_s: 7248}       # training also takes memory_format: channels_last
//                                             # and inputs: device (a batch resident on the GPUs)
//
// Collectives are predicted as `dptwin bench --backend sim` runs them (the same plan,
// CollectiveGroup and timing of warm-up then timed iterations); training steps as
// `dptwin predict` runs them (resolve_point, then predict_point). Unknown keys, missing
// keys and bad values are errors naming the file, line and key.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/units.hpp"
#include "scenarios/scenario/scenario.hpp"
#include "sim/collectives/collectives.hpp"

namespace dpt::fidelity {

// The figure a source reports, with its unit in the name.
enum class Metric { busbw_GB_per_s, algbw_GB_per_s, time_us, samples_per_s };
const char* metric_name(Metric m);

struct CollectiveConfig {
  sim::CollectiveOp op = sim::CollectiveOp::all_reduce;
  Bytes bytes = 0;                   // nccl-tests' size column: the whole buffer
  std::string dtype = "float";       // nccl-tests type name
  Bytes element_bytes = 4;
  int gpus = 0;                      // ranks in all
  int nodes = 1;
  std::optional<std::string> algorithm;  // forced (NCCL_ALGO), when the source forced it
  int gpus_per_thread = 1;           // nccl-tests -g: GPUs one host thread drives (1: a process per GPU)
  std::optional<int> iters;          // nccl-tests -n, when the source states it (else fidelity's 4)
};

struct TrainingConfig {
  std::string model;                 // model library name
  std::string strategy;              // single | dp | ddp
  int gpus = 1;                      // GPUs per node
  int nodes = 1;
  std::int64_t batch_per_device = 0;
  std::string measured_precision;    // what the source ran: fp32, tf32, amp, ...
  // The training precision the twin runs (--precision's names): what the source ran,
  // e.g. tf32 for DeepLearningExamples' "TF32" columns, f16-amp for "AMP"/"mixed". The
  // older key twin_dtype (f32 or f64) maps to the precision of that dtype.
  std::string precision = "f32";
  std::string optimizer = "sgd_momentum";
  int accumulation_steps = 1;        // micro-batches per optimizer step (no_sync in between)
  // DataParallel's loss: "gathered" (on the output device, after gather) or "per_replica"
  // (the module computes it, as a Hugging Face model given labels; the Trainer averages).
  std::string dp_loss = "gathered";
  // The model's memory format as the source ran it (contiguous, or channels_last where
  // its recipe converts the model, e.g. DeepLearningExamples' memory_format nhwc).
  std::string memory_format = "contiguous";
  // Where the source's batch lived: "host" (a DataLoader's batch copied each step) or
  // "device" (resident: a synthetic benchmark's on-GPU batch, DALI's GPU pipeline).
  std::string inputs = "host";
  // Its kernels as the source's PyTorch ran them: for_loop (torch.optim before 2.0, BertAdam),
  // foreach (torch.optim on CUDA since 2.0), fused (apex FusedAdam/FusedLAMB, fused=True).
  std::string optimizer_impl = "foreach";
};

struct Entry {
  std::string id;
  std::string file;                  // the source file
  int line = 0;                      // the entry's line in it
  std::string hardware_file;
  std::vector<scenario::Override> overrides;
  std::optional<CollectiveConfig> collective;
  std::optional<TrainingConfig> training;
  Metric metric = Metric::busbw_GB_per_s;
  double measured = 0;
  std::string note;
  // The run's NCCL_P2P_DISABLE: its hardware file's nccl_p2p_disable with the overrides
  // applied (resolve_run_settings; false until then).
  bool nccl_p2p_disable = false;
};

struct Source {
  std::string file;
  std::string url, title, date, hardware, software, notes;
  std::vector<Entry> entries;
};

// Parses one source file's text; `file` names it in errors. Throws std::invalid_argument
// "FILE:LINE: KEY: what is wrong".
Source parse_source(const std::string& text, const std::string& file);
Source load_source(const std::filesystem::path& path);
// Every *.yaml in `dir`, sorted by name; entry ids must be unique across the table.
std::vector<Source> load_table(const std::filesystem::path& dir);

// The class an entry's error is summarised in.
enum class EntryClass { collective_small, collective_mid, collective_large, training, training_shm };
const char* entry_class_name(EntryClass c);
// Collectives: small up to 64 KiB, large from 256 MiB, mid between. Training: training_shm
// where the run set NCCL_P2P_DISABLE=1 (the entry's overrides set nccl_p2p_disable true, or
// resolve_run_settings found its hardware file does) on more than one GPU of a node, so its
// gradients crossed host memory (NCCL's SHM transport), a mechanism the twin models least
// well (README, "Fidelity"); training otherwise. The class follows the run's setting: a run
// that went through host memory for want of P2P without setting it (none in the table yet)
// stays in training.
EntryClass classify(const Entry& e);
// Sets the nccl_p2p_disable of each entry `which` takes (every entry when empty) from its
// hardware file with its overrides (a file without overrides loaded once; an entry with
// overrides, its own). Throws as loading does.
void resolve_run_settings(std::vector<Source>& sources, const scenario::Library& lib,
                          const std::function<bool(const Entry&)>& which = {});
// Whether the class is one of training's (training or training_shm).
bool is_training(EntryClass c);

struct Result {
  const Entry* entry = nullptr;
  double predicted = 0;              // in the entry's metric
  double error = 0;                  // (predicted - measured) / measured, signed
  std::string detail;                // what the twin ran (algorithm, step time, ...)
};

// An entry's hardware file with its overrides applied; its hardware_file is a library name
// or a path relative to `source_dir`. Throws as loading does, at the entry's line.
sim::HardwareSpec entry_hardware(const Entry& e, const scenario::Library& lib, const std::filesystem::path& source_dir);

// The GPU model (the hardware file's gpu.name, overrides applied) an entry ran on; its
// hardware_file is a library name or a path relative to `source_dir`. Throws as loading does.
std::string entry_gpu_name(const Entry& e, const scenario::Library& lib, const std::filesystem::path& source_dir);

// entry_gpu_name over a table, each hardware file (with an entry's overrides, that entry's
// own) loaded once. Throws as loading does (nothing is kept for a file that failed).
class EntryGpuNames {
 public:
  explicit EntryGpuNames(const scenario::Library& lib) : lib_(lib) {}
  const std::string& of(const Entry& e, const std::filesystem::path& source_dir);

 private:
  const scenario::Library& lib_;
  std::map<std::pair<std::filesystem::path, std::string>, std::string> names_;
};

// The twin's prediction of one entry, in the entry's metric. `source_dir` resolves a
// relative hardware_file. Forks one simulation (call from a single-threaded process).
Result predict_entry(const Entry& e, const scenario::Library& lib, const std::filesystem::path& source_dir);

// One entry to predict, with the folder of its source file (for a relative hardware_file).
struct Job {
  const Entry* entry = nullptr;
  std::filesystem::path source_dir;
  // With several jobs at a time the costliest start first (ties in the table's order), so
  // one long simulation does not start last and finish alone; see cost_hint.
  double cost_hint = 0;
};
// A rough cost of predicting an entry, for the order jobs start in: a collective's bytes
// times its simulated calls (the twin pipelines pieces of a fixed size, so its events grow
// with both); 0 for training entries (each under a second).
double cost_hint(const Entry& e);
// How one job is predicted: predict_entry in the CLI; tests pass their own.
using Predictor = std::function<Result(const Entry&, const std::filesystem::path&)>;

// Predicts every job, `jobs` at a time. jobs == 1: one after another in this process.
// jobs > 1: each job in a forked process of its own (SimGrid runs one engine per process,
// so threads cannot share the work), its result handed back through a file; a stop
// signal ends the workers. Either way the results come in the jobs' order, whatever order
// they finish in, and are the same numbers (doubles round-trip exactly). A job that
// throws: no new job starts, the running ones finish, and the first failed job in the
// table's order among those that ran is rethrown with its message (std::invalid_argument
// for bad input, else std::runtime_error), as jobs == 1 throws the first failed job's.
// jobs < 1: std::invalid_argument.
// `on_done`, when given, is called once each time an entry's prediction has come back (for a
// progress bar), in the order they finish.
std::vector<Result> predict_entries(const std::vector<Job>& jobs_to_run, int jobs, const Predictor& predict,
                                    const std::function<void()>& on_done = {});

struct ClassSummary {
  EntryClass cls;
  int count = 0;
  double median_abs_error = 0;
  double median_error = 0;   // signed: > 0 where the twin runs fast (throughput) or reads high
  double max_abs_error = 0;
  std::string worst_id;
};
std::vector<ClassSummary> summarise(const std::vector<Result>& results);
double median(std::vector<double> v);

}  // namespace dpt::fidelity
