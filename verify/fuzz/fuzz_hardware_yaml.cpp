// libFuzzer target: the hardware YAML loader (parse, schema, validation), as
// `--hardware FILE` reads a file. Seeds: scenarios/hardware/*.yaml.
#include "sim/net/hardware.hpp"
#include "verify/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dpt::fuzz::expect_clean_error("fuzz_hardware_yaml", [&] {
    const dpt::sim::HardwareSpec hw = dpt::sim::parse_hardware_yaml(dpt::fuzz::as_text(data, size), "fuzz.yaml");
    dpt::sim::validate_hardware(hw);
  });
  return 0;
}
