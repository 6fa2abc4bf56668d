#include "engine/cuda/nccl_communicator.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <shared_mutex>
#include <thread>

#include <fmt/format.h>

#include "engine/cuda/cuda_check.hpp"
#include "engine/cuda/cuda_raii.hpp"

namespace dpt {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(Seconds s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i64: return ncclInt64;
    case DType::i32: return ncclInt32;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
  }
  throw std::invalid_argument("nccl: unknown dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  throw std::invalid_argument("nccl: unknown reduce op");
}

struct CommGroup;

// One rank's NCCL handle and the state its in-flight works share. `mu` guards the
// handle: NCCL calls hold it shared, ncclCommAbort (which frees the handle) holds it
// exclusively, so no call ever runs on an aborted communicator.
struct CommState {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1;
  CudaDevice* device = nullptr;
  cudaStream_t stream = nullptr;  // the communication stream, separate from compute so DDP can overlap
  std::shared_ptr<CommGroup> group;
  std::shared_mutex mu;
  bool aborted = false;  // under mu
  std::string abort_reason;

  // NCCL's last message for this communicator; called with mu held.
  std::string last_error_locked() const {
    const char* s = comm ? ncclGetLastError(comm) : nullptr;
    return s && *s ? std::string(s) : std::string();
  }
  void abort_self(const std::string& why) {
    std::unique_lock lock(mu);
    if (aborted) return;
    aborted = true;
    abort_reason = why;
    CudaDeviceGuard guard(device->index());
    (void)ncclCommAbort(comm);
  }
};

// The communicators created together in this process: one failing rank aborts all,
// so the others fail at once with the cause instead of waiting for their timeout.
struct CommGroup {
  std::vector<std::weak_ptr<CommState>> members;
  void abort(const std::string& why) {
    for (auto& m : members)
      if (auto s = m.lock()) s->abort_self(why);
  }
};

std::string describe(ncclResult_t r, const std::string& last) {
  return fmt::format("NCCL {}{}{}", ncclGetErrorString(r), last.empty() ? "" : ": ", last);
}

// Polls until the communicator's pending operation has been handed to the GPU
// (ncclCommGetAsyncError no longer ncclInProgress). Errors and the deadline abort
// the group and throw.
void wait_ready(CommState& s, const char* what, Clock::time_point deadline, Seconds timeout) {
  for (;;) {
    std::string failure;
    {
      std::shared_lock lock(s.mu);
      if (s.aborted) throw CollectiveError(what, s.rank, "communicator was aborted: " + s.abort_reason);
      ncclResult_t state = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(s.comm, &state);
      if (q != ncclSuccess) state = q;
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) failure = describe(state, s.last_error_locked());
    }
    if (failure.empty() && Clock::now() > deadline)
      failure = fmt::format("not ready after {:.3f} s (timeout; a peer did not join); communicator aborted", timeout);
    if (!failure.empty()) {
      s.group->abort(fmt::format("{} failed on rank {}: {}", what, s.rank, failure));
      throw CollectiveError(what, s.rank, failure);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class NcclWork : public Work {
 public:
  NcclWork(std::shared_ptr<CommState> state, const char* name, Seconds timeout)
      : state_(std::move(state)), name_(name), timeout_(timeout), deadline_(deadline_after(timeout)) {}

  // Marks the end of the collective on the communication stream. Inside nccl_group
  // NCCL launches the kernels at ncclGroupEnd, so the mark is made after it.
  void record_done() {
    CudaDeviceGuard guard(state_->device->index());
    done_.record(state_->stream);
  }

  // After ncclGroupEnd: waits until the grouped collective is enqueued (bounded by
  // its deadline), then marks its end.
  void finish_group_launch() {
    wait_ready(*state_, name_, deadline_, timeout_);
    record_done();
  }

  bool is_completed() override {
    CudaDeviceGuard guard(state_->device->index());
    const cudaError_t e = cudaEventQuery(done_.get());
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    DPT_CUDA_CHECK(e);
    return true;
  }

  void wait() override {
    CommState& s = *state_;
    CudaDeviceGuard guard(s.device->index());
    for (;;) {
      const cudaError_t e = cudaEventQuery(done_.get());
      if (e == cudaSuccess) break;
      std::string failure;
      if (e != cudaErrorNotReady) {
        (void)cudaGetLastError();
        failure = fmt::format("CUDA {}: {}", cudaGetErrorName(e), cudaGetErrorString(e));
      } else {
        std::shared_lock lock(s.mu);
        if (s.aborted) throw CollectiveError(name_, s.rank, "communicator was aborted: " + s.abort_reason);
        ncclResult_t async = ncclSuccess;
        const ncclResult_t q = ncclCommGetAsyncError(s.comm, &async);
        if (q != ncclSuccess) async = q;
        if (async != ncclSuccess && async != ncclInProgress) failure = describe(async, s.last_error_locked());
      }
      if (failure.empty() && Clock::now() > deadline_)
        failure = fmt::format("timed out after {:.3f} s (a peer did not join); communicator aborted", timeout_);
      if (!failure.empty()) {
        s.group->abort(fmt::format("{} failed on rank {}: {}", name_, s.rank, failure));
        throw CollectiveError(name_, s.rank, failure);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    // Later kernels on the compute stream read the result.
    DPT_CUDA_CHECK(cudaStreamWaitEvent(s.device->stream(), done_.get(), 0));
  }

 private:
  std::shared_ptr<CommState> state_;
  const char* name_;
  Seconds timeout_;
  Clock::time_point deadline_;
  CudaEvent done_;
};

// Works issued inside nccl_group on this thread, marked done after ncclGroupEnd.
thread_local std::vector<std::shared_ptr<NcclWork>>* t_group_works = nullptr;

class NcclCommunicator : public AbortableCommunicator {
 public:
  explicit NcclCommunicator(std::shared_ptr<CommState> state) : s_(std::move(state)) {
    barrier_buf_ = DeviceBuffer(s_->device->allocator(), sizeof(float));
  }
  ~NcclCommunicator() override {
    barrier_buf_.reset();
    std::unique_lock lock(s_->mu);
    CudaDeviceGuard guard(s_->device->index());
    if (!s_->aborted) {
      (void)cudaStreamSynchronize(s_->stream);
      (void)ncclCommDestroy(s_->comm);
    }
    (void)cudaStreamDestroy(s_->stream);
  }

  int rank() const override { return s_->rank; }
  int size() const override { return s_->size; }
  std::string backend_name() const override { return "nccl"; }
  void abort(const std::string& cause) override { s_->group->abort(cause); }

  WorkPtr all_reduce(Tensor& t, const AllReduceOptions& o) override {
    return launch("all_reduce", t.size_bytes(), o.timeout, [&] {
      return ncclAllReduce(t.data(), t.data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), nccl_op(o.op),
                           s_->comm, s_->stream);
    });
  }
  WorkPtr broadcast(Tensor& t, const BroadcastOptions& o) override {
    check_root("broadcast", o.root);
    return launch("broadcast", t.size_bytes(), o.timeout, [&] {
      return ncclBroadcast(t.data(), t.data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), o.root, s_->comm,
                           s_->stream);
    });
  }
  WorkPtr reduce(Tensor& t, const ReduceOptions& o) override {
    check_root("reduce", o.root);
    return launch("reduce", t.size_bytes(), o.timeout, [&] {
      return ncclReduce(t.data(), t.data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), nccl_op(o.op),
                        o.root, s_->comm, s_->stream);
    });
  }
  WorkPtr all_gather(Tensor& out, const Tensor& in, const AllGatherOptions& o) override {
    if (out.dtype() != in.dtype() || out.numel() != in.numel() * s_->size)
      throw std::invalid_argument(fmt::format("all_gather on rank {}: output has {} elements, needs {} x {}", s_->rank,
                                              out.numel(), s_->size, in.numel()));
    return launch("all_gather", out.size_bytes(), o.timeout, [&] {
      return ncclAllGather(in.data(), out.data(), static_cast<size_t>(in.numel()), nccl_type(in.dtype()), s_->comm,
                           s_->stream);
    });
  }
  WorkPtr reduce_scatter(Tensor& out, const Tensor& in, const ReduceScatterOptions& o) override {
    if (out.dtype() != in.dtype() || in.numel() != out.numel() * s_->size)
      throw std::invalid_argument(fmt::format("reduce_scatter on rank {}: input has {} elements, needs {} x {}",
                                              s_->rank, in.numel(), s_->size, out.numel()));
    return launch("reduce_scatter", in.size_bytes(), o.timeout, [&] {
      return ncclReduceScatter(in.data(), out.data(), static_cast<size_t>(out.numel()), nccl_type(in.dtype()),
                               nccl_op(o.op), s_->comm, s_->stream);
    });
  }
  // NCCL has no barrier; as c10d does, all-reduce one element.
  WorkPtr barrier(const BarrierOptions& o) override {
    return launch("barrier", sizeof(float), o.timeout, [&] {
      return ncclAllReduce(barrier_buf_.data(), barrier_buf_.data(), 1, ncclFloat32, ncclSum, s_->comm, s_->stream);
    });
  }

 private:
  void check_root(const char* what, int root) const {
    if (root < 0 || root >= s_->size)
      throw std::invalid_argument(fmt::format("{}: root {} outside [0, {})", what, root, s_->size));
  }

  template <typename F> WorkPtr launch(const char* name, Bytes bytes, Seconds timeout, F&& call) {
    CudaDevice& dev = *s_->device;
    CudaDeviceGuard guard(dev.index());
    // The collective reads what the compute stream wrote before it was issued.
    cuda_stream_wait(s_->stream, dev.stream(), ready_);
    // Inside a group the kernels launch at ncclGroupEnd: no per-collective events then.
    const bool timed = !t_group_works && dev.records_timeline() && dev.timeline().started();
    int h = -1;
    if (timed) h = dev.timeline().begin(s_->stream, OpCost{name, OpKind::collective, 0, bytes, bytes}, 1, false);
    std::string failure;
    {
      std::shared_lock lock(s_->mu);
      if (s_->aborted) throw CollectiveError(name, s_->rank, "communicator was aborted: " + s_->abort_reason);
      const ncclResult_t r = call();
      if (r != ncclSuccess && r != ncclInProgress) failure = describe(r, s_->last_error_locked());
    }
    if (!failure.empty()) {
      s_->group->abort(fmt::format("{} failed on rank {}: {}", name, s_->rank, failure));
      throw CollectiveError(name, s_->rank, failure);
    }
    // Non-blocking: the call may still be enqueuing; bounded like the collective itself.
    // In a group the enqueue happens at ncclGroupEnd, checked there.
    if (!t_group_works) wait_ready(*s_, name, deadline_after(timeout), timeout);
    if (timed) dev.timeline().end(h, s_->stream);
    auto work = std::make_shared<NcclWork>(s_, name, timeout);
    if (t_group_works) t_group_works->push_back(work);
    else work->record_done();
    return work;
  }

  std::shared_ptr<CommState> s_;
  CudaEvent ready_;
  DeviceBuffer barrier_buf_;
};

std::shared_ptr<CommState> new_state(CudaDevice& device, int rank, int size, std::shared_ptr<CommGroup> group) {
  auto s = std::make_shared<CommState>();
  s->rank = rank;
  s->size = size;
  s->device = &device;
  s->group = std::move(group);
  s->group->members.push_back(s);
  CudaDeviceGuard guard(device.index());
  DPT_CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  return s;
}

// config.blocking = 0: init and collectives return at once, and wait_ready bounds
// them by a deadline instead of blocking the host on an absent peer.
ncclConfig_t nonblocking_config() {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  return cfg;
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<CudaDevice*>& devices,
                                                                   Seconds init_timeout) {
  if (devices.empty()) throw std::invalid_argument("make_nccl_communicators: no devices");
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = i + 1; j < devices.size(); ++j)
      if (devices[i]->index() == devices[j]->index())
        throw std::invalid_argument(fmt::format("make_nccl_communicators: cuda:{} listed twice (NCCL needs one rank "
                                                "per GPU)",
                                                devices[i]->index()));
  const int n = static_cast<int>(devices.size());
  auto group = std::make_shared<CommGroup>();
  std::vector<std::shared_ptr<CommState>> states;
  for (int r = 0; r < n; ++r) states.push_back(new_state(*devices[static_cast<size_t>(r)], r, n, group));
  // What ncclCommInitAll does, with a non-blocking config: one id, every rank
  // initialised inside one group from this thread.
  ncclUniqueId id{};
  DPT_NCCL_CHECK(ncclGetUniqueId(&id));
  ncclConfig_t cfg = nonblocking_config();
  int previous = 0;
  DPT_CUDA_CHECK(cudaGetDevice(&previous));
  DPT_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    DPT_CUDA_CHECK(cudaSetDevice(devices[static_cast<size_t>(r)]->index()));
    DPT_NCCL_CHECK(ncclCommInitRankConfig(&states[static_cast<size_t>(r)]->comm, n, id, r, &cfg));
  }
  DPT_NCCL_CHECK(ncclGroupEnd());
  DPT_CUDA_CHECK(cudaSetDevice(previous));
  const auto deadline = deadline_after(init_timeout);
  for (auto& s : states) wait_ready(*s, "init", deadline, init_timeout);
  std::vector<std::unique_ptr<Communicator>> out;
  for (auto& s : states) out.push_back(std::make_unique<NcclCommunicator>(s));
  return out;
}

