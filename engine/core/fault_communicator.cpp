#include "engine/core/fault_communicator.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace dpt {
namespace {

class FailedWork : public Work {
 public:
  explicit FailedWork(CollectiveError e) : error_(std::move(e)) {}
  void wait() override { throw error_; }
  bool is_completed() override { return true; }

 private:
  CollectiveError error_;
};

}  // namespace

FaultCommunicator::FaultCommunicator(std::unique_ptr<Communicator> inner, FaultPlan plan)
    : inner_(std::move(inner)), plan_(std::move(plan)) {
  if (!inner_) throw std::invalid_argument("FaultCommunicator: no communicator to wrap");
  if (plan_.rank < 0 || plan_.rank >= inner_->size())
    throw std::invalid_argument(fmt::format("FaultCommunicator: fault rank {} is outside 0..{}", plan_.rank, inner_->size() - 1));
  if (plan_.kind == FaultPlan::Kind::delay && !(plan_.delay_s > 0))
    throw std::invalid_argument(fmt::format("FaultCommunicator: delay must be positive, got {} s", plan_.delay_s));
}

void FaultCommunicator::abort(const std::string& cause) {
  if (auto* a = dynamic_cast<AbortableCommunicator*>(inner_.get())) a->abort(cause);
}

WorkPtr FaultCommunicator::before(const char* collective, Seconds timeout_s) {
  const bool planned = issued_ == plan_.collective_index;
  ++issued_;
  if (!planned) return nullptr;
  if (plan_.kind == FaultPlan::Kind::delay) {
    if (inner_->rank() == plan_.rank) std::this_thread::sleep_for(std::chrono::duration<double>(plan_.delay_s));
    return nullptr;
  }
  // Every rank knows the plan. A barrier first makes the failure land on exactly the
  // planned collective: all ranks have finished the ones before it when the group
  // is aborted, so they succeed and this one fails everywhere.
  try {
    inner_->barrier(BarrierOptions{timeout_s})->wait();
  } catch (const CollectiveError& e) {
    return std::make_shared<FailedWork>(CollectiveError(collective, inner_->rank(), e.cause()));
  }
  if (inner_->rank() != plan_.rank) return nullptr;  // the forwarded collective fails by the abort
  const std::string cause = fmt::format("{} (injected into {} #{})", plan_.cause, collective, plan_.collective_index);
  abort(cause);
  return std::make_shared<FailedWork>(CollectiveError(collective, inner_->rank(), cause));
}

template <typename F> WorkPtr FaultCommunicator::forward(const char* collective, Seconds timeout_s, F&& issue) {
  if (WorkPtr failed = before(collective, timeout_s)) return failed;
  return issue();
}

WorkPtr FaultCommunicator::all_reduce(Tensor& t, const AllReduceOptions& o) {
  return forward("all_reduce", o.timeout, [&] { return inner_->all_reduce(t, o); });
}
WorkPtr FaultCommunicator::broadcast(Tensor& t, const BroadcastOptions& o) {
  return forward("broadcast", o.timeout, [&] { return inner_->broadcast(t, o); });
}
WorkPtr FaultCommunicator::reduce(Tensor& t, const ReduceOptions& o) {
  return forward("reduce", o.timeout, [&] { return inner_->reduce(t, o); });
}
WorkPtr FaultCommunicator::all_gather(Tensor& out, const Tensor& in, const AllGatherOptions& o) {
  return forward("all_gather", o.timeout, [&] { return inner_->all_gather(out, in, o); });
}
WorkPtr FaultCommunicator::reduce_scatter(Tensor& out, const Tensor& in, const ReduceScatterOptions& o) {
  return forward("reduce_scatter", o.timeout, [&] { return inner_->reduce_scatter(out, in, o); });
}
WorkPtr FaultCommunicator::barrier(const BarrierOptions& o) {
  return forward("barrier", o.timeout, [&] { return inner_->barrier(o); });
}

std::vector<std::unique_ptr<Communicator>> wrap_with_faults(std::vector<std::unique_ptr<Communicator>> group,
                                                            const FaultPlan& plan) {
  std::vector<std::unique_ptr<Communicator>> out;
  for (auto& c : group) out.push_back(std::make_unique<FaultCommunicator>(std::move(c), plan));
  return out;
}

}  // namespace dpt
