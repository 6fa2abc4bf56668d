// The quick start's default scenario (scenarios/default.yaml), embedded at build
// time so `dptwin report` runs with no file argument.
#pragma once
#include <string>

namespace dpt::scenario {

const std::string& default_scenario_text();
// The label errors and reports use for it.
inline constexpr const char* kDefaultScenarioLabel = "<default scenario: scenarios/default.yaml>";

}  // namespace dpt::scenario
