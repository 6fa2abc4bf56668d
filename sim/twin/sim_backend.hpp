// SimBackend: the twin's Backend. Devices are SimDevices on a SimGrid platform;
// parallel_for runs its workers as SimGrid actors; copies are SimGrid
// communications on the modelled links (peer to peer, or staged through host
// memory where the hardware has no peer access); communicators reduce for real
// in numeric mode and charge the collectives' time on the links; now() is the
// SimGrid clock.
//
// Everything here runs inside SimGrid actors (see sim_run_in_actor): actors are
// cooperative and never block on an OS primitive, so the backend's mutex is a
// SimGrid mutex and every wait is a SimGrid wait.
//
// Host dispatch: each op costs the hardware's per-op dispatch time on the actor
// that issues it. Without a GIL the cost is charged lazily (added to the actor's
// own clock and slept only before the actor next interacts with the simulation),
// so a step of a 1,024-rank model is cheap. Under a GIL every dispatch holds one
// SimGrid mutex shared by the actors of a process: DataParallel's workers are
// threads of one Python process; DDP's ranks are processes of their own.
#pragma once
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/backend.hpp"
#include "engine/core/collective.hpp"
#include "sim/twin/sim_device.hpp"

#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Mutex.hpp>

namespace dpt {

class ChromeTrace;

// Times collectives among a fixed set of GPUs on the platform. Every rank's actor
// calls run(rank, call) with the same calls in the same order; run blocks that actor
// (in simulated time only) until the collective finished on that rank.
// What the collective model chose for one call, for the trace's args; empty (and
// 0 channels) where the model does not say.
struct SimCollectiveChoice {
  std::string algorithm;  // "ring", "tree", "nvls", "nvls_tree"
  std::string protocol;   // "Simple", "LL", "LL128"
  int channels = 0;
};

class SimCollectiveGroup {
 public:
  virtual ~SimCollectiveGroup() = default;
  virtual void run(int rank, const CollectiveCall& call) = 0;
  virtual SimCollectiveChoice choice(const CollectiveCall& call) const = 0;
};

struct SimGpu {
  simgrid::s4u::Host* host = nullptr;  // the GPU's endpoint in the platform
  simgrid::s4u::Host* cpu = nullptr;   // host memory its copies use; its rank's host actor runs here
  int node = 0;
  SimGpuRates rates;
};

// The machine the backend runs on, built from a hardware spec and its platform
// (sim_machine_from_platform in predict.hpp); tests may build one by hand.
struct SimMachine {
  std::string name;  // hardware name for reports
  std::vector<SimGpu> gpus;
  Seconds dispatch_cost_s = 0;  // host-side cost per op (Python and framework dispatch)
  bool gil = false;             // dispatch serialised per process, as under Python's GIL
  Seconds worker_start_cost_s = 0;  // starting one parallel_for worker, charged on the caller
  // Whether GPU a copies to GPU b directly (otherwise staged through host memory).
  std::function<bool(int, int)> peer_to_peer;
  // The rate of a GPU-to-GPU copy staged through host memory (no peer access): the
  // driver's pipelined staging reaches less than either leg's link (sim::staged_unidirectional_rate).
  // 0: only the legs' links bound it.
  BytesPerSecond staged_copy_Bps = 0;
  // Starts a transfer of n bytes between two endpoints as a SimGrid comm.
  std::function<simgrid::s4u::CommPtr(simgrid::s4u::Host*, simgrid::s4u::Host*, Bytes)> transfer_async;
  // The collective timer for ranks on these GPUs (rank r on gpus[r]).
  std::function<std::shared_ptr<SimCollectiveGroup>(const std::vector<int>&)> make_collective_group;
};

enum class SimWorkerModel {
  threads_of_one_process,  // DataParallel: parallel_for workers share the caller's process (and GIL)
  process_per_worker,      // DDP: each worker is a rank process with its own host and GIL
};

struct SimBackendOptions {
  bool numeric = true;  // false: shape-only (no data, no kernels run)
  DType compute_dtype = DType::f32;  // which peak flops the kernels use (without a precision)
  // The training precision: each op class's compute type (see SimDevice); none:
  // every op at compute_dtype's peak.
  std::optional<Precision> precision;
  SimWorkerModel workers = SimWorkerModel::threads_of_one_process;
  ChromeTrace* trace = nullptr;  // records kernels, copies and collectives when set
  // The calling actor waits for each kernel and copy it issues, as on the host
  // backend, where a device's "kernel" runs on the thread that calls it.
  bool synchronous = false;
  // Symmetric ranks (shape-only only): 0 simulates every rank. W > 0: the backend's
  // devices run the first ranks of a world of W identical ranks (same GPU, same
  // batch, so the same work at the same times); communicators report size W and
  // their collectives are timed for all W ranks (CollectiveGroup's participants).
  // predict_step uses it for multi-node DDP: node 0's ranks stand for every node's.
  int symmetric_world = 0;
};

class SimBackend : public Backend {
 public:
  SimBackend(SimMachine machine, SimBackendOptions options);
  ~SimBackend() override;
  std::string name() const override { return "sim"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  Device& device(int index) override;
  Device& host_memory() override { return *host_memory_.front(); }
  void copy(const Tensor& src, Tensor& dst) override;
  void parallel_for(int n, const std::function<void(int)>& fn) override;
  std::vector<std::unique_ptr<Communicator>> make_communicators(const std::vector<int>& devices) override;
  std::unique_ptr<BackendMutex> make_mutex() override;
  Seconds now() override;
  void host_dispatch(int ops) override;

  SimDevice& sim_device(int index);
  const SimMachine& machine() const { return machine_; }
  const SimBackendOptions& options() const { return options_; }

  // ---- the calling actor's host clock --------------------------------------------
  // The actor's own time: the SimGrid clock plus dispatch not yet slept.
  Seconds host_time();
  // Moves the calling actor's clock forward to t (lazily).
  void host_advance_to(Seconds t);
  // Sleeps off the dispatch charged lazily, so the actor's SimGrid time is its own.
  void host_flush();

  // Fails every pending and future collective (a worker failed: its peers must not hang).
  void abort_collectives(const std::string& cause);
  bool aborted() const { return aborted_; }
  // The first exception a parallel_for worker threw (its peers then fail with
  // CollectiveErrors; the first is the cause), or null.
  std::exception_ptr first_failure() const { return first_failure_; }
  const std::string& abort_cause() const { return abort_cause_; }
  void on_abort(std::function<void()> wake) { abort_waiters_.push_back(std::move(wake)); }

  // Host-side accounting: dispatch charged since the last reset.
  Seconds dispatch_total_s() const { return dispatch_total_s_; }
  Seconds communication_total_s() const { return communication_total_s_; }
  void add_communication_time(Seconds s) { communication_total_s_ += s; }
  void reset_totals() { dispatch_total_s_ = communication_total_s_ = 0; }
  ChromeTrace* trace() const { return options_.trace; }
  int trace_pid(int device_index) const { return device_index + 1; }  // 0 is the host

 private:
  struct ActorState {
    Seconds debt = 0;  // dispatch charged but not slept yet
    int process = 0;   // which process (and GIL) the actor belongs to
    int worker = -1;   // its parallel_for worker index (-1: the main thread)
    std::optional<std::size_t> dispatch_event;  // its last dispatch slice in the trace (extended while contiguous)
  };
  // The trace row of the calling actor's host thread (named on first use).
  int trace_host_thread();
  void trace_dispatch(Seconds start, Seconds cost, int ops);
  ActorState& self_state();

  SimMachine machine_;
  SimBackendOptions options_;
  std::vector<std::unique_ptr<SimDevice>> devices_;
  std::vector<std::unique_ptr<SimDevice>> host_memory_;  // one: copies use each GPU's own node's CPU
  std::unordered_map<long, ActorState> actors_;
  std::set<int> named_host_threads_;  // trace rows of host threads already named
  // Per device, the copies traced on each copy row: concurrent copies (DataParallel's
  // scatter from GPU 0) get rows of their own, as CUDA streams would.
  std::map<int, std::vector<std::vector<std::pair<Seconds, Seconds>>>> copy_rows_;
  int trace_copy_row(int device, Seconds begin, Seconds end);
  // Per GPU, when its host-staged copies are done at the staged rate: staged copies through
  // one GPU share that rate (DataParallel's broadcast to 3 GPUs at once), not each its own.
  std::map<int, Seconds> staged_free_;
  std::unordered_map<int, simgrid::s4u::MutexPtr> gils_;  // by process
  int next_process_ = 1;
  Seconds dispatch_total_s_ = 0;
  Seconds communication_total_s_ = 0;
  bool aborted_ = false;
  std::exception_ptr first_failure_;
  std::string abort_cause_;
  std::vector<std::function<void()>> abort_waiters_;
};

// Runs `body` in an actor on `host` of the process's SimGrid Engine (whose platform is
// built) until the simulation ends; rethrows what `body` threw. SimGrid's clock
// cannot restart: one simulation per process (sim_process.hpp forks for that).
void sim_run_in_actor(simgrid::s4u::Host* host, const std::function<void()>& body);

}  // namespace dpt
