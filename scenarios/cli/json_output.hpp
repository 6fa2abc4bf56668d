// The one way the command line prints JSON: every document is an object with a
// "dptwin" key holding the version and git revision that produced it, so a saved
// --json output says which build wrote it. Lists go under a named key
// ({"claims": [...]}), never as a bare top-level array, which could carry no key.
#pragma once
#include <iostream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "scenarios/cli/version.hpp"

namespace dpt::cli {

inline nlohmann::json with_version(nlohmann::json doc) {
  if (!doc.is_object()) throw std::logic_error("with_version: a --json document must be a JSON object");
  doc["dptwin"] = version_json();
  return doc;
}

inline void print_json(const nlohmann::json& doc, int indent = 2) {
  std::cout << with_version(doc).dump(indent) << "\n";
}

}  // namespace dpt::cli
