// Shell completion scripts and the man page, generated from the CLI11
// definitions themselves (the same table the parser and --help use), so they
// cannot drift from the flags the commands accept.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace dpt::cli {

// `hardware_names` and `model_names` complete --hardware and --model values.
std::string bash_completion(const CLI::App& root, const std::vector<std::string>& hardware_names,
                            const std::vector<std::string>& model_names);
std::string zsh_completion(const CLI::App& root, const std::vector<std::string>& hardware_names,
                           const std::vector<std::string>& model_names);
// roff (man(7) macros), section 1.
std::string man_page(const CLI::App& root, const std::string& version);

}  // namespace dpt::cli
