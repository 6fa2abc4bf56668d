// A fault-injecting Communicator for tests (as c10d's fake backend): it forwards to
// a real communicator and makes one chosen collective on one chosen rank fail, or
// arrive late, so tests can check that every rank surfaces a CollectiveError.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/core/communicator.hpp"

namespace dpt {

struct FaultPlan {
  enum class Kind {
    fail,   // the collective fails on `rank`; the group is aborted so every rank fails
    delay,  // `rank` issues the collective `delay_s` late (past the others' timeout)
  };
  Kind kind = Kind::fail;
  int rank = 0;                       // the rank that misbehaves
  int collective_index = 0;           // which of that rank's collectives (0 = the first issued)
  Seconds delay_s = 0;                // for Kind::delay
  std::string cause = "injected fault";  // for Kind::fail: the text every rank's error carries
};

class FaultCommunicator : public AbortableCommunicator {
 public:
  FaultCommunicator(std::unique_ptr<Communicator> inner, FaultPlan plan);
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend_name() const override { return "fault(" + inner_->backend_name() + ")"; }
  void abort(const std::string& cause) override;

  WorkPtr all_reduce(Tensor& t, const AllReduceOptions& o) override;
  WorkPtr broadcast(Tensor& t, const BroadcastOptions& o) override;
  WorkPtr reduce(Tensor& t, const ReduceOptions& o) override;
  WorkPtr all_gather(Tensor& out, const Tensor& in, const AllGatherOptions& o) override;
  WorkPtr reduce_scatter(Tensor& out, const Tensor& in, const ReduceScatterOptions& o) override;
  WorkPtr barrier(const BarrierOptions& o) override;

 private:
  // Applies the plan before a collective is forwarded; returns a failed Work when
  // this is the collective that fails on this rank, null otherwise.
  WorkPtr before(const char* collective, Seconds timeout_s);
  template <typename F> WorkPtr forward(const char* collective, Seconds timeout_s, F&& issue);

  std::unique_ptr<Communicator> inner_;
  FaultPlan plan_;
  int issued_ = 0;
};

// Wraps each communicator of a group with the same plan (only plan.rank misbehaves).
std::vector<std::unique_ptr<Communicator>> wrap_with_faults(std::vector<std::unique_ptr<Communicator>> group,
                                                            const FaultPlan& plan);

}  // namespace dpt
