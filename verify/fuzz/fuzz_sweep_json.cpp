// libFuzzer target: the sweep-result JSON reader (`dptwin merge`, `dptwin
// report --from`), as read_sweep_result reads a file: text that is not JSON is
// its clean error. Seeds: verify/fuzz/seeds/json/ (sweep results written by dptwin).
// Invariant beyond "no crash": writing an accepted result and reading it back
// gives the same JSON.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "scenarios/scenario/sweep.hpp"
#include "verify/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;  // read_sweep_result's "not JSON" error
  dpt::fuzz::expect_clean_error("fuzz_sweep_json", [&] {
    namespace sc = dpt::scenario;
    const nlohmann::json written = sc::sweep_result_to_json(sc::sweep_result_from_json(j, "fuzz.json"));
    if (sc::sweep_result_to_json(sc::sweep_result_from_json(written, "fuzz-rewritten.json")) != written) {
      std::fprintf(stderr, "fuzz_sweep_json: finding: a written sweep result reads back differently\n");
      std::abort();
    }
  });
  return 0;
}
