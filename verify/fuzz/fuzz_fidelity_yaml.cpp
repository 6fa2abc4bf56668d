// libFuzzer target: the fidelity-table source parser behind `dptwin fidelity DIR`
// (published measurements, one YAML file per source). Seeds:
// scenarios/measured/public/*.yaml.
#include "scenarios/measure/fidelity.hpp"
#include "verify/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dpt::fuzz::expect_clean_error("fuzz_fidelity_yaml", [&] {
    (void)dpt::fidelity::parse_source(dpt::fuzz::as_text(data, size), "fuzz.yaml");
  });
  return 0;
}
