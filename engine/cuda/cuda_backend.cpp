#include "engine/cuda/cuda_backend.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "engine/cuda/cublas_api.hpp"
#include "engine/cuda/cuda_check.hpp"
#include "engine/cuda/cuda_raii.hpp"
#include "engine/cuda/nccl_communicator.hpp"

namespace dpt {

namespace {
// Host memory in page-locked pages: DMA reads it directly, at full link rate.
class PinnedHostDevice : public HostDevice {
 public:
  PinnedHostDevice() : HostDevice(-1, DeviceKind::cpu_host) {}

 protected:
  void* raw_allocate(Bytes n) override {
    if (n == 0) return nullptr;
    void* p = nullptr;
    DPT_CUDA_CHECK(cudaMallocHost(&p, static_cast<size_t>(n)));
    return p;
  }
  void raw_free(void* p, Bytes) override {
    if (p) (void)cudaFreeHost(p);
  }
};
}  // namespace

CudaBackend::CudaBackend(const CudaBackendOptions& options)
    : ThreadedBackend(/*inline_single_worker=*/false), staging_chunk_bytes_(options.staging_chunk_bytes) {
  if (options.pinned_host_memory) host_ = std::make_unique<PinnedHostDevice>();
  else host_ = std::make_unique<HostDevice>(-1, DeviceKind::cpu_host);
  std::string why;
  const int visible = cuda_device_count(&why);
  if (visible == 0) throw std::invalid_argument("cuda backend: no CUDA device: " + why);
  const int n = options.device_count.value_or(visible);
  if (n < 1 || n > visible)
    throw std::invalid_argument(
        fmt::format("cuda backend: --devices {} asked for, {} CUDA device(s) visible", n, visible));
  if (staging_chunk_bytes_ <= 0)
    throw std::invalid_argument("cuda backend: staging_chunk_bytes must be positive");
  for (int i = 0; i < n; ++i) devices_.push_back(std::make_unique<CudaDevice>(i, options.device));
  peer_.assign(static_cast<size_t>(n), std::vector<bool>(static_cast<size_t>(n), false));
  for (int i = 0; i < n; ++i) {
    CudaDeviceGuard guard(i);
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      int can = 0;
      DPT_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, i, j));
      if (!can) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(j, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else DPT_CUDA_CHECK(e);
      peer_[static_cast<size_t>(i)][static_cast<size_t>(j)] = true;
    }
  }
}

CudaBackend::~CudaBackend() {
  for (auto& d : devices_) {
    try {
      d->synchronize();
    } catch (...) {  // a failed device must not turn teardown into std::terminate
    }
  }
}

CudaDevice& CudaBackend::cuda_device(int index) {
  if (index < 0 || index >= device_count())
    throw std::out_of_range(fmt::format("cuda backend has devices 0..{}, asked for {}", device_count() - 1, index));
  return *devices_[static_cast<size_t>(index)];
}

bool CudaBackend::peer_access(int from, int to) const {
  return from == to || peer_.at(static_cast<size_t>(from)).at(static_cast<size_t>(to));
}

