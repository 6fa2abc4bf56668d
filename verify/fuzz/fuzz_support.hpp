// What a fuzz target treats as a finding. The parsers under test promise one
// thing for bad input: std::invalid_argument naming the file and what was wrong.
// That is the expected outcome of most fuzzed inputs and is swallowed here. Any
// other exception (a library's internal error such as std::out_of_range,
// std::bad_alloc or nlohmann::json::type_error) escaped the parser's validation:
// it is reported with its type and message and the run aborts, so libFuzzer
// records the input as a crash. Crashes, ASan/UBSan reports, leaks and timeouts
// are findings by themselves.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <typeinfo>

namespace dpt::fuzz {

// Runs `parse`; returns normally when it succeeds or throws std::invalid_argument.
template <class Parse>
void expect_clean_error(const char* target, Parse&& parse) {
  try {
    parse();
  } catch (const std::invalid_argument&) {
    // The documented answer to bad input.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: finding: %s escaped the parser (not std::invalid_argument): %s\n", target,
                 typeid(e).name(), e.what());
    std::abort();
  }
}

// The fuzzer's bytes as text (the YAML and log parsers take std::string).
inline std::string as_text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace dpt::fuzz
