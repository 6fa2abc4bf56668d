// The part of a Backend that real hardware shares (host and CUDA): per-device work on
// OS threads, one std::mutex per BackendMutex, and wall-clock time. The twin runs its
// workers as SimGrid actors instead and does not use this.
#pragma once
#include <functional>
#include <memory>

#include "engine/core/backend.hpp"

namespace dpt {

class ThreadedBackend : public Backend {
 public:
  // parallel_for starts one OS thread per index; the first exception thrown by any
  // worker (lowest index) is rethrown after every worker has finished.
  void parallel_for(int n, const std::function<void(int)>& fn) override;
  std::unique_ptr<BackendMutex> make_mutex() override;

 protected:
  // `inline_single_worker`: parallel_for(1, fn) runs fn on the calling thread (the host
  // backend; CUDA starts a thread so that worker setup does not touch the caller's state).
  explicit ThreadedBackend(bool inline_single_worker) : inline_single_worker_(inline_single_worker) {}
  // Runs on worker i's thread before fn(i); its exceptions count as fn's.
  virtual void on_worker_start(int i) { (void)i; }
  // Seconds on the steady clock (an arbitrary origin; differences are wall-clock time).
  static Seconds steady_clock_s();

 private:
  bool inline_single_worker_;
};

}  // namespace dpt
