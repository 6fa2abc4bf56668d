#include "sim/twin/sim_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>

#include <fmt/format.h>
#include <simgrid/Exception.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/ConditionVariable.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>

#include "sim/twin/chrome_trace.hpp"
#include "engine/core/kernels.hpp"
#include "engine/host/host_gemm.hpp"
#include "sim/twin/sim_communicator.hpp"

namespace dpt {

namespace s4u = simgrid::s4u;

SimBackend::SimBackend(SimMachine machine, SimBackendOptions options)
    : machine_(std::move(machine)), options_(options) {
  if (machine_.gpus.empty()) throw std::invalid_argument(fmt::format("sim machine '{}' has no GPUs", machine_.name));
  if (!machine_.transfer_async)
    machine_.transfer_async = [](s4u::Host* a, s4u::Host* b, Bytes n) {
      return s4u::Comm::sendto_async(a, b, static_cast<uint64_t>(n));
    };
  if (!machine_.peer_to_peer) machine_.peer_to_peer = [](int, int) { return true; };
  if (options_.symmetric_world != 0) {
    if (options_.symmetric_world < static_cast<int>(machine_.gpus.size()))
      throw std::invalid_argument(fmt::format("sim backend: symmetric world of {} ranks is smaller than the {} simulated GPUs",
                                              options_.symmetric_world, machine_.gpus.size()));
    if (options_.numeric)
      throw std::invalid_argument(
          "sim backend: symmetric ranks need shape-only mode (numeric collectives need every rank's data)");
  }
  // Numeric mode runs the host kernels (one BLAS thread per caller, as the host
  // backend: same results bit for bit); their GEMM libraries are loaded now.
  if (options_.numeric) (void)host_gemm_info();
  for (size_t i = 0; i < machine_.gpus.size(); ++i) {
    const SimGpu& g = machine_.gpus[i];
    if (!g.host || !g.cpu) throw std::invalid_argument(fmt::format("sim machine '{}': GPU {} has no host", machine_.name, i));
    devices_.push_back(std::make_unique<SimDevice>(*this, static_cast<int>(i), fmt::format("sim:gpu{}", i), g.rates,
                                                   g.host, options_.compute_dtype, options_.numeric,
                                                   options_.precision));
  }
  host_memory_.push_back(std::make_unique<SimDevice>(*this, -1, "sim:cpu", SimGpuRates{}, machine_.gpus[0].cpu,
                                                     options_.compute_dtype, options_.numeric));
  if (ChromeTrace* t = options_.trace) {
    t->name_process(0, fmt::format("host ({})", machine_.name));
    t->name_thread(0, 0, "copies to and from host memory");
    for (auto& d : devices_) {
      t->name_process(trace_pid(d->index()), d->name());
      for (int s = 0; s < kSimStreamCount; ++s)
        t->name_thread(trace_pid(d->index()), s, sim_stream_name(static_cast<SimStream>(s)));
    }
  }
}

SimBackend::~SimBackend() = default;

Device& SimBackend::device(int index) { return sim_device(index); }

SimDevice& SimBackend::sim_device(int index) {
  if (index < 0 || index >= device_count())
    throw std::out_of_range(fmt::format("sim backend has devices 0..{}, asked for {}", device_count() - 1, index));
  return *devices_[static_cast<size_t>(index)];
}

// ---- host clocks ----------------------------------------------------------------------
SimBackend::ActorState& SimBackend::self_state() { return actors_[static_cast<long>(s4u::this_actor::get_pid())]; }

Seconds SimBackend::host_time() {
  if (s4u::Actor::self() == nullptr) return s4u::Engine::get_clock();
  return s4u::Engine::get_clock() + self_state().debt;
}

void SimBackend::host_advance_to(Seconds t) {
  ActorState& st = self_state();
  const Seconds now = s4u::Engine::get_clock() + st.debt;
  if (t > now) st.debt += t - now;
}

void SimBackend::host_flush() {
  ActorState& st = self_state();
  if (st.debt > 0) {
    const Seconds d = st.debt;
    st.debt = 0;
    s4u::this_actor::sleep_for(d);
  }
}

Seconds SimBackend::now() { return host_time(); }

// Host threads in the trace: process 0 (the host), a row per thread from 100 on
// (the main thread, then worker i at 101 + i), and row 99 for the GIL.
constexpr int kTraceMainThread = 100;
constexpr int kTraceGilRow = 99;

int SimBackend::trace_host_thread() {
  const ActorState& st = self_state();
  const int tid = kTraceMainThread + 1 + st.worker;
  if (named_host_threads_.insert(tid).second)
    options_.trace->name_thread(0, tid, st.worker < 0 ? "main thread: dispatch"
                                                      : fmt::format("worker {} thread: dispatch", st.worker));
  return tid;
}

// One dispatch slice per run of back-to-back ops (each op would be thousands of slices).
void SimBackend::trace_dispatch(Seconds start, Seconds cost, int ops) {
  ActorState& st = self_state();
  const int tid = trace_host_thread();
  if (st.dispatch_event) {
    TraceEvent& last = options_.trace->event(*st.dispatch_event);
    if (last.tid == tid && std::abs(last.start_s + last.duration_s - start) < 1e-12) {
      last.duration_s += cost;
      last.number_args.back().second += ops;
      return;
    }
  }
  st.dispatch_event = options_.trace->add({"dispatch", "host", 0, tid, start, cost, {}, {{"ops", ops}}});
}

int SimBackend::trace_copy_row(int device, Seconds begin, Seconds end) {
  auto& rows = copy_rows_[device];
  size_t row = 0;
  for (; row < rows.size(); ++row)
    if (std::none_of(rows[row].begin(), rows[row].end(),
                     [&](const auto& iv) { return begin < iv.second && iv.first < end; }))
      break;
  if (row == rows.size()) rows.emplace_back();
  rows[row].emplace_back(begin, end);
  if (row == 0) return static_cast<int>(SimStream::copy);
  constexpr int kFirstExtraCopyRow = 10;
  const int tid = kFirstExtraCopyRow + static_cast<int>(row);
  if (rows.size() == row + 1 && rows[row].size() == 1)
    options_.trace->name_thread(trace_pid(device), tid, fmt::format("copy (concurrent {})", row + 1));
  return tid;
}

void SimBackend::host_dispatch(int ops) {
  const Seconds cost = machine_.dispatch_cost_s * ops;
  if (!(cost > 0)) return;
  dispatch_total_s_ += cost;
  ActorState& st = self_state();
  const bool shared_gil = machine_.gil && options_.workers == SimWorkerModel::threads_of_one_process;
  if (!shared_gil) {
    // Nothing observes this actor until it next interacts with the simulation: charge lazily.
    if (options_.trace) trace_dispatch(host_time(), cost, ops);
    st.debt += cost;
    return;
  }
  // Under a GIL the threads of one process dispatch one at a time.
  host_flush();
  auto& gil = gils_[st.process];
  if (!gil) gil = s4u::Mutex::create();
  const Seconds asked = s4u::Engine::get_clock();
  gil->lock();
  const Seconds held = s4u::Engine::get_clock();
  if (options_.trace) {
    if (named_host_threads_.insert(kTraceGilRow).second) options_.trace->name_thread(0, kTraceGilRow, "GIL (holder)");
    const int tid = trace_host_thread();
    if (held > asked) {
      options_.trace->add({"waiting for the GIL", "host", 0, tid, asked, held - asked,
                           {{"lock", fmt::format("GIL of process {}", st.process)}}, {}});
      st.dispatch_event.reset();
    }
    trace_dispatch(held, cost, ops);
    options_.trace->add({st.worker < 0 ? "GIL: main thread" : fmt::format("GIL: worker {}", st.worker), "host", 0,
                         kTraceGilRow, held, cost, {{"holder", st.worker < 0 ? "main" : std::to_string(st.worker)}}, {}});
  }
  s4u::this_actor::sleep_for(cost);
  gil->unlock();
}

// ---- copies ---------------------------------------------------------------------------
namespace {

// A copy's SimGrid comms (one, or two legs when staged through host memory). Both
// devices' streams hold it, so two actors may need its end: the first waits for the
// comms, later ones wait for the first.
class CopyPending : public SimPending {
 public:
  // not_before: the earliest end a rate bound allows (SimGrid 3.32 ignores a comm's own rate
  // under TCP-gamma 0, so the bound is kept here, as the collectives keep theirs).
  CopyPending(std::vector<s4u::CommPtr> comms, Seconds start, std::function<void(Seconds, Seconds)> on_done,
              Seconds not_before = 0)
      : comms_(std::move(comms)), start_(start), not_before_(not_before), on_done_(std::move(on_done)) {}
  Seconds wait_end() override {
    if (done_) return end_;
    if (waiting_) {
      if (!mu_) {
        mu_ = s4u::Mutex::create();
        cv_ = s4u::ConditionVariable::create();
      }
      std::unique_lock<s4u::Mutex> lock(*mu_);
      while (!done_) cv_->wait(lock);
      return end_;
    }
    waiting_ = true;
    Seconds end = start_;
    for (auto& c : comms_) {
      c->wait();
      end = std::max(end, c->get_finish_time());
    }
    if (not_before_ > end) {
      end = not_before_;
      if (end > s4u::Engine::get_clock()) s4u::this_actor::sleep_until(end);
    }
    end_ = end;
    done_ = true;
    comms_.clear();
    if (on_done_) on_done_(start_, end_);
    if (cv_) cv_->notify_all();
    return end_;
  }

