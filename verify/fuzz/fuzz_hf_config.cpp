// libFuzzer target: the Hugging Face config.json model reader (`model: hf:PATH`,
// how a user brings their own GPT-2, Llama, BERT or ViT), with a training sequence when
// the input's first byte is odd (its next four bytes, `hf:PATH:seq=N`), eager attention when
// its second bit is set (`:attn=eager`; else the config's or sdpa), and the reference parser
// (`:seq=N`, `:attn=...` suffixes) on the same text. Seeds: scenarios/models/hf/*/config.json and
// verify/fuzz/seeds/hf_config/.
#include "scenarios/scenario/model_hf_config.hpp"
#include "verify/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dpt::fuzz::expect_clean_error("fuzz_hf_config", [&] {
    std::optional<std::int64_t> seq;
    if (size >= 5 && (data[0] & 1) != 0)
      seq = static_cast<std::int64_t>(data[1]) << 24 | data[2] << 16 | data[3] << 8 | data[4];
    std::optional<dpt::AttentionImpl> attn;
    if (size >= 1 && (data[0] & 2) != 0) attn = dpt::AttentionImpl::eager;
    (void)dpt::parse_hf_config(dpt::fuzz::as_text(data, size), "fuzz.json", "hf:fuzz.json", seq, attn);
  });
  dpt::fuzz::expect_clean_error("fuzz_hf_config",
                                [&] { (void)dpt::parse_hf_reference(dpt::fuzz::as_text(data, size)); });
  return 0;
}
