#include "engine/cuda/cuda_timeline.hpp"

#include <fmt/format.h>

#include "engine/cuda/cuda_check.hpp"

namespace dpt {

CudaTimeline::CudaTimeline(int device) : device_(device) {}

CudaTimeline::~CudaTimeline() {
  // Destructors must not throw; events of a lost device are simply dropped.
  auto destroy = [](cudaEvent_t e) { if (e) (void)cudaEventDestroy(e); };
  destroy(origin_);
  for (auto& p : pending_) { destroy(p.start); destroy(p.end); }
  for (auto e : spare_) destroy(e);
}

cudaEvent_t CudaTimeline::take_event() {
  if (!spare_.empty()) {
    cudaEvent_t e = spare_.back();
    spare_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  DPT_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void CudaTimeline::start(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : pending_) { spare_.push_back(p.start); spare_.push_back(p.end); }
  pending_.clear();
  if (!origin_) origin_ = take_event();
  DPT_CUDA_CHECK(cudaEventRecord(origin_, stream));
}

bool CudaTimeline::started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return origin_ != nullptr;
}

int CudaTimeline::begin(cudaStream_t stream, const OpCost& cost, int stream_id, bool is_phase) {
  std::lock_guard<std::mutex> lock(mu_);
  Pending p;
  p.interval.name = cost.name;
  p.interval.kind = cost.kind;
  p.interval.is_phase = is_phase;
  p.interval.device = device_;
  p.interval.stream = stream_id;
  p.interval.flops = cost.flops;
  p.interval.bytes = cost.bytes_read + cost.bytes_written;
  p.start = take_event();
  p.end = take_event();
  DPT_CUDA_CHECK(cudaEventRecord(p.start, stream));
  pending_.push_back(p);
  return static_cast<int>(pending_.size()) - 1;
}

void CudaTimeline::end(int handle, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  DPT_CUDA_CHECK(cudaEventRecord(pending_.at(static_cast<size_t>(handle)).end, stream));
}

std::vector<TimedInterval> CudaTimeline::resolve() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!origin_) throw std::logic_error(fmt::format("cuda:{}: timeline resolved before start()", device_));
  std::vector<TimedInterval> out;
  out.reserve(pending_.size());
  for (auto& p : pending_) {
    float start_ms = 0, end_ms = 0;  // CUDA event resolution is about half a microsecond
    DPT_CUDA_CHECK(cudaEventElapsedTime(&start_ms, origin_, p.start));
    DPT_CUDA_CHECK(cudaEventElapsedTime(&end_ms, origin_, p.end));
    TimedInterval t = p.interval;
    t.start_s = start_ms * 1e-3;
    t.end_s = end_ms * 1e-3;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace dpt
