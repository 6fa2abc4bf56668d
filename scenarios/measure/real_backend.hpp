// The real backends by name, for commands that run on this machine (`train`,
// `bench`, `verify`): "host" (CPU workers) or "cuda" (GPUs, only in a build with
// the CUDA backend).
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "engine/core/backend.hpp"
#include "engine/core/timed_interval.hpp"

namespace dpt {

struct RealBackendOptions {
  std::optional<int> devices;     // host: workers (default 1); cuda: first N GPUs (default all)
  bool allow_tf32 = false;        // cuda: f32 GEMM on TF32 tensor cores
  bool record_timeline = false;   // cuda: CUDA events around every op
  bool pinned_host_memory = false;  // cuda: host tensors in page-locked memory (full-rate copies)
};

// Throws std::invalid_argument for an unknown name ("Invalid backend: X; known:
// host, cuda"), for "cuda" in a build without CUDA, or when no GPU is present
// (with the CUDA runtime's reason).
std::unique_ptr<Backend> make_real_backend(const std::string& name, const RealBackendOptions& options = {});

// True when this build contains the CUDA backend.
bool built_with_cuda();

// Why the named real backend cannot run on this machine, or nullopt when it can:
// cuda in a build without CUDA, or no CUDA device (with the runtime's reason).
// For callers that report "skipped" instead of failing (verify on a CI runner).
std::optional<std::string> real_backend_unavailable(const std::string& name);

// Per-op timing where the backend records it (cuda: CUDA events on every stream).
// start_measuring returns false on backends without it; collect_measured returns
// the intervals since the last start (nullopt without them).
bool start_measuring(Backend& backend);
std::optional<MeasuredStep> collect_measured(Backend& backend, Seconds step_time_s);

// Library versions for reports: cuda gives "cuda_runtime", "cuda_driver", "nccl",
// "cublas"; host gives "gemm" (the GEMM libraries and kernels). Never throws (unknown parts read "unknown").
std::map<std::string, std::string> backend_versions(const std::string& name);

}  // namespace dpt
