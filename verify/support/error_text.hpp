// The message of an expected std::invalid_argument, for tests that check what a
// bad input's error names (the flag, the key, the limit).
#pragma once
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace dpt::test {

// The what() of the std::invalid_argument `fn` throws; a test failure and "" when
// it throws none.
template <typename F> std::string invalid_argument_text(F&& fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected std::invalid_argument";
  return {};
}

}  // namespace dpt::test
