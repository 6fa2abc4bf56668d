// Backend: a set of devices, the copies between them, the concurrency that runs
// per-device work, and the communicators among them. Strategies never create
// threads or lock OS mutexes: they ask the backend (host and CUDA use OS threads;
// the twin uses SimGrid actors, which must never block on an OS primitive).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/communicator.hpp"
#include "engine/core/device.hpp"
#include "engine/core/tensor.hpp"

namespace dpt {

// A mutex that is safe on the backend's workers (std::mutex on host and CUDA,
// a SimGrid mutex in the twin).
class BackendMutex {
 public:
  virtual ~BackendMutex() = default;
  virtual void lock() = 0;
  virtual void unlock() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "host", "cuda", "sim"
  virtual int device_count() const = 0;
  virtual Device& device(int index) = 0;
  // CPU memory where input data is loaded and where results are read back.
  virtual Device& host_memory() = 0;

  // Copies src into dst (same dtype and element count) between any two devices:
  // peer copy, host-device copy, or staging through host memory where peer access
  // is not possible. Returns when dst holds the data.
  virtual void copy(const Tensor& src, Tensor& dst) = 0;

  // Runs fn(i) for i in [0, n) concurrently, one worker each (DataParallel's
  // parallel_apply workers, DDP's ranks), and waits for all. If workers throw, the
  // exception of the lowest-numbered failing worker is rethrown on the caller
  // after all have finished.
  virtual void parallel_for(int n, const std::function<void(int)>& fn) = 0;

  // One communicator per listed device, rank r on devices[r]. The returned
  // communicators are used by the workers of a parallel_for.
  virtual std::vector<std::unique_ptr<Communicator>> make_communicators(const std::vector<int>& devices) = 0;

  virtual std::unique_ptr<BackendMutex> make_mutex() = 0;

  // The backend's clock: wall clock on host, CUDA-event time on CUDA, simulated time in the twin.
  virtual Seconds now() = 0;

  // Host-side work that is not a kernel (Python-level dispatch in PyTorch terms):
  // the twin charges the hardware file's per-op dispatch cost, serialised under
  // a GIL when the host is so configured; real backends do nothing.
  virtual void host_dispatch(int ops) { (void)ops; }
};

// Convenience: a new tensor on `device` holding a copy of `src`.
Tensor copy_to(Backend& backend, const Tensor& src, Device& device, MemoryCategory category);

}  // namespace dpt
