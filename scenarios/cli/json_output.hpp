// The one way the command line prints JSON: every object document gets a
// "dptwin" key with the version and git revision that produced it, so a saved
// --json output says which build wrote it. (A JSON array, as `lesson --json`
// prints, stays as it is: adding a key would change its type.)
#pragma once
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "scenarios/cli/version.hpp"

namespace dpt::cli {

inline nlohmann::json with_version(nlohmann::json doc) {
  if (doc.is_object()) doc["dptwin"] = version_json();
  return doc;
}

inline void print_json(const nlohmann::json& doc, int indent = 2) {
  std::cout << with_version(doc).dump(indent) << "\n";
}

}  // namespace dpt::cli
