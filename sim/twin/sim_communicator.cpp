#include "sim/twin/sim_communicator.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <deque>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <simgrid/Exception.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/ConditionVariable.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Mutex.hpp>
#include <simgrid/s4u/Semaphore.hpp>

#include "engine/core/reduce_into.hpp"
#include "sim/twin/chrome_trace.hpp"
#include "sim/twin/sim_backend.hpp"

namespace dpt {
namespace {

namespace s4u = simgrid::s4u;

// ---- element-wise folds in the host ring's order (reduce_into: the host ring's own) ----
// acc = x[first]; then for each next rank q around the ring: acc = x[q] (op) acc,
// computed as the host ring does (own buffer += partial from the left). Returns acc.
template <typename T>
std::vector<T> fold_ring(ReduceOp op, Elements begin, Elements end, int first, int ranks,
                         const std::vector<const T*>& x) {
  std::vector<T> acc(x[static_cast<size_t>(first)] + begin, x[static_cast<size_t>(first)] + end);
  std::vector<T> next(acc.size());
  for (int j = 1; j < ranks; ++j) {
    const T* own = x[static_cast<size_t>((first + j) % ranks)];
    std::copy(own + begin, own + end, next.begin());
    reduce_into<T>(op, end - begin, acc.data(), next.data());
    acc.swap(next);
  }
  return acc;
}

template <typename T> void divide(std::vector<T>& v, int by) {
  for (auto& x : v) x = static_cast<T>(x / static_cast<T>(by));
}

Elements chunk_begin(Elements n, int parts, int c) { return n * c / parts; }

}  // namespace

void ring_all_reduce_values(DType t, ReduceOp op, Elements n, const std::vector<void*>& buffers) {
  const int ranks = static_cast<int>(buffers.size());
  dispatch_host_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    std::vector<const T*> x;
    for (void* b : buffers) x.push_back(static_cast<const T*>(b));
    std::vector<std::vector<T>> results;
    for (int c = 0; c < ranks; ++c) {
      auto acc = fold_ring<T>(op, chunk_begin(n, ranks, c), chunk_begin(n, ranks, c + 1), c, ranks, x);
      if (op == ReduceOp::avg) divide(acc, ranks);
      results.push_back(std::move(acc));
    }
    for (int c = 0; c < ranks; ++c)
      for (void* b : buffers) std::copy(results[c].begin(), results[c].end(), static_cast<T*>(b) + chunk_begin(n, ranks, c));
  });
}

void ring_reduce_values(DType t, ReduceOp op, Elements n, int root, const std::vector<void*>& buffers) {
  const int ranks = static_cast<int>(buffers.size());
  dispatch_host_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    std::vector<const T*> x;
    for (void* b : buffers) x.push_back(static_cast<const T*>(b));
    auto acc = fold_ring<T>(op, 0, n, (root + 1) % ranks, ranks, x);
    if (op == ReduceOp::avg) divide(acc, ranks);
    std::copy(acc.begin(), acc.end(), static_cast<T*>(buffers[static_cast<size_t>(root)]));
  });
}

void ring_reduce_scatter_values(DType t, ReduceOp op, Elements block, const std::vector<const void*>& ins,
                                const std::vector<void*>& outs) {
  const int ranks = static_cast<int>(ins.size());
  dispatch_host_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    std::vector<const T*> x;
    for (const void* b : ins) x.push_back(static_cast<const T*>(b));
    for (int r = 0; r < ranks; ++r) {
      auto acc = fold_ring<T>(op, block * r, block * (r + 1), (r + 1) % ranks, ranks, x);
      if (op == ReduceOp::avg) divide(acc, ranks);
      std::copy(acc.begin(), acc.end(), static_cast<T*>(outs[static_cast<size_t>(r)]));
    }
  });
}

