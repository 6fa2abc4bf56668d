// libFuzzer target: the model-library YAML loader (parameter names and sizes,
// per-sample flops and activation bytes). Seeds: scenarios/models/*.yaml.
#include "scenarios/scenario/model_library_yaml.hpp"
#include "verify/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dpt::fuzz::expect_clean_error("fuzz_model_yaml", [&] {
    (void)dpt::parse_model_yaml(dpt::fuzz::as_text(data, size), "fuzz.yaml");
  });
  return 0;
}
