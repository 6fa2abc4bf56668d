// The lesson's claims ("Multi-GPU training with DataParallel", listed in the README) as
// checked verdicts. Each scenarios/lesson/*.yaml file states one claim and how to
// check it; `dptwin lesson` runs them and prints each claim, PASS or FAIL, and
// the numbers behind the verdict.
//
// Schema (unknown keys are errors naming the file, line and key):
//   schema_version: 1
//   claim: "DDP scales near-linearly: >= 90 % on 8 NVLink GPUs (ResNet-50)"
//   lesson_claim: 7          # the claim's number in the README's list
//   check: ddp_near_linear   # what runs (below)
//   hardware: dgx-a100       # hardware library name or path (all checks but split)
//   model: resnet50          # model library name, path or mlp:IN-...-OUT
//   devices: 8               # GPUs (split, memory and scaling checks)
//   devices_sweep: [1, 2, 4, 8]   # dp_scaling_falls_behind only
//   batch: 64                # global batch (split)
//   batch_per_device: 32     # per-GPU batch (the predictions)
//   threshold: 0.9           # the number the verdict compares against
//
// Checks:
//   split                  DataParallel run for real on the host backend: the batch is
//                          split as torch.chunk splits it (`batch` over `devices`).
//   dp_gpu0_extra_memory   DataParallel predicted: GPU 0's peak exceeds every other GPU's.
//   dp_gpu0_oom_first      At `batch_per_device`, DataParallel runs out of memory on GPU 0
//                          while DDP with the same per-GPU batch fits on every GPU.
//   dp_scaling_falls_behind  DataParallel's scaling efficiency falls as GPUs are added and,
//                          at the largest count, is below `threshold` while DDP's is not.
//   ddp_near_linear        DDP's scaling efficiency on `devices` GPUs is >= `threshold`.
//   dp_two_gpus_acceptable DataParallel's throughput on 2 GPUs is within `threshold`
//                          (a fraction, 0.15 = 15 %) of DDP's.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dpt::lesson {

struct Claim {
  std::string file;
  std::string claim;
  int lesson_claim = 0;
  std::string check;
  std::string hardware;
  std::string model;
  std::optional<int> devices;
  std::vector<int> devices_sweep;
  std::optional<std::int64_t> batch;
  std::optional<std::int64_t> batch_per_device;
  std::optional<double> threshold;
};

struct Verdict {
  std::string file;
  std::string claim;
  bool pass = false;
  std::string numbers;  // what was measured or predicted, in words and figures
};

// Where the library is: hardware/, models/ and lesson/ (scenarios/ in the source tree).
struct LessonLibrary {
  std::filesystem::path hardware_dir;
  std::filesystem::path models_dir;
};

// Loads and validates one claim file (std::invalid_argument "FILE:LINE: key: what").
Claim load_claim(const std::filesystem::path& path);
// Every *.yaml in `dir`, in the lesson's order (lesson_claim, then file name).
std::vector<Claim> load_claims(const std::filesystem::path& dir);
// Runs the check. Throws std::invalid_argument for a claim the library cannot resolve.
Verdict evaluate(const Claim& claim, const LessonLibrary& lib);

}  // namespace dpt::lesson
