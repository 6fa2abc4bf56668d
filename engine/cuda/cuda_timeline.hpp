// Measured timing on a CUDA device: a pair of CUDA events around every op (and
// around every phase a caller marks), resolved into seconds after the device has
// synchronised. Events are recorded on the stream the op runs on, so the times are
// the GPU's, not the host's enqueue times.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "engine/core/device.hpp"
#include "engine/core/units.hpp"
#include "engine/core/timed_interval.hpp"

namespace dpt {

class CudaTimeline {
 public:
  explicit CudaTimeline(int device);
  ~CudaTimeline();
  CudaTimeline(const CudaTimeline&) = delete;
  CudaTimeline& operator=(const CudaTimeline&) = delete;

  // Records the origin on `stream`: every interval is measured from it. Clears
  // earlier intervals.
  void start(cudaStream_t stream);
  bool started() const;

  // Opens an interval: records its start event on `stream`; returns a handle for end().
  int begin(cudaStream_t stream, const OpCost& cost, int stream_id, bool is_phase);
  void end(int handle, cudaStream_t stream);

  // Resolves the events into seconds. The caller has synchronised the device.
  std::vector<TimedInterval> resolve();

 private:
  cudaEvent_t take_event();
  struct Pending {
    TimedInterval interval;
    cudaEvent_t start = nullptr, end = nullptr;
  };
  int device_;
  mutable std::mutex mu_;
  cudaEvent_t origin_ = nullptr;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> spare_;  // events reused across steps: creating one costs microseconds
};

}  // namespace dpt
