// A test's files: a fresh folder under the build tree (never a system path) and
// the text of a file.
#pragma once
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace dpt::test {

// scenarios/ and scenarios/hardware of the source tree (load_hardware(name, kHardwareLibrary)).
inline const std::filesystem::path kScenarios = std::filesystem::path(DPT_SOURCE_DIR) / "scenarios";
inline const std::filesystem::path kHardwareLibrary = kScenarios / "hardware";

// The bytes of a file ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// DPT_BINARY_DIR/`relative`, emptied of what an earlier run left and created.
inline std::filesystem::path fresh_test_dir(const std::filesystem::path& relative) {
  const std::filesystem::path d = std::filesystem::path(DPT_BINARY_DIR) / relative;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace dpt::test