std::unique_ptr<Communicator> make_nccl_communicator(CudaDevice& device, const RendezvousConfig& config,
                                                     Seconds timeout) {
  const auto deadline = deadline_after(timeout);
  std::vector<std::uint8_t> id_bytes;
  ncclUniqueId id{};
  if (config.rank == 0) {
    DPT_NCCL_CHECK(ncclGetUniqueId(&id));
    id_bytes.assign(reinterpret_cast<const std::uint8_t*>(&id), reinterpret_cast<const std::uint8_t*>(&id) + sizeof id);
  }
  id_bytes = rendezvous_exchange(config, id_bytes, timeout);
  if (id_bytes.size() != sizeof id)
    throw CollectiveError("init", config.rank,
                          fmt::format("rendezvous delivered {} bytes, an ncclUniqueId has {}", id_bytes.size(), sizeof id));
  std::memcpy(&id, id_bytes.data(), sizeof id);
  auto s = new_state(device, config.rank, config.world_size, std::make_shared<CommGroup>());
  CudaDeviceGuard guard(device.index());
  ncclConfig_t cfg = nonblocking_config();
  DPT_NCCL_CHECK(ncclCommInitRankConfig(&s->comm, config.world_size, id, config.rank, &cfg));
  const Seconds left = std::chrono::duration<double>(deadline - Clock::now()).count();
  wait_ready(*s, "init", deadline, left > 0 ? left : 0);
  return std::make_unique<NcclCommunicator>(std::move(s));
}

void nccl_group(const std::function<void()>& fn) {
  if (t_group_works) throw std::logic_error("nccl_group: groups do not nest here");
  std::vector<std::shared_ptr<NcclWork>> works;
  t_group_works = &works;
  DPT_NCCL_CHECK(ncclGroupStart());
  try {
    fn();
  } catch (...) {
    t_group_works = nullptr;
    (void)ncclGroupEnd();
    throw;
  }
  t_group_works = nullptr;
  DPT_NCCL_CHECK(ncclGroupEnd());
  for (auto& w : works) w->finish_group_launch();
}

}  // namespace dpt
