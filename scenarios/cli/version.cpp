#include "scenarios/cli/version.hpp"

#include <nlohmann/json.hpp>

namespace dpt::cli {

std::string project_version() { return DPT_PROJECT_VERSION; }

std::string git_revision() {
  return
#include "dptwin_revision.inc"
      ;
}

std::string version_line() { return "dptwin " + project_version() + " (git " + git_revision() + ")"; }

nlohmann::json version_json() { return {{"version", project_version()}, {"git_revision", git_revision()}}; }

}  // namespace dpt::cli
