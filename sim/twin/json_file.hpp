// Reading a JSON document that dptwin wrote (a step report, a sweep result): the
// one place that turns "cannot open" and "not JSON" into errors naming the file.
#pragma once
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/io/input_file.hpp"

namespace dpt {

// The parsed file; std::invalid_argument "WHAT PATH: cannot open" or
// "WHAT PATH: not JSON: ..." otherwise (what: "step report", "sweep result").
inline nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  require_regular_input(path, what + " " + path);
  std::ifstream f(path);
  if (!f) throw std::invalid_argument(fmt::format("{} {}: cannot open", what, path));
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(fmt::format("{} {}: not JSON: {}", what, path, e.what()));
  }
}

}  // namespace dpt
