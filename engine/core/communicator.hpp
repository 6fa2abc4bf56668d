// Communicator: collectives among the ranks of a group, shaped like c10d's Backend.
// Pure virtual: a backend that lacks a collective fails to compile, not at run time.
// Implementations: host (ring over shared memory between rank threads), NCCL,
// SimGrid (ring/tree/in-switch on the modelled links), and a fault injector.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>

#include "engine/core/tensor.hpp"
#include "engine/core/units.hpp"

namespace dpt {

enum class ReduceOp { sum, avg, max, min };
const char* reduce_op_name(ReduceOp op);

struct AllReduceOptions { ReduceOp op = ReduceOp::sum; Seconds timeout = 300.0; };
struct BroadcastOptions { int root = 0; Seconds timeout = 300.0; };
struct ReduceOptions { int root = 0; ReduceOp op = ReduceOp::sum; Seconds timeout = 300.0; };
struct AllGatherOptions { Seconds timeout = 300.0; };
struct ReduceScatterOptions { ReduceOp op = ReduceOp::sum; Seconds timeout = 300.0; };
struct BarrierOptions { Seconds timeout = 300.0; };

// A failed or timed-out collective. what() names the collective, the rank and the cause.
class CollectiveError : public std::runtime_error {
 public:
  CollectiveError(const std::string& collective, int rank, const std::string& cause);
  const std::string& collective() const { return collective_; }
  int rank() const { return rank_; }
  const std::string& cause() const { return cause_; }

 private:
  std::string collective_;
  int rank_;
  std::string cause_;
};

// An asynchronous collective in flight; wait() returns when it finished on this
// rank, or throws CollectiveError.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Collectives on one rank's tensors; all ranks must call them in the same order.
  // Collectives issued by one rank run in issue order (as on one NCCL stream).
  virtual WorkPtr all_reduce(Tensor& t, const AllReduceOptions& o) = 0;
  virtual WorkPtr broadcast(Tensor& t, const BroadcastOptions& o) = 0;
  virtual WorkPtr reduce(Tensor& t, const ReduceOptions& o) = 0;
  // out holds size() * in.numel() elements, rank r's input at offset r * in.numel().
  virtual WorkPtr all_gather(Tensor& out, const Tensor& in, const AllGatherOptions& o) = 0;
  // in holds size() * out.numel() elements; rank r receives the reduction of block r.
  virtual WorkPtr reduce_scatter(Tensor& out, const Tensor& in, const ReduceScatterOptions& o) = 0;
  virtual WorkPtr barrier(const BarrierOptions& o) = 0;
  virtual std::string backend_name() const = 0;  // "host-ring", "nccl", "sim", ...
};

// A communicator whose group can be aborted from one rank (like ncclCommAbort):
// every rank blocked in or later issuing a collective throws CollectiveError
// naming `cause`. The fault-injecting communicator uses it to fail all ranks at once.
class AbortableCommunicator : public Communicator {
 public:
  virtual void abort(const std::string& cause) = 0;
};

}  // namespace dpt
