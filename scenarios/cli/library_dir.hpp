// Where the scenario library (hardware/, models/, whatif/, lesson/, faults/)
// lives, in this order:
//   1. $DPTWIN_SCENARIOS_DIR, when set;
//   2. next to an installed binary: BIN/../share/dptwin/scenarios (cmake --install),
//      so an installed dptwin needs no checkout;
//   3. the source tree the binary was built from.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <system_error>

#ifndef DPT_INSTALL_SCENARIOS_DIR  // set by scenarios/CMakeLists.txt; the same default for tests
#define DPT_INSTALL_SCENARIOS_DIR "share/dptwin/scenarios"
#endif

namespace dpt::cli {

inline std::filesystem::path scenarios_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("DPTWIN_SCENARIOS_DIR"); env && *env) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / DPT_INSTALL_SCENARIOS_DIR;
    if (fs::is_directory(installed / "hardware", ec)) return installed;
  }
  return fs::path(DPT_SOURCE_DIR) / "scenarios";
}

}  // namespace dpt::cli
