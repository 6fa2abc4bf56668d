// OS threads, std::mutex and the steady clock for the real backends (see threaded_backend.hpp).
#include "engine/core/threaded_backend.hpp"

#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace dpt {

void ThreadedBackend::parallel_for(int n, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  auto run = [&](int i) {
    try {
      on_worker_start(i);
      fn(i);
    } catch (...) {
      errors[static_cast<size_t>(i)] = std::current_exception();
    }
  };
  if (n == 1 && inline_single_worker_) {
    run(0);
  } else {
    std::vector<std::thread> workers;
    workers.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) workers.emplace_back(run, i);
    for (auto& w : workers) w.join();
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

namespace {
class StdMutex : public BackendMutex {
 public:
  void lock() override { mu_.lock(); }
  void unlock() override { mu_.unlock(); }

 private:
  std::mutex mu_;
};
}  // namespace

std::unique_ptr<BackendMutex> ThreadedBackend::make_mutex() { return std::make_unique<StdMutex>(); }

Seconds ThreadedBackend::steady_clock_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

}  // namespace dpt
