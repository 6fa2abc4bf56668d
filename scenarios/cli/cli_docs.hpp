// Shell completion scripts and the man page, generated from the CLI11
// definitions themselves (the same table the parser and --help use), so they
// cannot drift from the flags the commands accept.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <map>

namespace dpt::cli {

// The values an option takes from a fixed set (--strategy single|dp|ddp), for shell
// completion: registered where the option is added, `with_choices(app->add_option(...),
// {...})`. The commands still check the value themselves, with their own messages.
std::map<const CLI::Option*, std::vector<std::string>>& option_choices();
inline CLI::Option* with_choices(CLI::Option* o, std::vector<std::string> values) {
  option_choices()[o] = std::move(values);
  return o;
}

// `hardware_names` and `model_names` complete --hardware and --model values.
std::string bash_completion(const CLI::App& root, const std::vector<std::string>& hardware_names,
                            const std::vector<std::string>& model_names);
std::string zsh_completion(const CLI::App& root, const std::vector<std::string>& hardware_names,
                           const std::vector<std::string>& model_names);
// roff (man(7) macros), section 1.
std::string man_page(const CLI::App& root, const std::string& version);

}  // namespace dpt::cli
