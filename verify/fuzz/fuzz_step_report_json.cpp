// libFuzzer target: the step-report JSON reader (`dptwin compare`, reports), as
// read_step_report reads a file: text that is not JSON is its clean error.
// Seeds: verify/fuzz/seeds/json/ (reports written by dptwin).
// Invariant beyond "no crash": writing an accepted report and reading it back
// gives the same JSON (the reader keeps every field the writer writes).
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "sim/twin/step_report.hpp"
#include "verify/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;  // read_step_report's "not JSON" error
  dpt::fuzz::expect_clean_error("fuzz_step_report_json", [&] {
    const nlohmann::json written = dpt::step_report_to_json(dpt::step_report_from_json(j, "fuzz.json"));
    if (dpt::step_report_to_json(dpt::step_report_from_json(written, "fuzz-rewritten.json")) != written) {
      std::fprintf(stderr, "fuzz_step_report_json: finding: a written report reads back differently\n");
      std::abort();
    }
  });
  return 0;
}
