// Forked-child simulations: see sim_process.hpp.
#include "sim/twin/sim_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <xbt/log.h>

#include "engine/core/device.hpp"

namespace dpt::sim {

namespace {

// One tag byte says what the payload is: the result or an exception's message.
constexpr char kTagResult = 'R';
constexpr char kTagInvalidArgument = 'I';
constexpr char kTagOutOfMemory = 'O';
constexpr char kTagBudget = 'B';
constexpr char kTagError = 'E';

void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // the parent is gone; nothing left to tell
    }
    done += static_cast<size_t>(n);
  }
}

// ---- stop signals ------------------------------------------------------------------
// Plain globals of lock-free types: the handler reads and writes nothing else.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kMaxChildren = 1024;
std::atomic<pid_t> g_children[kMaxChildren];
std::atomic<int> g_scopes{0};
volatile std::sig_atomic_t g_stop_signal = 0;
bool g_installed = false;      // our handler is installed in this process
bool g_have_original = false;  // g_original holds the dispositions from before our handler
struct sigaction g_original[3];  // by kStopSignals index

int stop_index(int sig) {
  for (int i = 0; i < 3; ++i)
    if (kStopSignals[i] == sig) return i;
  return -1;
}

// Async-signal-safe: atomics, kill, sigaction and raise only.
void on_stop_signal(int sig) {
  const int saved_errno = errno;
  if (g_scopes.load() == 0) {
    // Nobody waits on children: behave as before our handler existed (the signal is
    // blocked while we run, so raise() takes effect on return).
    const int i = stop_index(sig);
    if (i >= 0) ::sigaction(sig, &g_original[i], nullptr);
    ::raise(sig);
  } else {
    g_stop_signal = sig;
    for (auto& c : g_children) {
      const pid_t pid = c.load();
      if (pid > 0) ::kill(pid, sig);
    }
  }
  errno = saved_errno;
}

void install_stop_handler() {
  if (g_installed) return;
  g_installed = true;
  g_have_original = true;
  for (int i = 0; i < 3; ++i) {
    ::sigaction(kStopSignals[i], nullptr, &g_original[i]);
    if (g_original[i].sa_handler == SIG_IGN) continue;  // nohup and the like: keep ignoring
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a blocking wait returns EINTR and looks at the flag
    ::sigaction(kStopSignals[i], &sa, nullptr);
  }
}

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kStopSignals) sigaddset(&set, sig);
  return set;
}

// The result pipe of this process when it is a child of run_in_child_process.
int g_result_fd = -1;

// In a child: hands `message` to the parent as `tag` and ends without exit handlers.
[[noreturn]] void child_report_and_exit(char tag, const std::string& message) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  if (g_result_fd >= 0) write_all(g_result_fd, tag + message);
  ::_exit(0);
}

// Reads `fd` until EOF (true) or until `wall_s` seconds have passed (false). A stop
// signal interrupts poll; the handler has already forwarded it to the child, so EOF follows.
bool read_until_eof(int fd, double wall_s, std::string& data) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wall_s));
  char buf[65536];
  for (;;) {
    const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left_ms <= 0) return false;
    struct pollfd p {fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left_ms, 1'000'000)));
    if (ready <= 0) continue;  // EINTR, or the loop checks the deadline
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    data.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

Interrupted::Interrupted(int signal)
    : std::runtime_error(fmt::format("interrupted by signal {} ({}); child processes stopped", signal,
                                     strsignal(signal))),
      signal_(signal) {}

ChildBudget ChildBudget::from_env() {
  ChildBudget b;
  if (const char* v = std::getenv("DPTWIN_SIM_WALL_S")) {
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(x > 0 && x <= 1e7))
      throw std::invalid_argument(fmt::format("DPTWIN_SIM_WALL_S='{}': expected seconds in (0, 1e7]", v));
    b.wall_s = x;
  }
  if (const char* v = std::getenv("DPTWIN_SIM_EVENTS")) {
    char* end = nullptr;
    const long long x = std::strtoll(v, &end, 10);
    if (end == v || *end != '\0' || x < 1)
      throw std::invalid_argument(fmt::format("DPTWIN_SIM_EVENTS='{}': expected a positive integer", v));
    b.events = x;
  }
  return b;
}

ChildProcessScope::ChildProcessScope() {
  install_stop_handler();
  g_scopes.fetch_add(1);
}

ChildProcessScope::~ChildProcessScope() { g_scopes.fetch_sub(1); }

