// A Communicator that forwards every collective to another one. Tests derive from
// it and override only the collective they observe or corrupt (count the
// all-reduces, add 1 to a result), so a wrapper states just what it changes.
#pragma once
#include <memory>
#include <string>
#include <utility>

#include "engine/core/communicator.hpp"

namespace dpt::test {

class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend_name() const override { return "forwarding(" + inner_->backend_name() + ")"; }
  WorkPtr all_reduce(Tensor& t, const AllReduceOptions& o) override { return inner_->all_reduce(t, o); }
  WorkPtr broadcast(Tensor& t, const BroadcastOptions& o) override { return inner_->broadcast(t, o); }
  WorkPtr reduce(Tensor& t, const ReduceOptions& o) override { return inner_->reduce(t, o); }
  WorkPtr all_gather(Tensor& out, const Tensor& in, const AllGatherOptions& o) override {
    return inner_->all_gather(out, in, o);
  }
  WorkPtr reduce_scatter(Tensor& out, const Tensor& in, const ReduceScatterOptions& o) override {
    return inner_->reduce_scatter(out, in, o);
  }
  WorkPtr barrier(const BarrierOptions& o) override { return inner_->barrier(o); }

 private:
  std::unique_ptr<Communicator> inner_;
};

}  // namespace dpt::test
