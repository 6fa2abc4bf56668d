// dptwin completion bash|zsh and dptwin man: shell completion and the man page,
// generated from the command line's own definitions (cli_docs.hpp). The build
// runs them once to install the files; a user may also run them directly.
#include <iostream>
#include <memory>

#include "scenarios/cli/cli_docs.hpp"
#include "scenarios/cli/command.hpp"
#include "scenarios/cli/library_dir.hpp"
#include "scenarios/cli/version.hpp"
#include "scenarios/scenario/model_library_yaml.hpp"
#include "sim/net/hardware.hpp"

namespace dpt::cli::cmd_completion {  // a namespace per command: unity batches join anonymous ones
namespace {

struct LibraryNames {
  std::vector<std::string> hardware, models;
};

LibraryNames library_names() {
  const auto dir = scenarios_dir();
  // The library's hardware and the fidelity table's machines: --hardware takes either name.
  auto hardware = sim::list_hardware(dir / "hardware");
  for (auto& m : sim::list_measured_hardware(dir / "hardware")) hardware.push_back(std::move(m));
  return {std::move(hardware), list_models(dir / "models")};
}

RunFn setup_completion(CLI::App& parent) {
  auto shell = std::make_shared<std::string>();
  CLI::App* app = parent.add_subcommand("completion", "Print the shell completion script for bash or zsh.");
  with_choices(app->add_option("shell", *shell, "bash or zsh")->check(CLI::IsMember({"bash", "zsh"})), {"bash", "zsh"});
  app->footer("Examples:\n"
              "  source <(dptwin completion bash)                       # this shell\n"
              "  dptwin completion bash > ~/.local/share/bash-completion/completions/dptwin\n"
              "  dptwin completion zsh > ~/.zfunc/_dptwin                # with fpath+=(~/.zfunc) before compinit\n"
              "(cmake --install installs both.)\n\n" +
              exit_codes_help());
  CLI::App* root = &parent;
  return [root, shell] {
    // Checked here rather than by CLI11's "shell is required", which names neither choice.
    if (shell->empty()) throw std::invalid_argument("completion: give the shell: dptwin completion bash, or zsh");
    const LibraryNames n = library_names();
    std::cout << (*shell == "bash" ? bash_completion(*root, n.hardware, n.models)
                                   : zsh_completion(*root, n.hardware, n.models));
    return static_cast<int>(kExitOk);
  };
}

RunFn setup_man(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("man", "Print the dptwin(1) man page (roff), generated from every command's "
                                               "flags and help.");
  app->footer("Examples:\n  dptwin man | man -l -\n  dptwin man > dptwin.1\n(cmake --install installs it as "
              "share/man/man1/dptwin.1.)\n\n" +
              exit_codes_help());
  CLI::App* root = &parent;
  return [root] {
    std::cout << man_page(*root, "dptwin " + project_version());
    return static_cast<int>(kExitOk);
  };
}

Registration reg_completion{"completion", setup_completion};
Registration reg_man{"man", setup_man};

}  // namespace
}  // namespace dpt::cli::cmd_completion
