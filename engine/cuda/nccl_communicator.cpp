#include "nccl_communicator.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "cuda_check.hpp"
#include "cuda_raii.hpp"

namespace dpt {
namespace {

using Clock = std::chrono::steady_clock;

class NcclWork;
// Works issued inside nccl_group on this thread, completed at ncclGroupEnd.
thread_local std::vector<std::shared_ptr<NcclWork>>* t_group_works = nullptr;

Clock::time_point deadline_after(Seconds s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i64: return ncclInt64;
    case DType::i32: return ncclInt32;
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

// State shared by a communicator and its in-flight works: the NCCL handle and
// whether it has been aborted (after which every call fails fast).
struct CommState {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1;
  CudaDevice* device = nullptr;
  cudaStream_t stream = nullptr;  // the communication stream, separate from compute so DDP can overlap
  bool nonblocking = false;       // created with config.blocking = 0 (multi-process)
  std::atomic<bool> aborted{false};
  std::string abort_reason;

  std::string last_error() const {
    const char* s = comm ? ncclGetLastError(comm) : nullptr;
    return s && *s ? std::string(s) : std::string();
  }
  // Aborts the communicator once; later collectives throw at once.
  void abort(const std::string& why) {
    bool expected = false;
    if (aborted.compare_exchange_strong(expected, true)) {
      abort_reason = why;
      (void)ncclCommAbort(comm);
    }
  }
};

// Polls a non-blocking communicator until its pending operation has been handed
// to the GPU (no longer ncclInProgress); errors and the deadline abort it.
void wait_ready(CommState& s, const char* what, Clock::time_point deadline, Seconds timeout) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(s.comm, &state);
    if (q != ncclSuccess) state = q;
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      const std::string msg = fmt::format("{}{}{}", ncclGetErrorString(state), s.last_error().empty() ? "" : ": ", s.last_error());
      s.abort(msg);
      throw CollectiveError(what, s.rank, "NCCL: " + msg);
    }
    if (Clock::now() > deadline) {
      const std::string msg = fmt::format("not ready after {:.3f} s (timeout); communicator aborted", timeout);
      s.abort(msg);
      throw CollectiveError(what, s.rank, msg);
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
      if (e != cudaErrorNotReady) {
        const std::string msg = fmt::format("CUDA {}: {}", cudaGetErrorName(e), cudaGetErrorString(e));
        s.abort(msg);
        throw CollectiveError(name_, s.rank, msg);
      }
      if (s.aborted.load())
        throw CollectiveError(name_, s.rank, "communicator was aborted: " + s.abort_reason);
      ncclResult_t async = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(s.comm, &async);
      if (q != ncclSuccess) async = q;
      if (async != ncclSuccess && async != ncclInProgress) {
        const std::string msg = fmt::format("NCCL {}{}{}", ncclGetErrorString(async),
                                            s.last_error().empty() ? "" : ": ", s.last_error());
        s.abort(msg);
        throw CollectiveError(name_, s.rank, msg);
      }
      if (Clock::now() > deadline_) {
        const std::string msg = fmt::format("timed out after {:.3f} s (a peer did not join); communicator aborted",
                                            timeout_);
        s.abort(msg);
        throw CollectiveError(name_, s.rank, msg);
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

class NcclCommunicator : public Communicator {
 public:
  explicit NcclCommunicator(std::shared_ptr<CommState> state) : s_(std::move(state)) {
    barrier_buf_ = DeviceBuffer(s_->device->allocator(), sizeof(float));
  }
  ~NcclCommunicator() override {
    barrier_buf_.reset();
    CudaDeviceGuard guard(s_->device->index());
    if (!s_->aborted.load()) {
      (void)cudaStreamSynchronize(s_->stream);
      (void)ncclCommDestroy(s_->comm);
    }
    (void)cudaStreamDestroy(s_->stream);
  }

  int rank() const override { return s_->rank; }
  int size() const override { return s_->size; }
  std::string backend_name() const override { return "nccl"; }

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
    if (s_->aborted.load()) throw CollectiveError(name, s_->rank, "communicator was aborted: " + s_->abort_reason);
    CudaDevice& dev = *s_->device;
    CudaDeviceGuard guard(dev.index());
    // The collective reads what the compute stream wrote before it was issued.
    cuda_stream_wait(s_->stream, dev.stream(), ready_);
    // Inside a group the kernels launch at ncclGroupEnd: no per-collective events then.
    const bool timed = !t_group_works && dev.records_timeline() && dev.timeline().started();
    int h = -1;
    if (timed) h = dev.timeline().begin(s_->stream, OpCost{name, OpKind::collective, 0, bytes, bytes}, 1, false);
    const ncclResult_t r = call();
    if (r != ncclSuccess && r != ncclInProgress) {
      const std::string msg = fmt::format("NCCL {}{}{}", ncclGetErrorString(r), s_->last_error().empty() ? "" : ": ",
                                          s_->last_error());
      s_->abort(msg);
      throw CollectiveError(name, s_->rank, msg);
    }
    if (s_->nonblocking) wait_ready(*s_, name, deadline_after(timeout), timeout);
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

std::shared_ptr<CommState> new_state(CudaDevice& device, int rank, int size) {
  auto s = std::make_shared<CommState>();
  s->rank = rank;
  s->size = size;
  s->device = &device;
  CudaDeviceGuard guard(device.index());
  DPT_CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  return s;
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<CudaDevice*>& devices) {
  if (devices.empty()) throw std::invalid_argument("make_nccl_communicators: no devices");
  std::vector<int> ids;
  for (auto* d : devices) ids.push_back(d->index());
  for (size_t i = 0; i < ids.size(); ++i)
    for (size_t j = i + 1; j < ids.size(); ++j)
      if (ids[i] == ids[j])
        throw std::invalid_argument(fmt::format("make_nccl_communicators: cuda:{} listed twice (NCCL needs one rank "
                                                "per GPU)", ids[i]));
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  DPT_NCCL_CHECK(ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), ids.data()));
  std::vector<std::unique_ptr<Communicator>> out;
  for (size_t r = 0; r < devices.size(); ++r) {
    auto s = new_state(*devices[r], static_cast<int>(r), static_cast<int>(devices.size()));
    s->comm = comms[r];
    out.push_back(std::make_unique<NcclCommunicator>(std::move(s)));
  }
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
  auto s = new_state(device, config.rank, config.world_size);
  s->nonblocking = true;
  CudaDeviceGuard guard(device.index());
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;  // init and collectives return at once; wait_ready bounds them by the deadline
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
  for (auto& w : works) w->record_done();
}

}  // namespace dpt