 private:
  std::vector<s4u::CommPtr> comms_;
  Seconds start_;
  Seconds not_before_ = 0;
  std::function<void(Seconds, Seconds)> on_done_;
  bool waiting_ = false, done_ = false;
  Seconds end_ = 0;
  s4u::MutexPtr mu_;
  s4u::ConditionVariablePtr cv_;
};

}  // namespace

void SimBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.dtype() != dst.dtype() || src.numel() != dst.numel())
    throw std::invalid_argument(fmt::format("copy {} {} -> {} {}: dtype or size differ", dtype_name(src.dtype()),
                                            shape_to_string(src.shape()), dtype_name(dst.dtype()),
                                            shape_to_string(dst.shape())));
  auto* from = dynamic_cast<SimDevice*>(&src.device());
  auto* to = dynamic_cast<SimDevice*>(&dst.device());
  if (!from || !to)
    throw std::invalid_argument(fmt::format("sim backend: copy from {} to {}: both tensors must be on sim devices",
                                            src.device().name(), dst.device().name()));
  if (from == to) {
    kernel_copy(src, dst);
    return;
  }
  // The data moves now (numeric mode); what follows is when, in simulated time.
  if (options_.numeric && src.size_bytes() > 0 && src.data() != dst.data())
    std::memcpy(dst.data(), src.data(), static_cast<size_t>(src.size_bytes()));
  const Bytes n = src.size_bytes();
  host_dispatch(1);
  if (n == 0) return;
  const Seconds ready = std::max({host_time(), from->stream_ready(SimStream::compute), to->stream_ready(SimStream::compute)});
  host_flush();
  if (ready > s4u::Engine::get_clock()) s4u::this_actor::sleep_until(ready);
  const Seconds start = s4u::Engine::get_clock();
  std::vector<s4u::CommPtr> comms;
  Seconds staged_not_before = 0;
  const bool from_host = from->index() < 0, to_host = to->index() < 0;
  if (from_host) {
    const SimGpu& g = machine_.gpus[static_cast<size_t>(to->index())];
    comms.push_back(machine_.transfer_async(g.cpu, g.host, n));
  } else if (to_host) {
    const SimGpu& g = machine_.gpus[static_cast<size_t>(from->index())];
    comms.push_back(machine_.transfer_async(g.host, g.cpu, n));
  } else if (machine_.peer_to_peer(from->index(), to->index())) {
    comms.push_back(machine_.transfer_async(from->host(), to->host(), n));
  } else {
    // Staged through host memory: the driver pipelines the two legs, so they run together,
    // at no more than the machine's staged one-way rate (p2pBandwidthLatencyTest's
    // "Unidirectional P2P=Disabled" reaches about 0.64 of the link, not the link's rate).
    const SimGpu& a = machine_.gpus[static_cast<size_t>(from->index())];
    const SimGpu& b = machine_.gpus[static_cast<size_t>(to->index())];
    comms.push_back(machine_.transfer_async(a.host, a.cpu, n));
    if (a.cpu != b.cpu) comms.push_back(machine_.transfer_async(a.cpu, b.cpu, n));
    comms.push_back(machine_.transfer_async(b.cpu, b.host, n));
    // Staged copies through one GPU queue for its staged rate (concurrent copies out of GPU 0
    // shared its link at the links' rate, each capped alone: an outside review's 4-GPU
    // broadcast moved 25.2 GB/s through a 20.2 GB/s staged rate).
    if (machine_.staged_copy_Bps > 0) {
      Seconds& a_free = staged_free_[from->index()];
      Seconds& b_free = staged_free_[to->index()];
      staged_not_before = std::max({start, a_free, b_free}) + static_cast<double>(n) / machine_.staged_copy_Bps;
      a_free = b_free = staged_not_before;
    }
  }
  const std::string path = from_host ? "host to device" : to_host ? "device to host"
                          : comms.size() == 1    ? "peer to peer"
                                                 : "peer, staged through host memory";
  auto pending = std::make_shared<CopyPending>(std::move(comms), start, [this, from, to, n, path](Seconds b, Seconds e) {
    add_communication_time(e - b);
    for (SimDevice* d : {from, to}) {
      if (d->index() < 0) continue;
      if (from->index() < 0 || to->index() < 0)
        d->note_host_copy(b, e);
      else
        d->note_communication(b, e);
      if (options_.trace)
        options_.trace->add({"copy", "copy", trace_pid(d->index()), trace_copy_row(d->index(), b, e), b, e - b,
                             {{"path", path}, {"from", from->name()}, {"to", to->name()}},
                             {{"bytes", static_cast<double>(n)}}});
    }
  }, staged_not_before);
  if (from_host || to_host || options_.synchronous) {
    // Copies with pageable host memory are synchronous for the host, as in PyTorch.
    host_advance_to(pending->wait_end());
    for (SimDevice* d : {from, to})
      if (d->index() >= 0) d->stream_wait_until(SimStream::compute, s4u::Engine::get_clock());
    return;
  }
  // Peer copies are asynchronous: both devices' streams wait for the copy, the host does not.
  from->stream_add_pending(SimStream::compute, pending);
  to->stream_add_pending(SimStream::compute, pending);
}