namespace {

// A collective waiting for all ranks to issue it (numerics) and its parameters,
// which every rank must repeat.
struct Instance {
  const char* name = "";
  std::optional<CollectiveOp> kind;  // nullopt: a barrier
  DType dtype = DType::f32;
  Elements count = 0;
  int root = 0;
  ReduceOp op = ReduceOp::sum;
  std::vector<Tensor> a, b;  // per rank: the tensor (or input) and the output
  int arrived = 0;
};

struct Item {
  std::int64_t seq = 0;
  CollectiveCall call;
  Seconds ready_s = 0;
  const char* name = "";
  Seconds data_ready_s = 0;  // when the compute stream produced its data (the gradients' ready point)
};

// One rank's communication stream.
struct RankStream {
  std::deque<Item> queue;
  s4u::SemaphorePtr available = s4u::Semaphore::create(0);
  s4u::MutexPtr mu = s4u::Mutex::create();
  s4u::ConditionVariablePtr done = s4u::ConditionVariable::create();
  std::vector<Seconds> end_s;  // by sequence number
  std::int64_t completed = 0;
  bool stop = false;
};

// Bytes one rank's NCCL kernel reads and writes in HBM: what it sends is read once and
// what it receives written once, so twice the bus bytes (nccl-tests' busbw definitions:
// all-reduce 2(n-1)/n of the buffer, all-gather and reduce-scatter (n-1)/n, broadcast and
// reduce the buffer). One rank moves nothing.
Bytes nccl_hbm_bytes(const CollectiveCall& call, int ranks) {
  if (ranks <= 1) return 0;
  const double n = ranks, s = static_cast<double>(call.bytes());
  double bus = s;
  switch (call.op) {
    case CollectiveOp::all_reduce: bus = 2.0 * (n - 1) / n * s; break;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter: bus = (n - 1) / n * s; break;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce: bus = s; break;
  }
  return static_cast<Bytes>(2.0 * bus);
}

struct Group {
  Group(SimBackend& b) : backend(b) {}
  SimBackend& backend;
  std::vector<SimDevice*> devices;  // the simulated ranks' devices
  int world = 0;                     // ranks in all: devices.size(), or the symmetric world
  std::shared_ptr<SimCollectiveGroup> timer;
  std::vector<std::unique_ptr<RankStream>> streams;
  std::vector<std::int64_t> issued;
  std::map<std::int64_t, Instance> instances;
  bool aborted = false;
  std::string cause;

  int size() const { return world; }
  int simulated() const { return static_cast<int>(devices.size()); }

  void abort(const std::string& why) {
    if (aborted) return;
    aborted = true;
    cause = why;
    for (auto& s : streams) {
      std::unique_lock<s4u::Mutex> lock(*s->mu);
      s->done->notify_all();
    }
  }

  void run_numeric(Instance& in) {
    const int n = simulated();  // numeric mode simulates every rank (SimBackend enforces it)
    std::vector<void*> a;
    for (auto& t : in.a) a.push_back(t.data());
    if (!in.kind) return;  // a barrier moves no data
    switch (*in.kind) {
      case CollectiveOp::all_reduce: ring_all_reduce_values(in.dtype, in.op, in.count, a); break;
      case CollectiveOp::reduce: ring_reduce_values(in.dtype, in.op, in.count, in.root, a); break;
      case CollectiveOp::broadcast:
        for (int r = 0; r < n; ++r)
          if (r != in.root && in.a[r].size_bytes() > 0)
            std::memcpy(a[r], a[in.root], static_cast<size_t>(in.a[r].size_bytes()));
        break;
      case CollectiveOp::all_gather:
        for (int r = 0; r < n; ++r)
          for (int q = 0; q < n; ++q)
            if (in.a[q].size_bytes() > 0)
              std::memcpy(static_cast<char*>(in.b[r].data()) + q * in.a[q].size_bytes(), a[q],
                          static_cast<size_t>(in.a[q].size_bytes()));
        break;
      case CollectiveOp::reduce_scatter: {
        std::vector<const void*> ins(a.begin(), a.end());
        std::vector<void*> outs;
        for (auto& t : in.b) outs.push_back(t.data());
        ring_reduce_scatter_values(in.dtype, in.op, in.b[0].numel(), ins, outs);
        break;
      }
    }
  }

