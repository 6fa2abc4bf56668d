// libFuzzer target: the safetensors reader (`--init`, `--data`, checkpoints).
// Seeds: verify/fuzz/seeds/safetensors/ (small files of each dtype).
// Invariant checked beyond "no crash": a file the reader accepts re-encodes to
// bytes that it accepts again with the same tensors (names, dtypes, shapes, data)
// and metadata: what was validated is exactly what was kept.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/io/safetensors.hpp"
#include "verify/fuzz/fuzz_support.hpp"

namespace {

bool same_tensors(const dpt::SafetensorsFile& a, const dpt::SafetensorsFile& b) {
  if (a.tensors.size() != b.tensors.size() || a.metadata != b.metadata) return false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& x = a.tensors[i];
    const auto& y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.data != y.data) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* begin = reinterpret_cast<const std::byte*>(data);
  const std::vector<std::byte> bytes(begin, begin + size);
  dpt::fuzz::expect_clean_error("fuzz_safetensors", [&] {
    const dpt::SafetensorsFile first = dpt::parse_safetensors(bytes, "fuzz.safetensors");
    const dpt::SafetensorsFile again =
        dpt::parse_safetensors(dpt::encode_safetensors(first.tensors, first.metadata), "fuzz-reencoded.safetensors");
    if (!same_tensors(first, again)) {
      std::fprintf(stderr, "fuzz_safetensors: finding: an accepted file does not survive re-encoding\n");
      std::abort();
    }
  });
  return 0;
}
