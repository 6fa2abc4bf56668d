// Running the dptwin executable from a test: its path comes from a compile
// definition (DPTWIN_EXE), its stdout and stderr go to files in the case's folder,
// its exit code is returned. No shell: arguments are passed as they are.
// verify/cli/spawn.hpp starts it in the background on the same child set-up.
#pragma once
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "verify/support/test_files.hpp"

namespace dpt::test {

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

// In a forked child: into `cwd`, stdout and stderr to cwd/.stdout and cwd/.stderr,
// `before_exec` (environment, limits, signal dispositions), then DPTWIN_EXE with
// `args`. Never returns: exit 126 when the set-up fails, 127 when exec does.
[[noreturn]] inline void exec_dptwin(const std::vector<std::string>& args, const std::filesystem::path& cwd,
                                     const std::function<void()>& before_exec = {}) {
  if (::chdir(cwd.c_str()) != 0) ::_exit(126);
  const int out = ::open(".stdout", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = ::open(".stderr", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(126);
  if (before_exec) before_exec();
  std::string exe = DPTWIN_EXE;
  std::vector<std::string> copy = args;
  std::vector<char*> argv{exe.data()};
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(exe.c_str(), argv.data());
  ::_exit(127);
}

// Runs DPTWIN_EXE with `args` in `cwd` (created if missing), `before_exec` run in the
// child first (limits, signal dispositions), and waits for it.
inline CliResult run_dptwin_with(const std::vector<std::string>& args, const std::filesystem::path& cwd,
                                 const std::function<void()>& before_exec) {
  std::filesystem::create_directories(cwd);
  const pid_t pid = ::fork();
  if (pid == 0) exec_dptwin(args, cwd, before_exec);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(cwd / ".stdout");
  r.err = slurp(cwd / ".stderr");
  return r;
}

// Runs DPTWIN_EXE with `args` in `cwd` (created if missing) and waits for it. With
// alarm_seconds > 0 the child arms alarm(2) before exec: a hang comes back as a
// SIGALRM death (exit 142), never as a test that runs forever.
inline CliResult run_dptwin(const std::vector<std::string>& args, const std::filesystem::path& cwd,
                            unsigned alarm_seconds = 0) {
  return run_dptwin_with(args, cwd, [alarm_seconds] {
    if (alarm_seconds > 0) ::alarm(alarm_seconds);
  });
}

}  // namespace dpt::test