pid_t ChildProcessScope::fork_child() {
  const sigset_t set = stop_signal_set();
  sigset_t old;
  ::sigprocmask(SIG_BLOCK, &set, &old);
  // Buffered output would otherwise be written twice, once by each process.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(err)));
  }
  if (pid == 0) {
    for (auto& c : g_children) c.store(0);
    g_scopes.store(0);
    g_stop_signal = 0;
    restore_stop_signal_dispositions();
    g_installed = false;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    return 0;
  }
  bool stored = false;
  for (auto& c : g_children) {
    pid_t expected = 0;
    if (c.compare_exchange_strong(expected, pid)) {
      stored = true;
      break;
    }
  }
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  if (!stored) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw std::runtime_error(fmt::format("more than {} child processes at once", kMaxChildren));
  }
  return pid;
}

void ChildProcessScope::reaped(pid_t pid) {
  for (auto& c : g_children) {
    pid_t expected = pid;
    if (c.compare_exchange_strong(expected, 0)) return;
  }
}

int ChildProcessScope::stop_signal() { return g_stop_signal; }

void ChildProcessScope::throw_if_stopped() {
  const int sig = g_stop_signal;
  if (sig == 0) return;
  using Clock = std::chrono::steady_clock;
  const auto kill_at = Clock::now() + std::chrono::seconds(2);
  bool killed = false;
  for (;;) {
    bool any = false;
    for (auto& c : g_children) {
      const pid_t pid = c.load();
      if (pid <= 0) continue;
      any = true;
      if (::waitpid(pid, nullptr, WNOHANG) == pid) reaped(pid);
      else if (killed || Clock::now() >= kill_at) {
        ::kill(pid, SIGKILL);
        killed = true;
      }
    }
    if (!any) break;
    ::usleep(10'000);
  }
  throw Interrupted(sig);
}

void restore_stop_signal_dispositions() {
  if (g_have_original) {
    for (int i = 0; i < 3; ++i) ::sigaction(kStopSignals[i], &g_original[i], nullptr);
    return;
  }
  // No record of the dispositions before any handler (this process never installed
  // ours): SIG_DFL in place of a handler such as SimGrid's.
  for (int i = 0; i < 3; ++i) {
    struct sigaction current {};
    ::sigaction(kStopSignals[i], nullptr, &current);
    if (current.sa_handler != SIG_IGN && current.sa_handler != SIG_DFL) ::signal(kStopSignals[i], SIG_DFL);
  }
}

std::string run_in_child_process(const std::function<std::string()>& fn, const ChildBudget& budget) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe failed: {}", std::strerror(errno)));
  ChildProcessScope scope;
  pid_t pid = 0;
  try {
    scope.throw_if_stopped();  // a stop signal that a caller caught and went on from
    pid = scope.fork_child();
  } catch (...) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw;
  }
  if (pid == 0) {
    ::close(fds[0]);
    g_result_fd = fds[1];
    std::string out;
    try {
      out = kTagResult + fn();
    } catch (const std::invalid_argument& e) {
      out = kTagInvalidArgument + std::string(e.what());
    } catch (const dpt::OutOfMemory& e) {
      out = kTagOutOfMemory + std::string(e.what());
    } catch (const BudgetExceeded& e) {
      out = kTagBudget + std::string(e.what());
    } catch (const std::exception& e) {
      out = kTagError + std::string(e.what());
    } catch (...) {
      out = kTagError + std::string("unknown exception in the simulation process");
    }
    child_report_and_exit(out[0], out.substr(1));  // no atexit handlers: they belong to the parent
  }
  ::close(fds[1]);
  std::string data;
  const bool over_budget = !read_until_eof(fds[0], budget.wall_s, data);
  ::close(fds[0]);
  if (over_budget) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  scope.reaped(pid);
  scope.throw_if_stopped();
  if (over_budget)
    throw BudgetExceeded(fmt::format("the simulation process ran past its wall-clock budget of {} s and was killed "
                                     "(DPTWIN_SIM_WALL_S raises it; an implausible latency or bandwidth can cause this)",
                                     budget.wall_s));
  if (data.empty()) {
    if (WIFSIGNALED(status))
      throw std::runtime_error(fmt::format("simulation process killed by signal {} ({})", WTERMSIG(status),
                                           strsignal(WTERMSIG(status))));
    throw std::runtime_error(fmt::format("simulation process exited with status {} without a result",
                                         WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  const char tag = data[0];
  std::string payload = data.substr(1);
  switch (tag) {
    case kTagResult: return payload;
    case kTagInvalidArgument: throw std::invalid_argument(payload);
    case kTagOutOfMemory: throw dpt::OutOfMemory(payload);
    case kTagBudget: throw BudgetExceeded(payload);
    default: throw std::runtime_error(payload);
  }
}

std::unique_ptr<simgrid::s4u::Engine> make_engine() {
  static char arg0[] = "dptwin-sim";
  static char cfg_model[] = "--cfg=network/model:CM02";
  static char cfg_cross[] = "--cfg=network/crosstraffic:0";
  static char cfg_gamma[] = "--cfg=network/TCP-gamma:0";
  // The full max-min solver: SimGrid 3.32's default lazy update occasionally lets flows
  // exceed a link's bandwidth (seen: 8 flows into one GPU at 3x its PCIe bandwidth in a
  // 49-GPU tree all-reduce, 19 % faster than max-min sharing allows); the full solver
  // recomputes every share at every event and costs about a quarter more simulator time.
  static char cfg_optim[] = "--cfg=network/optim:Full";
  // Event times resolved to 1 ps, not SimGrid's default 1 ns: pipelined chains whose hops
  // share links settle into a phase pattern that depends on the order of near-simultaneous
  // events, and 1 ns rounding (5e-6 of a 200 us broadcast) was enough to flip it: a
  // 24-GPU broadcast on dgx-h100-cluster moved 2 % for 0.0014 % more bytes, and the
  // large-N replay (exact arithmetic) differed from it by up to 3.8 %. At 1 ps the two
  // agree to 1e-5 (the same pattern at 1e-10 .. 1e-14); sim_collectives_test holds it.
  static char cfg_precision[] = "--cfg=surf/precision:1e-12";
  static char log_root[] = "--log=root.thres:warning";
  static char log_cfg[] = "--log=xbt_cfg.thres:warning";
  // DPTWIN_SIM_CONTEXTS=thread|ucontext|raw|boost picks SimGrid's actor context factory.
  // Sanitizer runs want `thread`: AddressSanitizer does not know the stacks of SimGrid's
  // default swapped contexts, and an exception unwinding an actor's stack (a simulated
  // out-of-memory) then reads as a stack-buffer-underflow, a false positive.
  static std::string cfg_factory;
  static char* argv[] = {arg0, cfg_model, cfg_cross, cfg_gamma, cfg_optim, cfg_precision, log_root, log_cfg, nullptr,
                         nullptr};
  int argc = 8;
  if (const char* f = std::getenv("DPTWIN_SIM_CONTEXTS"); f != nullptr && *f != '\0') {
    const std::string factory(f);
    if (factory != "thread" && factory != "ucontext" && factory != "raw" && factory != "boost")
      throw std::invalid_argument(fmt::format("DPTWIN_SIM_CONTEXTS={}: expected thread, ucontext, raw or boost", factory));
    cfg_factory = "--cfg=contexts/factory:" + factory;
    argv[argc++] = cfg_factory.data();
  }
  return std::make_unique<simgrid::s4u::Engine>(&argc, argv);
}

std::optional<long> max_memory_maps() {
  std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r");
  if (!f) return std::nullopt;
  long maps = 0;
  const bool ok = std::fscanf(f, "%ld", &maps) == 1 && maps > 0;
  std::fclose(f);
  return ok ? std::optional<long>(maps) : std::nullopt;
}

std::string run_simulation(const HardwareSpec& hw, const std::function<void(Platform&)>& setup,
                           const std::function<std::string(Platform&)>& finish, const PlatformOptions& options) {
  return run_in_child_process([&]() {
    // The Engine is deliberately not destroyed: the child ends with _exit right after,
    // and tearing SimGrid down costs time and buys nothing.
    simgrid::s4u::Engine* engine = make_engine().release();
    restore_stop_signal_dispositions();  // SimGrid's SIGINT handler calls exit (see the header)
    // The event budget: a clock that advances by ever smaller steps (a latency of 1e300 s
    // against 1 ps precision) would otherwise never finish.
    const long long max_events = ChildBudget::from_env().events;
    long long events = 0;
    simgrid::s4u::Engine::on_time_advance_cb([&events, max_events](double) {
      if (++events > max_events)
        child_report_and_exit(kTagBudget, fmt::format("the simulation passed its budget of {} events at simulated "
                                                      "time {:g} s (DPTWIN_SIM_EVENTS raises it; an implausible "
                                                      "latency or bandwidth can cause this)",
                                                      max_events, simgrid::s4u::Engine::get_clock()));
    });
    // Nor is the platform: at 32,768 GPUs freeing its route tables took 2 % of a prediction.
    Platform* platform = Platform::build(*engine, hw, options).release();
    setup(*platform);
    engine->run();
    return finish(*platform);
  });
}

}  // namespace dpt::sim
