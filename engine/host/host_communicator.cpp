// Host ring communicator. Each rank owns one communication worker thread that runs
// the rank's collectives in issue order (as one NCCL stream would), so a caller can
// overlap an all-reduce with other work and wait on the returned Work later.
//
// Synchronisation is neighbour-only, as on a real ring: every rank advances a tick
// counter, and a rank may finish tick T only when both ring neighbours have finished
// tick T-1. One tick is one ring step; data a rank reads from its left neighbour was
// written at an earlier tick, and the chunk a rank writes at tick T is never the one
// its right neighbour reads at tick T (see ring_reduce_scatter). Every collective
// ends with a data-free completion tick, so when wait() returns on rank r the right
// neighbour has stopped reading r's buffer and the caller may reuse it.
//
// Failure: every wait has the collective's deadline. A timeout or an error on any
// rank aborts the whole group: ranks blocked in a wait wake up and throw a
// CollectiveError naming their own collective, their rank and the first cause; all
// later collectives fail at once. Nothing waits forever.
#include "engine/host/host_communicator.hpp"

#include "engine/core/fault_injection.hpp"
#include "engine/core/reduce_into.hpp"

#include <chrono>
#include <condition_variable>
#include <optional>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace dpt {
namespace {

using Clock = std::chrono::steady_clock;

// What one rank contributes to the collective in flight: checked against the
// neighbours so mismatched calls fail loudly instead of corrupting memory.
struct Contribution {
  const char* collective = "";
  DType dtype = DType::f32;
  Elements count = 0;  // elements per rank (all_reduce: the tensor; gathers: one block)
  int root = 0;
  ReduceOp op = ReduceOp::sum;
  void* buffer = nullptr;       // what neighbours read from (own tensor, out, or scratch)
};

// State shared by the ranks of one group.
struct Group {
  explicit Group(int n) : size(n), ticks(static_cast<size_t>(n), 0), slots(static_cast<size_t>(n)) {}
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::int64_t> ticks;   // ticks finished by each rank (monotonic)
  std::vector<Contribution> slots;   // each rank's contribution to its current collective
  bool aborted = false;
  std::string abort_cause;           // first cause, with the rank and collective where it arose

