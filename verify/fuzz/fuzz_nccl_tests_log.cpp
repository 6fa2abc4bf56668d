// libFuzzer target: the nccl-tests log parser behind `dptwin calibrate --from`.
// Seeds: verify/data/nccl-tests/*.log.
#include <sstream>

#include "scenarios/measure/nccl_tests_log.hpp"
#include "verify/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dpt::fuzz::expect_clean_error("fuzz_nccl_tests_log", [&] {
    std::istringstream in(dpt::fuzz::as_text(data, size));
    (void)dpt::parse_nccl_tests_log(in, "fuzz.log");
  });
  return 0;
}