void CudaBackend::copy_device_to_device(CudaDevice& s, CudaDevice& d, const void* src, void* dst, Bytes n) {
  if (&s == &d) {
    CudaDeviceGuard guard(d.index());
    DPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n), cudaMemcpyDeviceToDevice, d.stream()));
    return;
  }
  if (peer_access(d.index(), s.index())) {
    // Ordered on both streams without blocking the host: the copy (on the
    // destination's stream) starts after the source's pending writes, and the
    // source's later work starts after the copy has read the data.
    CudaEvent src_ready, copied;
    {
      CudaDeviceGuard guard(s.index());
      src_ready.record(s.stream());
    }
    CudaDeviceGuard guard(d.index());
    DPT_CUDA_CHECK(cudaStreamWaitEvent(d.stream(), src_ready.get(), 0));
    DPT_CUDA_CHECK(cudaMemcpyPeerAsync(dst, d.index(), src, s.index(), static_cast<size_t>(n), d.stream()));
    copied.record(d.stream());
    DPT_CUDA_CHECK(cudaStreamWaitEvent(s.stream(), copied.get(), 0));
    return;
  }
  // No peer access (e.g. GPUs under different root complexes): stage through
  // pinned host memory chunk by chunk, device to host then host to device.
  std::lock_guard<std::mutex> lock(staging_mu_);
  if (staging_.size_bytes() == 0) staging_ = PinnedBuffer(staging_chunk_bytes_);
  const auto* from = static_cast<const char*>(src);
  auto* to = static_cast<char*>(dst);
  for (Bytes off = 0; off < n; off += staging_chunk_bytes_) {
    const auto chunk = static_cast<size_t>(std::min(staging_chunk_bytes_, n - off));
    {
      CudaDeviceGuard guard(s.index());
      DPT_CUDA_CHECK(cudaMemcpyAsync(staging_.data(), from + off, chunk, cudaMemcpyDeviceToHost, s.stream()));
      DPT_CUDA_CHECK(cudaStreamSynchronize(s.stream()));
    }
    CudaDeviceGuard guard(d.index());
    DPT_CUDA_CHECK(cudaMemcpyAsync(to + off, staging_.data(), chunk, cudaMemcpyHostToDevice, d.stream()));
    DPT_CUDA_CHECK(cudaStreamSynchronize(d.stream()));  // the staging buffer is reused by the next chunk
  }
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.dtype() != dst.dtype() || src.numel() != dst.numel())
    throw std::invalid_argument(fmt::format("copy {} {} -> {} {}: dtype or size differ", dtype_name(src.dtype()),
                                            shape_to_string(src.shape()), dtype_name(dst.dtype()),
                                            shape_to_string(dst.shape())));
  const Bytes n = src.size_bytes();
  if (n == 0 || src.data() == dst.data()) return;
  const bool src_gpu = src.device().kind() == DeviceKind::cuda, dst_gpu = dst.device().kind() == DeviceKind::cuda;
  if (!src_gpu && !dst_gpu) {
    std::memcpy(dst.data(), src.data(), static_cast<size_t>(n));
  } else if (src_gpu && dst_gpu) {
    copy_device_to_device(cuda_device(src.device().index()), cuda_device(dst.device().index()), src.data(),
                          dst.data(), n);
  } else if (dst_gpu) {
    // Host to device: the host buffer may be reused as soon as we return, so wait.
    CudaDevice& d = cuda_device(dst.device().index());
    CudaDeviceGuard guard(d.index());
    DPT_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), static_cast<size_t>(n), cudaMemcpyHostToDevice, d.stream()));
    DPT_CUDA_CHECK(cudaStreamSynchronize(d.stream()));
  } else {
    // Device to host: ordered after the kernels that produced src, then waited for.
    CudaDevice& s = cuda_device(src.device().index());
    CudaDeviceGuard guard(s.index());
    DPT_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), static_cast<size_t>(n), cudaMemcpyDeviceToHost, s.stream()));
    DPT_CUDA_CHECK(cudaStreamSynchronize(s.stream()));
  }
}

void CudaBackend::on_worker_start(int i) {
  // Worker i drives GPU i (DataParallel's parallel_apply, DDP's ranks); the device is
  // thread state in the CUDA runtime, so each thread sets its own.
  DPT_CUDA_CHECK(cudaSetDevice(i % device_count()));
}

std::vector<std::unique_ptr<Communicator>> CudaBackend::make_communicators(const std::vector<int>& devices) {
  std::vector<CudaDevice*> devs;
  for (int d : devices) devs.push_back(&cuda_device(d));
  return make_nccl_communicators(devs);
}

Seconds CudaBackend::now() {
  for (auto& d : devices_) d->synchronize();
  return steady_clock_s();
}

void CudaBackend::start_timelines() {
  for (auto& d : devices_) d->synchronize();
  for (auto& d : devices_) {
    CudaDeviceGuard guard(d->index());
    d->set_record_timeline(true);
    d->timeline().start(d->stream());
  }
}

MeasuredStep CudaBackend::collect_timelines(Seconds step_time_s) {
  MeasuredStep m;
  m.step_time_s = step_time_s;
  for (auto& d : devices_) {
    CudaDeviceGuard guard(d->index());
    DPT_CUDA_CHECK(cudaDeviceSynchronize());  // compute and communication streams
    auto ops = d->timeline().resolve();
    m.intervals.insert(m.intervals.end(), ops.begin(), ops.end());
    m.device_names.push_back(d->name());
  }
  return m;
}

CudaVersions cuda_versions() {
  auto cuda_version = [](int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); };
  CudaVersions out;
  int runtime = 0, driver = 0, nccl = 0;
  out.runtime = cudaRuntimeGetVersion(&runtime) == cudaSuccess ? cuda_version(runtime) : "unknown";
  out.driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0 ? cuda_version(driver) : "none";
  (void)cudaGetLastError();
  // NCCL codes are major*10000 + minor*100 + patch since 2.9.
  out.nccl = ncclGetVersion(&nccl) == ncclSuccess
                 ? fmt::format("{}.{}.{}", nccl / 10000, (nccl % 10000) / 100, nccl % 100)
                 : "unknown";
  int major = 0, minor = 0, patch = 0;
  try {
    const CublasApi& blas = cublas_api();
    if (blas.get_property(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        blas.get_property(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        blas.get_property(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
      out.cublas = fmt::format("{}.{}.{}", major, minor, patch);
    else
      out.cublas = "unknown";
  } catch (const CudaError& e) {
    out.cublas = fmt::format("not loaded ({})", e.what());
  }
  return out;
}

}  // namespace dpt
