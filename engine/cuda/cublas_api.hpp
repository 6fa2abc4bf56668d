// cuBLAS, loaded when the CUDA backend first needs it.
//
// libcublasLt, which libcublas pulls in, costs every process that links it about
// 0.06 s and 210 MiB of resident memory in its initialisers, before `main`. Most
// dptwin runs never touch a GPU (the twin, the host engine), so the CUDA backend
// opens libcublas.so.<major> (the major version of the headers it was compiled
// against) with dlopen on first use: through the usual search (LD_LIBRARY_PATH,
// the program's RUNPATH, the system's cache), then in the toolkit folder CMake found
// it in. The functions are cuBLAS's own; only their binding is late.
#pragma once
#include <cublas_v2.h>

namespace dpt {

struct CublasApi {
  // cublasGemmEx is overloaded in C++ (a wrapper taking the old cudaDataType compute
  // type): the library's own entry point, spelled out.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

  decltype(&::cublasCreate_v2) create;
  decltype(&::cublasDestroy_v2) destroy;
  decltype(&::cublasSetStream_v2) set_stream;
  decltype(&::cublasSetMathMode) set_math_mode;
  GemmEx gemm_ex;
  decltype(&::cublasDgemm_v2) dgemm;
  decltype(&::cublasGetProperty) get_property;
  const char* path;  // the file that was opened, for reports
};

// The loaded library's entry points; opens it on the first call (thread-safe).
// Throws CudaError naming each file tried and the loader's reason when it cannot be
// opened or lacks one of the functions.
const CublasApi& cublas_api();

}  // namespace dpt