  // The collective's trace args (bytes, algorithm, protocol, channels) and, for an
  // all-reduce, a flow from the gradients' ready point on the compute stream.
  void trace_collective(int rank, const Item& it, std::size_t event, Seconds start, Seconds end) {
    ChromeTrace& trace = *backend.trace();
    TraceEvent& e = trace.event(event);
    const Bytes bytes = it.call.count * it.call.element_bytes;
    e.number_args = {{"bytes", static_cast<double>(bytes)}, {"count", static_cast<double>(it.call.count)},
                     {"ranks", static_cast<double>(world)}};
    if (timer) {
      const SimCollectiveChoice c = timer->choice(it.call);
      if (!c.algorithm.empty()) e.args.emplace_back("algorithm", c.algorithm);
      if (!c.protocol.empty()) e.args.emplace_back("protocol", c.protocol);
      if (c.channels > 0) e.number_args.emplace_back("channels", c.channels);
    }
    // The arrow starts just inside the compute slice that produced the data.
    constexpr Seconds kInside = 1e-9;
    if (std::string_view(it.name) == "all_reduce" && it.data_ready_s > kInside && end > start) {
      const int pid = backend.trace_pid(devices[static_cast<size_t>(rank)]->index());
      trace.add_flow({trace.next_flow_id(), "gradients ready", "flow", pid, static_cast<int>(SimStream::compute),
                      it.data_ready_s - kInside, pid, static_cast<int>(SimStream::communication),
                      start + std::min(kInside, (end - start) / 2)});
    }
  }

  // The communication stream of `rank`: runs its collectives in issue order.
  void stream_loop(int rank) {
    RankStream& s = *streams[static_cast<size_t>(rank)];
    SimDevice& dev = *devices[static_cast<size_t>(rank)];
    for (;;) {
      s.available->acquire();
      if (s.queue.empty()) return;  // stop
      Item it = s.queue.front();
      s.queue.pop_front();
      if (it.ready_s > s4u::Engine::get_clock()) s4u::this_actor::sleep_until(it.ready_s);
      const Seconds start = s4u::Engine::get_clock();
      if (!aborted) {
        try {
          timer->run(rank, it.call);
        } catch (const simgrid::ForcefulKillException&) {
          throw;
        } catch (const std::exception& e) {
          abort(fmt::format("{} on rank {}: {}", it.name, rank, e.what()));
        }
      }
      const Seconds end = s4u::Engine::get_clock();
      dev.note_communication(start, end, nccl_hbm_bytes(it.call, world));
      const auto event = dev.stream_occupy(SimStream::communication, start, end, it.name, "collective");
      if (event) trace_collective(rank, it, *event, start, end);
      backend.add_communication_time(end - start);
      std::unique_lock<s4u::Mutex> lock(*s.mu);
      if (static_cast<std::int64_t>(s.end_s.size()) <= it.seq) s.end_s.resize(static_cast<size_t>(it.seq) + 1);
      s.end_s[static_cast<size_t>(it.seq)] = end;
      s.completed = it.seq + 1;
      s.done->notify_all();
    }
  }
};

class SimWork : public Work {
 public:
  SimWork(std::shared_ptr<Group> g, int rank, std::int64_t seq, const char* name)
      : g_(std::move(g)), rank_(rank), seq_(seq), name_(name) {}
  void wait() override {
    RankStream& s = *g_->streams[static_cast<size_t>(rank_)];
    if (s.completed <= seq_) {
      // Blocking: the host must first have spent the dispatch it owes.
      g_->backend.host_flush();
      std::unique_lock<s4u::Mutex> lock(*s.mu);
      while (s.completed <= seq_ && !g_->aborted) s.done->wait(lock);
    }
    if (s.completed <= seq_) throw CollectiveError(name_, rank_, g_->cause);
    const Seconds end = s.end_s[static_cast<size_t>(seq_)];
    g_->backend.host_advance_to(end);
    g_->devices[static_cast<size_t>(rank_)]->stream_wait_until(SimStream::compute, end);
  }
  bool is_completed() override { return g_->streams[static_cast<size_t>(rank_)]->completed > seq_; }

