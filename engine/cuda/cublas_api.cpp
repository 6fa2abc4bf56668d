#include "engine/cuda/cublas_api.hpp"

#include <dlfcn.h>

#include <string>

#include <fmt/format.h>

#include "engine/cuda/cuda_check.hpp"

#ifndef DPT_CUBLAS_DIR
#define DPT_CUBLAS_DIR ""
#endif

namespace dpt {

namespace {

template <typename F>
void bind(void* lib, const char* path, const char* name, F& out) {
  dlerror();
  void* sym = dlsym(lib, name);
  if (!sym) {
    const char* why = dlerror();
    throw CudaError(fmt::format("cuBLAS: {} has no {} ({})", path, name, why ? why : "dlsym returned null"));
  }
  out = reinterpret_cast<F>(sym);
}

CublasApi load() {
  static const std::string soname = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
  static const std::string in_toolkit =
      std::string(DPT_CUBLAS_DIR).empty() ? std::string() : std::string(DPT_CUBLAS_DIR) + "/" + soname;
  std::string tried;
  void* lib = nullptr;
  const char* path = nullptr;
  for (const std::string* candidate : {&soname, &in_toolkit}) {
    if (candidate->empty()) continue;
    lib = dlopen(candidate->c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      path = candidate->c_str();
      break;
    }
    const char* why = dlerror();
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : "; ", *candidate, why ? why : "not found");
  }
  if (!lib)
    throw CudaError(fmt::format("cuBLAS could not be loaded: tried {}. Put the folder holding {} (CUDA {}'s "
                                "toolkit, or the nvidia-cublas wheel's lib folder) on LD_LIBRARY_PATH",
                                tried, soname, CUBLAS_VER_MAJOR));
  CublasApi api{};
  bind(lib, path, "cublasCreate_v2", api.create);
  bind(lib, path, "cublasDestroy_v2", api.destroy);
  bind(lib, path, "cublasSetStream_v2", api.set_stream);
  bind(lib, path, "cublasSetMathMode", api.set_math_mode);
  bind(lib, path, "cublasGemmEx", api.gemm_ex);
  bind(lib, path, "cublasDgemm_v2", api.dgemm);
  bind(lib, path, "cublasGetProperty", api.get_property);
  api.path = path;
  return api;  // the library stays open for the life of the process
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = load();  // a throw leaves it unset: the next call tries again
  return api;
}

}  // namespace dpt
