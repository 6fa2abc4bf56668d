// The dptwin version: the project version from CMake and the git revision of the
// checkout it was built from ("unknown" outside a checkout). Its own small
// library (dptwin_version): only version.cpp is rebuilt when the revision moves.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace dpt::cli {

std::string project_version();  // "0.1.0", CMake's project(VERSION)
std::string git_revision();     // `git describe --always --dirty` at build time, or "unknown"
std::string version_line();     // "dptwin 0.1.0 (git d8f9ddef6b58)"

// {"version": "0.1.0", "git_revision": "d8f9ddef6b58"}: the value of the "dptwin"
// key that every JSON document the command line prints carries.
nlohmann::json version_json();

}  // namespace dpt::cli
