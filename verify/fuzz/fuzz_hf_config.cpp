// libFuzzer target: the Hugging Face config.json model reader (`model: hf:PATH`,
// how a user brings their own GPT-2, Llama, BERT or ViT). Seeds:
// scenarios/models/hf/*/config.json and verify/fuzz/seeds/hf_config/.
#include "scenarios/scenario/model_hf_config.hpp"
#include "verify/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dpt::fuzz::expect_clean_error("fuzz_hf_config", [&] {
    (void)dpt::parse_hf_config(dpt::fuzz::as_text(data, size), "fuzz.json", "hf:fuzz.json");
  });
  return 0;
}