// ---- workers ----------------------------------------------------------------------------
void SimBackend::parallel_for(int n, const std::function<void(int)>& fn) {
  if (n < 0) throw std::invalid_argument(fmt::format("parallel_for: negative worker count {}", n));
  // Workers start one after another on the caller (thread or process creation).
  self_state().debt += machine_.worker_start_cost_s * n;
  host_flush();
  const int caller_process = self_state().process;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<s4u::ActorPtr> workers;
  workers.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const bool own_process = options_.workers == SimWorkerModel::process_per_worker;
    const int process = own_process ? next_process_++ : caller_process;
    s4u::Host* where = own_process && i < device_count() ? machine_.gpus[static_cast<size_t>(i)].cpu
                                                         : s4u::this_actor::get_host();
    workers.push_back(s4u::Actor::create(fmt::format("worker-{}", i), where, [this, i, process, &fn, &errors] {
      self_state().process = process;
      self_state().worker = i;
      try {
        fn(i);
      } catch (const simgrid::ForcefulKillException&) {
        throw;
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(i)] = std::current_exception();
        if (!first_failure_) first_failure_ = std::current_exception();
        abort_collectives(fmt::format("worker {} failed: {}", i, e.what()));
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
        if (!first_failure_) first_failure_ = std::current_exception();
        abort_collectives(fmt::format("worker {} failed", i));
      }
      host_flush();
      actors_.erase(static_cast<long>(s4u::this_actor::get_pid()));
    }));
  }
  for (auto& w : workers) w->join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void SimBackend::abort_collectives(const std::string& cause) {
  if (aborted_) return;
  aborted_ = true;
  abort_cause_ = cause;
  for (auto& wake : abort_waiters_) wake();
}

std::vector<std::unique_ptr<Communicator>> SimBackend::make_communicators(const std::vector<int>& devices) {
  for (int d : devices) (void)sim_device(d);  // validates the indices
  return make_sim_communicators(*this, devices);
}

namespace {
class SimMutex : public BackendMutex {
 public:
  void lock() override { mu_->lock(); }
  void unlock() override { mu_->unlock(); }

 private:
  s4u::MutexPtr mu_ = s4u::Mutex::create();
};
}  // namespace

std::unique_ptr<BackendMutex> SimBackend::make_mutex() { return std::make_unique<SimMutex>(); }

void sim_run_in_actor(s4u::Host* host, const std::function<void()>& body) {
  std::exception_ptr error;
  s4u::Actor::create("driver", host, [&] {
    try {
      body();
    } catch (const simgrid::ForcefulKillException&) {
      throw;
    } catch (...) {
      error = std::current_exception();
    }
  });
  s4u::Engine::get_instance()->run();
  if (error) std::rethrow_exception(error);
}

}  // namespace dpt
