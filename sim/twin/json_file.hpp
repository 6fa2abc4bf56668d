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

// A dptwin document of another kind than `expected` ("dptwin.sweep/1") said for what it is
// and where it goes: a step report given to `report` read "key 'accumulate' is not a known
// key" (an outside-user review). Throws std::invalid_argument naming `where`; returns when
// `j` has no dptwin schema of another kind (the caller's own checks follow).
inline void require_document_kind(const nlohmann::json& j, const std::string& expected, const std::string& where,
                                  const std::string& expected_what) {
  if (j.is_object() && !j.contains("schema") && j.contains("command") && j["command"] == "train")
    throw std::invalid_argument(fmt::format("{}: this is `dptwin train --json` output (a training run's losses), not {}",
                                            where, expected_what));
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string()) return;
  const std::string schema = j["schema"].get<std::string>();
  const std::string kind = schema.substr(0, schema.find('/'));
  // Another version of the same kind is the caller's to name ("this dptwin reads ...").
  if (kind == expected.substr(0, expected.find('/')) || schema.rfind("dptwin.", 0) != 0) return;
  const char* what = kind == "dptwin.step_report" ? "a step report (predict --out or --json): compare reads it"
                     : kind == "dptwin.sweep"     ? "a sweep result (sweep --out, merge): report and merge read it"
                     : kind == "dptwin.bench"     ? "a bench result (bench --backend host|cuda --out): calibrate reads it"
                                                  : "another dptwin document";
  throw std::invalid_argument(fmt::format("{}: schema '{}' is {}, not {}", where, schema, what, expected_what));
}

}  // namespace dpt
