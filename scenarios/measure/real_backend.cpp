#include "scenarios/measure/real_backend.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "engine/host/host_backend.hpp"
#include "engine/host/host_gemm.hpp"
#if DPT_HAVE_CUDA
#include "engine/cuda/cuda_backend.hpp"
#include "engine/cuda/cuda_check.hpp"
#endif

namespace dpt {

bool built_with_cuda() { return DPT_HAVE_CUDA != 0; }

bool start_measuring(Backend& backend) {
#if DPT_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaBackend*>(&backend)) {
    cuda->start_timelines();
    return true;
  }
#endif
  (void)backend;
  return false;
}

std::optional<MeasuredStep> collect_measured(Backend& backend, Seconds step_time_s) {
#if DPT_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaBackend*>(&backend)) return cuda->collect_timelines(step_time_s);
#endif
  (void)backend;
  (void)step_time_s;
  return std::nullopt;
}

std::map<std::string, std::string> backend_versions(const std::string& name) {
  std::map<std::string, std::string> out;
  if (name == "host") {
    try {
      out["gemm"] = host_gemm_info().summary();
    } catch (const std::exception& e) {
      out["gemm"] = fmt::format("unknown ({})", e.what());
    }
  }
#if DPT_HAVE_CUDA
  if (name == "cuda") {
    const CudaVersions v = cuda_versions();
    out["cuda_runtime"] = v.runtime;
    out["cuda_driver"] = v.driver;
    out["nccl"] = v.nccl;
    out["cublas"] = v.cublas;
  }
#endif
  return out;
}

std::optional<std::string> real_backend_unavailable(const std::string& name) {
  if (name != "cuda") return std::nullopt;
#if DPT_HAVE_CUDA
  std::string why;
  if (cuda_device_count(&why) > 0) return std::nullopt;
  return fmt::format("no CUDA device ({})", why.empty() ? "cudaGetDeviceCount found none" : why);
#else
  return std::string("this dptwin was built without the CUDA backend");
#endif
}

std::unique_ptr<Backend> make_real_backend(const std::string& name, const RealBackendOptions& options) {
  if (name == "host") return std::make_unique<HostBackend>(options.devices.value_or(1));
  if (name == "cuda") {
#if DPT_HAVE_CUDA
    CudaBackendOptions o;
    o.device_count = options.devices;
    o.device.allow_tf32 = options.allow_tf32;
    o.device.record_timeline = options.record_timeline;
    o.pinned_host_memory = options.pinned_host_memory;
    return std::make_unique<CudaBackend>(o);
#else
    throw std::invalid_argument(
        "backend 'cuda': this dptwin was built without the CUDA backend (configure with -DDPT_WITH_CUDA=ON where "
        "nvcc, cuBLAS and NCCL are installed)");
#endif
  }
  throw std::invalid_argument(fmt::format("Invalid backend: {}; known: host, cuda", name));
}

}  // namespace dpt
