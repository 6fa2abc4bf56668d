// dptwin: data-parallel training on several GPUs, with a simulated twin.
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <map>

#include "scenarios/cli/command.hpp"
#include "engine/core/closest_name.hpp"
#include "scenarios/cli/version.hpp"
#include "scenarios/scenario/scenario.hpp"
#include "sim/twin/sim_process.hpp"

namespace dpt::cli {

std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

Registration::Registration(std::string name, SetupFn setup) {
  command_registry().push_back({std::move(name), std::move(setup)});
}

std::string exit_codes_help() {
  return "Exit codes: 0 success; 1 a check or target failed, or the model does not fit (out of memory); "
         "2 bad flags or input (nothing run); 3 the run failed (I/O, a collective error, output that could not "
         "be written).";
}

namespace {

// Output a command could not write to standard output (a full disk, a closed pipe with
// SIGPIPE ignored) fails the run as a failed --out does: exit 3 and the reason, not exit 0
// with nothing written. Everything the command printed is flushed here first.
int check_stdout(const std::string& command, int code) {
  errno = 0;
  std::cout.flush();
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || !std::cout.good();
  if (!failed) return code;
  const int err = errno;
  std::cerr << "dptwin " << command << ": error: writing standard output failed"
            << (err != 0 ? std::string(": ") + std::strerror(err) : std::string()) << "\n";
  return code == kExitOk ? kExitRuntimeError : code;
}

// The first argument, when it is not an option, must name a command: a typo is
// answered with the closest command instead of CLI11's "A subcommand is required".
bool unknown_command(int argc, char** argv, const std::vector<CommandEntry>& registry) {
  if (argc < 2 || argv[1][0] == '-') return false;
  const std::string word = argv[1];
  std::vector<std::string> names;
  for (const auto& e : registry) names.push_back(e.name);
  if (std::find(names.begin(), names.end(), word) != names.end()) return false;
  std::cerr << "dptwin: unknown command '" << word << "'";
  if (const auto near = closest_name(word, names)) std::cerr << "; did you mean '" << *near << "'?";
  std::cerr << "\nCommands:";
  for (const auto& n : names) std::cerr << " " << n;
  std::cerr << "\nRun with --help for more information.\n";
  return true;
}

// After CLI11's "argument was not expected": for each unknown --flag, the closest
// flag of the command it was given to ("did you mean '--hardware'?").
void suggest_flags(int argc, char** argv, CLI::App& root) {
  CLI::App* app = &root;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.rfind("-", 0) == 0) continue;
    const auto subs = app->get_subcommands([&](CLI::App* s) { return s->get_name() == word; });
    if (!subs.empty()) app = subs.front();
  }
  std::vector<std::string> flags;
  for (const CLI::Option* o : app->get_options())
    for (const auto& l : o->get_lnames()) flags.push_back("--" + l);
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word.rfind("--", 0) != 0 || word.size() < 3) continue;
    word = word.substr(0, word.find('='));
    if (std::find(flags.begin(), flags.end(), word) != flags.end()) continue;
    if (const auto near = closest_name(word, flags))
      std::cerr << "dptwin: unknown flag '" << word << "'; did you mean '" << *near << "'?\n";
  }
}

// Every option that takes a value refuses an empty one ("--gpus ''", "--out="), naming the
// flag: CLI11 takes an empty value for a std::optional option as "not given", so the run
// would silently fall back to the file's or the default value.
void refuse_empty_values(CLI::App& app) {
  static const CLI::Validator non_empty(
      [](std::string& value) { return value.empty() ? std::string("empty value (give one, or leave the flag out)") : ""; },
      "", "non-empty");
  for (CLI::Option* o : app.get_options())
    if (o->get_expected_min() > 0) o->check(non_empty);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) refuse_empty_values(*sub);
}

// An error message that echoes a huge bad value (a 1 MB scenario value, a 100 KB log field)
// is cut in the middle: its head names what was wrong and where, its tail how to fix it.
std::string bounded_message(const std::string& m) {
  constexpr size_t kHead = 2048, kTail = 1024;
  if (m.size() <= kHead + kTail + 256) return m;
  return m.substr(0, kHead) + fmt::format(" [... {} bytes of the message left out ...] ", m.size() - kHead - kTail) +
         m.substr(m.size() - kTail);
}

}  // namespace
}  // namespace dpt::cli

int main(int argc, char** argv) {
  using namespace dpt::cli;
  // A closed pipe (`dptwin ... | head`) or a file-size limit makes a write fail with EPIPE or
  // EFBIG, which check_stdout and every -o writer report (exit 3 and the reason), instead of
  // killing the process by signal (141, 153) with nothing said.
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"dptwin: data-parallel training (DataParallel and DDP semantics) on host, CUDA or a SimGrid twin"};
  app.name("dptwin");
  app.require_subcommand(1);
  app.set_version_flag("--version", version_line(), "print the version and git revision, then exit");
  app.footer(exit_codes_help());
  auto& registry = command_registry();
  std::sort(registry.begin(), registry.end(), [](auto& a, auto& b) { return a.name < b.name; });
  if (unknown_command(argc, argv, registry)) return kExitUsage;
  std::map<std::string, RunFn> runners;
  for (auto& entry : registry) runners[entry.name] = entry.setup(app);
  refuse_empty_values(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    if (code != 0) suggest_flags(argc, argv, app);  // an unknown flag may surface as another error
    return code == 0 ? kExitOk : kExitUsage;
  }
  for (auto* sub : app.get_subcommands()) {
    try {
      return check_stdout(sub->get_name(), runners.at(sub->get_name())());
    } catch (const dpt::scenario::ModelDoesNotFit& e) {
      // Out of memory before the step runs (parameters, gradients and optimizer state alone
      // exceed a GPU): a result, as the twin's own out of memory is (exit 1), not bad input.
      std::cerr << "dptwin " << sub->get_name() << ": out of memory: " << e.what() << "\n";
      return kExitFailure;
    } catch (const std::invalid_argument& e) {
      std::cerr << "dptwin " << sub->get_name() << ": error: " << bounded_message(e.what()) << "\n";
      return kExitUsage;
    } catch (const dpt::sim::Interrupted& e) {
      // As a shell reports a process ended by the signal.
      std::cerr << "dptwin " << sub->get_name() << ": " << e.what() << "\n";
      return 128 + e.signal();
    } catch (const std::exception& e) {
      std::cerr << "dptwin " << sub->get_name() << ": error: " << bounded_message(e.what()) << "\n";
      return kExitRuntimeError;
    }
  }
  return kExitUsage;
}
