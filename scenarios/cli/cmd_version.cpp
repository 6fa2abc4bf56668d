// dptwin version: the same line as `dptwin --version`, or JSON with --json.
#include <iostream>
#include <memory>

#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/cli/version.hpp"

namespace dpt::cli::cmd_version {  // a namespace per command: unity batches join anonymous ones
namespace {

RunFn setup(CLI::App& parent) {
  auto json = std::make_shared<bool>(false);
  CLI::App* app = parent.add_subcommand("version", "Print the dptwin version and the git revision it was built from.");
  app->add_flag("--json", *json, "print {\"dptwin\": {\"version\": ..., \"git_revision\": ...}}");
  app->footer("Examples:\n  dptwin version\n  dptwin --version\n\n" + exit_codes_help());
  return [json] {
    if (*json) print_json(nlohmann::json::object());
    else std::cout << version_line() << "\n";
    return static_cast<int>(kExitOk);
  };
}

Registration reg{"version", setup};

}  // namespace
}  // namespace dpt::cli::cmd_version
