// Running a simulation in its own process.
//
// SimGrid allows one Engine per process and does not restart its clock, so every
// simulation (a test case, a bench sweep, a predict run) runs in a forked child:
// the child creates the Engine with dptwin's configuration, builds the platform,
// runs, and writes its result (a string, usually JSON) to a pipe; the parent reads
// it and waits for the child. An exception in the child is carried back and
// rethrown in the parent with its message: std::invalid_argument as
// std::invalid_argument, dpt::OutOfMemory as dpt::OutOfMemory, anything else as
// std::runtime_error. A child that dies without a result (signal, exit) is a
// std::runtime_error naming the signal or exit status.
//
// Budgets: a child gets a wall-clock budget (DPTWIN_SIM_WALL_S, default 900 s) and a
// simulation an event budget (DPTWIN_SIM_EVENTS, default 200,000,000 clock advances).
// Past either the child is killed and BudgetExceeded (a std::runtime_error: exit 3)
// says which budget and how to raise it; nothing waits forever.
//
// Stop signals (SIGINT, SIGTERM, SIGHUP): while a ChildProcessScope is alive, the
// process's handler only records the signal and forwards it to the registered
// children (kill(2) is async-signal-safe; nothing in it allocates or runs exit
// handlers). The waiting code then reaps every child and throws Interrupted, so
// destructors remove temporary folders. With no scope alive the handler restores the
// previous disposition and re-raises: the process ends as it would have without it.
// A disposition of SIG_IGN is respected (nohup). Children start with the dispositions
// the process had before the handler was installed, and a simulation child restores
// them after SimGrid installed its own SIGINT handler (which calls exit: exit handlers
// then call free, which can deadlock on the malloc lock held by the interrupted code).
#pragma once
#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <simgrid/s4u/Engine.hpp>

#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"

namespace dpt::sim {

// A stop signal ended the run; what() names it. The CLI exits with 128 + signal().
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal);
  int signal() const { return signal_; }

 private:
  int signal_;
};

// A child ran past its wall-clock or event budget (see above).
class BudgetExceeded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ChildBudget {
  double wall_s = 900;                    // wall-clock seconds for the whole child
  long long events = 200'000'000;         // SimGrid clock advances in one simulation
  // The defaults, overridden by DPTWIN_SIM_WALL_S and DPTWIN_SIM_EVENTS (a malformed
  // value is std::invalid_argument naming the variable).
  static ChildBudget from_env();
};

// Forks and tracks children so stop signals reach them (see above). Single-threaded
// parents only. Scopes nest (a sweep's scope around each prediction's).
class ChildProcessScope {
 public:
  ChildProcessScope();
  ~ChildProcessScope();
  ChildProcessScope(const ChildProcessScope&) = delete;
  ChildProcessScope& operator=(const ChildProcessScope&) = delete;

  // fork(2) with stop signals blocked until the child is registered. In the child:
  // no registered children, the original dispositions, signals unblocked; returns 0.
  // Throws std::runtime_error when fork fails.
  pid_t fork_child();
  // The child was reaped (waitpid returned it): stop tracking it.
  void reaped(pid_t pid);
  // The stop signal received while this process waited, or 0.
  static int stop_signal();
  // When a stop signal arrived: ends every registered child (the signal, then SIGKILL
  // after 2 s), reaps them, and throws Interrupted. Otherwise returns.
  void throw_if_stopped();
};

// Runs fn in a forked child and returns what it returned (see above). Call it from a
// single-threaded parent (the child gets only the calling thread). The child's stdout
// and stderr stay the parent's.
std::string run_in_child_process(const std::function<std::string()>& fn,
                                 const ChildBudget& budget = ChildBudget::from_env());

// In a simulation child: puts back the stop-signal dispositions the process had before
// SimGrid (or dptwin) installed handlers. run_simulation calls it after make_engine().
void restore_stop_signal_dispositions();

// Creates the process's Engine with dptwin's settings: network/model:CM02,
// network/crosstraffic:0, network/TCP-gamma:0 (exact alpha-beta; the default LV08
// model adds latency and bandwidth factors) and --log=root.thres:warning
// (plus xbt_cfg.thres:warning for the configuration chatter). Call once per process.
std::unique_ptr<simgrid::s4u::Engine> make_engine();

// In a forked child: make_engine(), Platform::build(hw, options), setup(platform) (create
// the actors), Engine::run(), then finish(platform) gives the result string. The run is
// held to the budget's event count.
std::string run_simulation(const HardwareSpec& hw, const std::function<void(Platform&)>& setup,
                           const std::function<std::string(Platform&)>& finish, const PlatformOptions& options = {});

// The kernel's limit on one process's memory mappings (/proc/sys/vm/max_map_count, 65530 by
// default), which bounds the actors a simulation can hold (each actor's stack and its guard
// page); nullopt where it cannot be read.
std::optional<long> max_memory_maps();

}  // namespace dpt::sim
