// Starting the dptwin executable in the background for the signal, budget and
// durability tests: its own process group (so a test can signal the whole run, as
// Ctrl-C does, and check that none of it is left), chosen environment variables and
// signal dispositions, output to files in the case's folder, and waiting with a bound.
#pragma once
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "verify/support/cli_run.hpp"

namespace dpt::test {

struct SpawnOptions {
  std::map<std::string, std::string> env;  // set in the child
  bool ignore_sigint = false;               // start with SIGINT ignored (nohup-like)
  long file_size_limit_bytes = -1;          // RLIMIT_FSIZE in the child when >= 0
};

// Starts DPTWIN_EXE with `args` in `cwd`, stdout and stderr to cwd/.stdout and .stderr.
// The child leads its own process group: its pid is the group id.
inline pid_t spawn_dptwin(const std::vector<std::string>& args, const std::filesystem::path& cwd,
                          const SpawnOptions& o = {}) {
  std::filesystem::create_directories(cwd);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    exec_dptwin(args, cwd, [&o] {
      for (const auto& [k, v] : o.env) ::setenv(k.c_str(), v.c_str(), 1);
      ::signal(SIGINT, o.ignore_sigint ? SIG_IGN : SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      if (o.file_size_limit_bytes >= 0) {
        struct rlimit lim {};
        lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(o.file_size_limit_bytes);
        if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(126);
      }
    });
  }
  ::setpgid(pid, pid);  // also here, so a signal sent right away reaches the group
  return pid;
}

// The exit code (128 + signal for a signal) once `pid` ends, or nullopt after `limit`
// (the process is then left running: the caller decides).
inline std::optional<int> wait_for(pid_t pid, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (std::chrono::steady_clock::now() >= end) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Makes this process the reaper of orphaned descendants, so a run's leftover
// grandchildren become ours and group_gone_within can reap them (a container's init
// may never reap zombies, which would then look like live processes).
inline void become_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

// True when no process of group `pgid` is left within `limit`, reaping the group's
// processes that ended (see become_subreaper).
inline bool group_gone_within(pid_t pgid, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    while (::waitpid(-pgid, nullptr, WNOHANG) > 0) {
    }
    if (::kill(-pgid, 0) != 0 && errno == ESRCH) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Ends whatever is left of a group (a failed test must not leave a run behind).
inline void kill_group(pid_t pgid) {
  ::kill(-pgid, SIGKILL);
  while (::waitpid(pgid, nullptr, WNOHANG) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace dpt::test
