// Command registry of the dptwin executable. Each command file defines a
// registration object:
//
//   static dpt::cli::Registration reg{"split", [](CLI::App& app) { ... return run_fn; }};
//
// The setup function adds the subcommand, its flags (from one table: CLI11's
// help is generated from the same definitions the parser uses) and returns the
// function that runs it and yields the exit code.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace dpt::cli {

// Exit codes shared by every command (documented in each --help and the README).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,      // the run finished and found a failure (a check failed, a target not met)
  kExitUsage = 2,        // bad flags or bad input files: nothing was run
  kExitRuntimeError = 3, // the run itself failed (I/O, collective error, out of memory)
};

using RunFn = std::function<int()>;
using SetupFn = std::function<RunFn(CLI::App& parent)>;

struct Registration {
  Registration(std::string name, SetupFn setup);
};

struct CommandEntry {
  std::string name;
  SetupFn setup;
};
std::vector<CommandEntry>& command_registry();

// Standard exit-code footer for a subcommand's --help.
std::string exit_codes_help();

}  // namespace dpt::cli
