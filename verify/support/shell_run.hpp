// Running a command line through /bin/sh from a test and reading what it printed.
// For argument vectors and separate stdout/stderr use cli_run.hpp instead.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace dpt::test {

struct ShellResult {
  int exit_code = -1;  // -1 when the shell could not start or the command died by a signal
  std::string out;     // stdout (and stderr where the command line redirects it there)
};

inline ShellResult run_shell(const std::string& command) {
  ShellResult r;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// This build's dptwin (DPT_BINARY_DIR/scenarios/dptwin) with `args`, word-split by the
// shell; stdout and stderr together in out.
inline ShellResult run_dptwin_shell(const std::string& args) {
  return run_shell(std::string(DPT_BINARY_DIR) + "/scenarios/dptwin " + args + " 2>&1");
}

}  // namespace dpt::test