  void abort(const std::string& cause) {
    std::lock_guard<std::mutex> lock(mu);
    if (!aborted) {
      aborted = true;
      abort_cause = cause;
    }
    cv.notify_all();
  }
};

// Thrown inside a collective; converted into CollectiveError with the rank's view.
struct Abort {
  std::string cause;
  bool own;  // this rank found the cause (otherwise another rank aborted the group)
};

// One rank's execution context for one collective.
class RingStep {
 public:
  RingStep(Group& g, int rank, const char* collective, Seconds timeout)
      : g_(g), rank_(rank), collective_(collective), timeout_(timeout),
        deadline_(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout))) {}

  int left() const { return (rank_ + g_.size - 1) % g_.size; }
  int right() const { return (rank_ + 1) % g_.size; }

  // Publishes this rank's contribution (one tick), then, in a second tick once the
  // neighbours have published theirs, checks that they issued the same collective.
  void publish(const Contribution& c) {
    wait_neighbours();
    {
      std::lock_guard<std::mutex> lock(g_.mu);
      g_.slots[static_cast<size_t>(rank_)] = c;
    }
    finish_tick();
    step([&] { check_neighbours(); });
  }
  const Contribution& slot(int r) const { return g_.slots[static_cast<size_t>(r)]; }

  // Runs `work` as one ring step: waits until both neighbours finished the previous
  // tick, runs it, and marks the tick finished.
  template <typename F> void step(F&& work) {
    wait_neighbours();
    work();
    finish_tick();
  }
  void idle_step() { step([] {}); }

  void check_neighbours() {
    const Contribution& me = slot(rank_);
    for (int nb : {left(), right()}) {
      const Contribution& other = slot(nb);
      if (std::strcmp(other.collective, me.collective) != 0 || other.dtype != me.dtype || other.count != me.count ||
          other.root != me.root || other.op != me.op)
        fail(fmt::format("mismatched collectives: rank {} issued {} ({} x {}, root {}, op {}) but rank {} issued {} ({} x {}, root {}, op {})",
                         rank_, me.collective, me.count, dtype_name(me.dtype), me.root, reduce_op_name(me.op), nb,
                         other.collective, other.count, dtype_name(other.dtype), other.root, reduce_op_name(other.op)));
    }
  }

  void fail(const std::string& cause) {
    g_.abort(fmt::format("{} on rank {}: {}", collective_, rank_, cause));
    throw Abort{cause, true};
  }

 private:
  void wait_neighbours() {
    std::unique_lock<std::mutex> lock(g_.mu);
    const std::int64_t need = g_.ticks[static_cast<size_t>(rank_)];
    auto ready = [&] {
      return g_.aborted || (g_.ticks[static_cast<size_t>(left())] >= need &&
                            g_.ticks[static_cast<size_t>(right())] >= need);
    };
    if (!g_.cv.wait_until(lock, deadline_, ready)) {
      // Name the rank furthest behind, not just the neighbour: when one rank is late
      // the wait cascades around the ring and the neighbour is only its victim.
      int late = 0;
      for (int r = 1; r < g_.size; ++r)
        if (g_.ticks[static_cast<size_t>(r)] < g_.ticks[static_cast<size_t>(late)]) late = r;
      lock.unlock();
      fail(fmt::format("timed out after {} s waiting for rank {}", timeout_, late));
    }
    if (g_.aborted) throw Abort{g_.abort_cause, false};
  }
  void finish_tick() {
    std::lock_guard<std::mutex> lock(g_.mu);
    ++g_.ticks[static_cast<size_t>(rank_)];
    g_.cv.notify_all();
  }

  Group& g_;
  int rank_;
  const char* collective_;
  Seconds timeout_;
  Clock::time_point deadline_;
};

// ---- element-wise reductions over raw buffers ------------------------------------
// dst[i] = op(a[i], b[i]) without touching a (reduce's chain into scratch).
template <typename T> void combine(ReduceOp op, Elements n, const T* a, const T* b, T* dst) {
  if (n > 0) std::memcpy(dst, b, static_cast<size_t>(n) * sizeof(T));  // dst may be null when n is 0
  reduce_into<T>(op, n, a, dst);
}

template <typename T> void divide(Elements n, int by, T* x) {
  for (Elements i = 0; i < n; ++i) x[i] = static_cast<T>(x[i] / static_cast<T>(by));
}

void reduce_bytes(DType t, ReduceOp op, Elements n, const void* src, void* dst) {
  dispatch_host_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    reduce_into<T>(op, n, static_cast<const T*>(src), static_cast<T*>(dst));
  });
}
void combine_bytes(DType t, ReduceOp op, Elements n, const void* a, const void* b, void* dst) {
  dispatch_host_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    combine<T>(op, n, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(dst));
  });
}
void divide_bytes(DType t, Elements n, int by, void* x) {
  dispatch_host_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    divide<T>(n, by, static_cast<T*>(x));
  });
}

// Chunk c of a length-n buffer split over `parts` ranks: [begin, end) in elements.
// Balanced floor split, so chunks may be empty when n < parts.
Elements chunk_begin(Elements n, int parts, int c) { return n * c / parts; }

char* at(void* base, DType t, Elements i) { return static_cast<char*>(base) + i * dtype_size_bytes(t); }

