// CUDA error paths that run on any machine, GPU or not: the check macros on real
// failing runtime, cuBLAS and NCCL calls, and the backend's no-device error.
#include <gtest/gtest.h>

#include <string>

#include "engine/cuda/cublas_api.hpp"
#include "engine/cuda/cuda_backend.hpp"
#include "engine/cuda/cuda_check.hpp"

using namespace dpt;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(CudaCheck, RuntimeErrorCarriesFileLineExpressionAndCudaText) {
  // One past the last device fails everywhere: without a GPU (or driver) every
  // device index fails, with N GPUs index N is invalid.
  const int bad = cuda_device_count();
  const cudaError_t expected = cudaSetDevice(bad);
  (void)cudaGetLastError();
  ASSERT_NE(expected, cudaSuccess) << "cudaSetDevice(" << bad << ") unexpectedly succeeded";
  int line = 0;
  try {
    line = __LINE__ + 1;
    DPT_CUDA_CHECK(cudaSetDevice(bad));
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, std::string("cuda_nogpu_test.cpp:") + std::to_string(line))) << msg;
    EXPECT_TRUE(contains(msg, "cudaSetDevice(bad)")) << msg;
    EXPECT_TRUE(contains(msg, cudaGetErrorString(expected))) << msg;
    EXPECT_TRUE(contains(msg, cudaGetErrorName(expected))) << msg;
  }
}

TEST(CudaCheck, CublasErrorNamesTheStatus) {
  // A null handle is rejected by cuBLAS on any machine.
  const cublasStatus_t expected = cublas_api().set_stream(nullptr, nullptr);
  ASSERT_NE(expected, CUBLAS_STATUS_SUCCESS);
  try {
    DPT_CUBLAS_CHECK(cublas_api().set_stream(nullptr, nullptr));
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "cuda_nogpu_test.cpp:")) << msg;
    EXPECT_TRUE(contains(msg, cublas_status_name(expected))) << msg;
    EXPECT_TRUE(contains(msg, "cublas_api().set_stream(nullptr, nullptr)")) << msg;
  }
}

TEST(CublasApi, OpensTheLibraryOfTheHeadersMajorVersionOnFirstUse) {
  // Invariant: cublas_api() binds the cuBLAS whose major version the backend was compiled
  // against (the late binding must not pick up another ABI), and reports which file it
  // opened. cuBLAS answers its version without a GPU.
  const CublasApi& api = cublas_api();
  int major = -1;
  ASSERT_EQ(api.get_property(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(major, CUBLAS_VER_MAJOR);
  ASSERT_NE(api.path, nullptr);
  EXPECT_TRUE(contains(api.path, "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR))) << api.path;
  EXPECT_EQ(&cublas_api(), &api);  // opened once
}

TEST(CudaCheck, NcclErrorCarriesNcclText) {
  // NCCL rejects a null communicator in its argument check, before it touches a device,
  // with or without GPUs. (ncclCommInitAll(&comm, 0, nullptr), used here before, fails
  // cleanly only without a GPU: with one H200, NCCL 2.28.3 crashed in it.)
  int count = -1;
  const ncclResult_t expected = ncclCommCount(nullptr, &count);
  ASSERT_EQ(expected, ncclInvalidArgument);
  try {
    DPT_NCCL_CHECK(ncclCommCount(nullptr, &count));
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "cuda_nogpu_test.cpp:")) << msg;
    EXPECT_TRUE(contains(msg, ncclGetErrorString(expected))) << msg;
    EXPECT_TRUE(contains(msg, "ncclCommCount(nullptr, &count)")) << msg;
  }
}

TEST(CudaBackendErrors, NoDeviceOrTooManyDevicesIsAClearError) {
  std::string why;
  const int n = cuda_device_count(&why);
  CudaBackendOptions o;
  o.device_count = n + 1;  // always more than are visible
  try {
    CudaBackend backend(o);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    if (n == 0) {
      // Without a GPU the runtime's own reason is passed on (error 35 without a driver).
      EXPECT_TRUE(contains(msg, "no CUDA device")) << msg;
      EXPECT_TRUE(contains(msg, why)) << msg;
    } else {
      EXPECT_TRUE(contains(msg, std::to_string(n + 1) + " asked for")) << msg;
    }
  }
}

TEST(CudaBackendErrors, DeviceCountIsZeroWithAReasonOrPositive) {
  std::string why;
  const int n = cuda_device_count(&why);
  int raw = 0;
  const cudaError_t e = cudaGetDeviceCount(&raw);
  (void)cudaGetLastError();
  if (e != cudaSuccess) {
    EXPECT_EQ(n, 0);
    EXPECT_TRUE(contains(why, cudaGetErrorString(e))) << why;
  } else {
    EXPECT_EQ(n, raw);
  }
}