 private:
  std::shared_ptr<Group> g_;
  int rank_;
  std::int64_t seq_;
  const char* name_;
};

class SimCommunicator : public Communicator {
 public:
  SimCommunicator(std::shared_ptr<Group> g, int rank) : g_(std::move(g)), rank_(rank) {}
  ~SimCommunicator() override {
    // Ends the stream's actor when the simulation is still running (it is a daemon,
    // so SimGrid ends it anyway when the simulation ends).
    if (s4u::Actor::self() != nullptr) {
      RankStream& s = *g_->streams[static_cast<size_t>(rank_)];
      s.stop = true;
      s.available->release();
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return g_->size(); }
  std::string backend_name() const override { return "sim"; }

  WorkPtr all_reduce(Tensor& t, const AllReduceOptions& o) override {
    return issue("all_reduce", CollectiveOp::all_reduce, t.dtype(), t.numel(), 0, o.op, t, Tensor(), o.timeout);
  }
  WorkPtr broadcast(Tensor& t, const BroadcastOptions& o) override {
    check_root("broadcast", o.root);
    return issue("broadcast", CollectiveOp::broadcast, t.dtype(), t.numel(), o.root, ReduceOp::sum, t, Tensor(),
                 o.timeout);
  }
  WorkPtr reduce(Tensor& t, const ReduceOptions& o) override {
    check_root("reduce", o.root);
    return issue("reduce", CollectiveOp::reduce, t.dtype(), t.numel(), o.root, o.op, t, Tensor(), o.timeout);
  }
  WorkPtr all_gather(Tensor& out, const Tensor& in, const AllGatherOptions& o) override {
    check_blocks("all_gather", out, in);
    return issue("all_gather", CollectiveOp::all_gather, in.dtype(), out.numel(), 0, ReduceOp::sum, in, out,
                 o.timeout);
  }
  WorkPtr reduce_scatter(Tensor& out, const Tensor& in, const ReduceScatterOptions& o) override {
    check_blocks("reduce_scatter", in, out);
    return issue("reduce_scatter", CollectiveOp::reduce_scatter, in.dtype(), in.numel(), 0, o.op, in, out,
                 o.timeout);
  }
  // As c10d's NCCL barrier: an all-reduce of one element.
  WorkPtr barrier(const BarrierOptions& o) override {
    return issue("barrier", std::nullopt, DType::f32, 1, 0, ReduceOp::sum, Tensor(), Tensor(), o.timeout);
  }

 private:
  void check_root(const char* what, int root) const {
    if (root < 0 || root >= size())
      throw std::invalid_argument(
          fmt::format("{} on rank {}: root {} is outside 0..{}", what, rank_, root, size() - 1));
  }
  void check_blocks(const char* what, const Tensor& big, const Tensor& block) const {
    if (big.dtype() != block.dtype() || big.numel() != block.numel() * size())
      throw std::invalid_argument(fmt::format(
          "{} on rank {}: {} tensor of {} elements needs a tensor of {} x {} elements, got {} {}", what, rank_,
          dtype_name(block.dtype()), block.numel(), size(), block.numel(), dtype_name(big.dtype()), big.numel()));
  }

  WorkPtr issue(const char* name, std::optional<CollectiveOp> kind, DType dtype, Elements count, int root, ReduceOp op,
                const Tensor& a, const Tensor& b, Seconds timeout) {
    if (!(timeout > 0))
      throw std::invalid_argument(fmt::format("{} on rank {}: timeout must be positive, got {} s", name, rank_, timeout));
    Group& g = *g_;
    if (g.aborted) throw CollectiveError(name, rank_, g.cause);
    SimBackend& backend = g.backend;
    backend.host_dispatch(1);
    const std::int64_t seq = g.issued[static_cast<size_t>(rank_)]++;
    // Numerics: every rank's tensors are registered; the last rank computes the result.
    Instance& in = g.instances[seq];
    if (in.arrived == 0) {
      in = Instance{name, kind, dtype, count, root, op, std::vector<Tensor>(g.devices.size()),
                    std::vector<Tensor>(g.devices.size()), 0};
    } else if (in.kind != kind || in.dtype != dtype || in.count != count || in.root != root || in.op != op) {
      const std::string cause = fmt::format(
          "mismatched collectives: rank {} issued {} ({} x {}, root {}, op {}) where another rank issued {} ({} x {}, "
          "root {}, op {})",
          rank_, name, count, dtype_name(dtype), root, reduce_op_name(op), in.name, in.count, dtype_name(in.dtype),
          in.root, reduce_op_name(in.op));
      g.abort(cause);
      throw CollectiveError(name, rank_, cause);
    }
    in.a[static_cast<size_t>(rank_)] = a;
    in.b[static_cast<size_t>(rank_)] = b;
    if (++in.arrived == g.simulated()) {
      if (backend.options().numeric && kind) g.run_numeric(in);
      g.instances.erase(seq);
    }
    // Timing: the stream starts it once this rank's data exists (its compute stream
    // has produced it) and the rank's host has issued it.
    SimDevice& dev = *g.devices[static_cast<size_t>(rank_)];
    const Seconds data_ready = dev.stream_ready(SimStream::compute);
    const Seconds ready = std::max(backend.host_time(), data_ready);
    const CollectiveOp timed = kind.value_or(CollectiveOp::all_reduce);  // a barrier: one element all-reduced
    RankStream& s = *g.streams[static_cast<size_t>(rank_)];
    s.queue.push_back(Item{seq, CollectiveCall{timed, count, dtype_size_bytes(dtype), root}, ready, name, data_ready});
    s.available->release();
    return std::make_shared<SimWork>(g_, rank_, seq, name);
  }

  std::shared_ptr<Group> g_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_sim_communicators(SimBackend& backend, const std::vector<int>& devices) {
  if (devices.empty()) throw std::invalid_argument("sim communicators: no devices given");
  auto g = std::make_shared<Group>(backend);
  for (int d : devices) g->devices.push_back(&backend.sim_device(d));
  g->world = backend.options().symmetric_world > 0 ? backend.options().symmetric_world : static_cast<int>(devices.size());
  if (!backend.machine().make_collective_group)
    throw std::invalid_argument(fmt::format("sim machine '{}' has no collective timer", backend.machine().name));
  g->timer = backend.machine().make_collective_group(devices);
  g->issued.assign(devices.size(), 0);
  for (size_t r = 0; r < devices.size(); ++r) g->streams.push_back(std::make_unique<RankStream>());
  std::weak_ptr<Group> weak = g;
  backend.on_abort([weak] {
    if (auto group = weak.lock()) group->abort(group->backend.abort_cause());
  });
  for (size_t r = 0; r < devices.size(); ++r) {
    SimDevice& dev = *g->devices[r];
    auto actor = s4u::Actor::create(fmt::format("{}.comm", dev.name()), dev.host(),
                                    [g, rank = static_cast<int>(r)] { g->stream_loop(rank); });
    actor->daemonize();
  }
  std::vector<std::unique_ptr<Communicator>> out;
  for (size_t r = 0; r < devices.size(); ++r) out.push_back(std::make_unique<SimCommunicator>(g, static_cast<int>(r)));
  return out;
}

}  // namespace dpt