// Ring reduce-scatter over `buf` (each rank's own copy, length n, split in N chunks):
// at step s rank r adds chunk (r - s - 1 + shift) of its left neighbour into its own.
// After N-1 steps rank r holds the full reduction of chunk (r + 1 + shift).
// Race-freedom: at step s rank r writes chunk (r - s - 1 + shift) while its right
// neighbour reads r's chunk (r - s + shift); they differ whenever N > 1.
void ring_reduce_scatter(RingStep& st, int rank, int n_ranks, DType t, ReduceOp op, Elements n, int shift,
                         void* own) {
  const int left = st.left();
  for (int s = 0; s < n_ranks - 1; ++s) {
    st.step([&] {
      const int c = ((rank - s - 1 + shift) % n_ranks + 2 * n_ranks) % n_ranks;
      const Elements b = chunk_begin(n, n_ranks, c), e = chunk_begin(n, n_ranks, c + 1);
      reduce_bytes(t, op, e - b, at(st.slot(left).buffer, t, b), at(own, t, b));
    });
  }
}

// Ring all-gather: rank r starts owning chunk (r + 1 + shift); at step s it copies
// chunk (r - s + shift) from its left neighbour.
void ring_all_gather(RingStep& st, int rank, int n_ranks, DType t, Elements n, int shift, void* own,
                     bool skip_last_step = false) {
  const int left = st.left();
  const int steps = skip_last_step ? n_ranks - 2 : n_ranks - 1;
  for (int s = 0; s < n_ranks - 1; ++s) {
    if (s >= steps) {  // the planted bug still ticks, so the ring stays in lockstep
      st.idle_step();
      continue;
    }
    st.step([&] {
      const int c = ((rank - s + shift) % n_ranks + 2 * n_ranks) % n_ranks;
      const Elements b = chunk_begin(n, n_ranks, c), e = chunk_begin(n, n_ranks, c + 1);
      if (e > b) std::memcpy(at(own, t, b), at(st.slot(left).buffer, t, b), static_cast<size_t>((e - b) * dtype_size_bytes(t)));
    });
  }
}

// Why a collective failed, as plain strings handed over under the Work's mutex.
struct HostFailure {
  std::string collective;
  int rank = -1;
  std::string cause;
};

// A Work completed by the rank's worker thread. A failure is rethrown as a fresh
// CollectiveError built in the waiting thread: no exception object (and no
// reference-counted message) is shared between threads, which ThreadSanitizer cannot
// follow through the uninstrumented C++ runtime.
class HostWork : public Work {
 public:
  void wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    if (error_) throw CollectiveError(error_->collective, error_->rank, error_->cause);
  }
  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  void complete(std::optional<HostFailure> e) {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(e);
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::optional<HostFailure> error_;
};

