// The names in a library folder (scenarios/hardware, scenarios/models): the stems
// of its *.yaml files, which is how a hardware file or a model is named.
#pragma once
#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace dpt::sim {

// Sorted ("dgx-a100" for dgx-a100.yaml); empty when the folder cannot be read.
inline std::vector<std::string> yaml_file_stems(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace dpt::sim
