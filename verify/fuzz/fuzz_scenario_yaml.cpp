// libFuzzer target: the scenario YAML loader (parse, schema, cross-field rules),
// as `dptwin predict|sweep SCENARIO` reads a file before resolving it against the
// library. Seeds: scenarios/whatif/*.yaml.
#include "scenarios/scenario/scenario.hpp"
#include "verify/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dpt::fuzz::expect_clean_error("fuzz_scenario_yaml", [&] {
    (void)dpt::scenario::parse_scenario(dpt::fuzz::as_text(data, size), "fuzz.yaml");
  });
  return 0;
}