class HostRingCommunicator : public AbortableCommunicator {
 public:
  HostRingCommunicator(std::shared_ptr<Group> g, int rank) : g_(std::move(g)), rank_(rank) {
    worker_ = std::thread([this] { run(); });
  }
  ~HostRingCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      // Collectives still queued would leave the other ranks waiting for this one.
      if (busy_ || !queue_.empty())
        g_->abort(fmt::format("the communicator of rank {} was destroyed with collectives pending", rank_));
      cv_.notify_all();
    }
    worker_.join();
  }

  int rank() const override { return rank_; }
  int size() const override { return g_->size; }
  std::string backend_name() const override { return "host-ring"; }
  void abort(const std::string& cause) override {
    g_->abort(fmt::format("rank {} aborted the group: {}", rank_, cause));
  }

  WorkPtr all_reduce(Tensor& t, const AllReduceOptions& o) override {
    check_floating_or_int("all_reduce", t);
    return enqueue("all_reduce", o.timeout, [this, t, o](RingStep& st) {
      const int n = g_->size;
      st.publish(Contribution{"all_reduce", t.dtype(), t.numel(), 0, o.op, t.data()});
      ring_reduce_scatter(st, rank_, n, t.dtype(), o.op, t.numel(), 0, t.data());
      // Planted fault: the all-gather omits its last step, one chunk stays partial.
      ring_all_gather(st, rank_, n, t.dtype(), t.numel(), 0, t.data(),
                      fault_active(Fault::ring_skips_last_all_gather_step));
      // Divide in the completion tick: the right neighbour may still be copying the
      // last chunk from this buffer during the final all-gather tick.
      st.step([&] {
        if (o.op == ReduceOp::avg) divide_bytes(t.dtype(), t.numel(), n, t.data());
      });
    });
  }

  // Chain from the root around the ring: rank root+s+1 copies from its left at step s.
  WorkPtr broadcast(Tensor& t, const BroadcastOptions& o) override {
    check_floating_or_int("broadcast", t);
    check_root("broadcast", o.root);
    return enqueue("broadcast", o.timeout, [this, t, o](RingStep& st) {
      const int n = g_->size;
      st.publish(Contribution{"broadcast", t.dtype(), t.numel(), o.root, ReduceOp::sum, t.data()});
      for (int s = 0; s < n - 1; ++s)
        st.step([&] {
          if (rank_ == (o.root + s + 1) % n && t.size_bytes() > 0)
            std::memcpy(t.data(), st.slot(st.left()).buffer, static_cast<size_t>(t.size_bytes()));
        });
      st.idle_step();
    });
  }

  // Chain ending at the root: rank root+1 contributes its tensor as is; rank root+s+2
  // combines its own tensor with its left's partial into scratch; the root writes
  // the result into its tensor. Non-root tensors are left unchanged.
  WorkPtr reduce(Tensor& t, const ReduceOptions& o) override {
    check_floating_or_int("reduce", t);
    check_root("reduce", o.root);
    return enqueue("reduce", o.timeout, [this, t, o](RingStep& st) {
      const int n = g_->size;
      const bool first = rank_ == (o.root + 1) % n;
      std::vector<char> scratch(first || rank_ == o.root ? 0 : static_cast<size_t>(t.size_bytes()));
      void* partial = first ? t.data() : (rank_ == o.root ? t.data() : scratch.data());
      st.publish(Contribution{"reduce", t.dtype(), t.numel(), o.root, o.op, partial});
      for (int s = 0; s < n - 1; ++s)
        st.step([&] {
          if (rank_ != (o.root + s + 2) % n) return;
          const void* from_left = st.slot(st.left()).buffer;
          if (rank_ == o.root)
            reduce_bytes(t.dtype(), o.op, t.numel(), from_left, t.data());
          else
            combine_bytes(t.dtype(), o.op, t.numel(), from_left, t.data(), scratch.data());
        });
      if (rank_ == o.root && o.op == ReduceOp::avg) divide_bytes(t.dtype(), t.numel(), n, t.data());
      st.idle_step();
    });
  }

  WorkPtr all_gather(Tensor& out, const Tensor& in, const AllGatherOptions& o) override {
    check_floating_or_int("all_gather", in);
    check_blocks("all_gather", out, in);
    return enqueue("all_gather", o.timeout, [this, out, in](RingStep& st) {
      const int n = g_->size;
      const Elements block = in.numel();
      // Own block first, so the left-to-right copies below find it.
      if (in.size_bytes() > 0) std::memcpy(at(out.data(), out.dtype(), block * rank_), in.data(), static_cast<size_t>(in.size_bytes()));
      st.publish(Contribution{"all_gather", in.dtype(), block, 0, ReduceOp::sum, out.data()});
      // Blocks are chunks of out: rank r owns chunk r, i.e. shift = -1.
      ring_all_gather(st, rank_, n, in.dtype(), block * n, -1, out.data());
      st.idle_step();
    });
  }

  WorkPtr reduce_scatter(Tensor& out, const Tensor& in, const ReduceScatterOptions& o) override {
    check_floating_or_int("reduce_scatter", in);
    check_blocks("reduce_scatter", in, out);
    return enqueue("reduce_scatter", o.timeout, [this, out, in, o](RingStep& st) {
      const int n = g_->size;
      const Elements block = out.numel();
      // The input is const: reduce in a scratch copy, then take this rank's block.
      std::vector<char> scratch(static_cast<size_t>(in.size_bytes()));
      if (!scratch.empty()) std::memcpy(scratch.data(), in.data(), scratch.size());
      st.publish(Contribution{"reduce_scatter", in.dtype(), block, 0, o.op, scratch.data()});
      // shift = -1: rank r ends with chunk r, its own block.
      ring_reduce_scatter(st, rank_, n, in.dtype(), o.op, block * n, -1, scratch.data());
      if (out.size_bytes() > 0)
        std::memcpy(out.data(), at(scratch.data(), in.dtype(), block * rank_), static_cast<size_t>(out.size_bytes()));
      if (o.op == ReduceOp::avg) divide_bytes(out.dtype(), block, n, out.data());
      st.idle_step();
    });
  }

  // After d ticks past arrival, every rank within ring distance d has arrived, so
  // floor(N/2) ticks make a barrier with neighbour-only synchronisation.
  WorkPtr barrier(const BarrierOptions& o) override {
    return enqueue("barrier", o.timeout, [this](RingStep& st) {
      st.publish(Contribution{"barrier", DType::f32, 0, 0, ReduceOp::sum, nullptr});
      for (int s = 0; s < g_->size / 2; ++s) st.idle_step();
    });
  }

 private:
  using Task = std::function<void(RingStep&)>;
  struct Item {
    const char* collective;
    Seconds timeout;
    Task task;
    std::shared_ptr<HostWork> work;
  };

  void check_floating_or_int(const char* collective, const Tensor& t) const {
    if (t.numel() > 0 && t.data() == nullptr)
      throw std::invalid_argument(fmt::format("{} on rank {}: tensor {} has no data (shape-only tensors need the sim communicator)",
                                              collective, rank_, shape_to_string(t.shape())));
  }
  void check_root(const char* collective, int root) const {
    if (root < 0 || root >= g_->size)
      throw std::invalid_argument(fmt::format("{} on rank {}: root {} is outside 0..{}", collective, rank_, root, g_->size - 1));
  }
  void check_blocks(const char* collective, const Tensor& big, const Tensor& block) const {
    if (big.dtype() != block.dtype() || big.numel() != block.numel() * g_->size)
      throw std::invalid_argument(fmt::format("{} on rank {}: {} tensor of {} elements needs a {} tensor of {} x {} elements, got {} {}",
                                              collective, rank_, dtype_name(block.dtype()), block.numel(),
                                              dtype_name(block.dtype()), g_->size, block.numel(),
                                              dtype_name(big.dtype()), big.numel()));
  }

  WorkPtr enqueue(const char* collective, Seconds timeout, Task task) {
    if (!(timeout > 0))
      throw std::invalid_argument(fmt::format("{} on rank {}: timeout must be positive, got {} s", collective, rank_, timeout));
    auto work = std::make_shared<HostWork>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(Item{collective, timeout, std::move(task), work});
      cv_.notify_all();
    }
    return work;
  }

  void run() {
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        item = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      std::optional<HostFailure> error;
      try {
        {
          std::lock_guard<std::mutex> lock(g_->mu);
          if (g_->aborted) throw Abort{g_->abort_cause, false};
        }
        RingStep st(*g_, rank_, item.collective, item.timeout);
        item.task(st);
      } catch (const Abort& a) {
        error = HostFailure{item.collective, rank_, a.own ? a.cause : "group aborted: " + a.cause};
      } catch (const std::exception& e) {
        // An unexpected error inside the collective still must not leave the others waiting.
        g_->abort(fmt::format("{} on rank {}: {}", item.collective, rank_, e.what()));
        error = HostFailure{item.collective, rank_, e.what()};
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        busy_ = false;
      }
      item.work->complete(error);
    }
  }

  std::shared_ptr<Group> g_;
  int rank_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_host_ring_communicators(int world_size) {
  if (world_size < 1)
    throw std::invalid_argument(fmt::format("host ring communicator: world size must be at least 1, got {}", world_size));
  auto group = std::make_shared<Group>(world_size);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < world_size; ++r) out.push_back(std::make_unique<HostRingCommunicator>(group, r));
  return out;
}

}  // namespace dpt
