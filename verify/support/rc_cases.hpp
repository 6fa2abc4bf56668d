// Running a RapidCheck property with a stated number of cases, for the properties
// in verify/: the count is part of the test (CI time is budgeted per property), the
// seed still comes from RC_PARAMS so a failure reproduces.
#pragma once
#include <iostream>
#include <string>

#include <rapidcheck.h>

#include "scenarios/verify/rc_listener.hpp"

namespace dpt::test {

// True when `prop` holds on `cases` generated cases. `shrink` off is for planted-bug
// checks, where any counterexample will do and shrinking would only cost time; their
// expected failures are not reported as failures to reproduce.
template <typename Property>
bool holds_for(const std::string& description, int cases, Property&& prop, bool shrink = true) {
  using namespace rc::detail;
  TestParams params = configuration().testParams;
  params.maxSuccess = cases;
  params.disableShrinking = !shrink;
  TestMetadata metadata;
  metadata.id = description;
  metadata.description = description;
  verify::QuietRcListener silent;  // planted-bug checks are expected to fail: no "reproduce" line
  const TestResult result = shrink ? checkTestable(std::forward<Property>(prop), metadata, params)
                                   : checkTestable(std::forward<Property>(prop), metadata, params, silent);
  std::cerr << "- " << description << ": ";
  printResultMessage(result, std::cerr);
  std::cerr << "\n";
  return result.template is<SuccessResult>();
}

// "planted bug: <description>". Out of line: g++ 12 at -O1 reports a false -Warray-bounds
// in libstdc++'s string copy when `std::string("...") + description` is inlined here.
[[gnu::noinline]] inline std::string planted_bug_description(const std::string& description) {
  std::string text = "planted bug: ";
  text += description;
  return text;
}

}  // namespace dpt::test

// The property holds on `cases` cases.
// (Variadic so a lambda with commas in its body passes through the preprocessor.)
#define DPT_EXPECT_PROPERTY(description, cases, ...) \
  EXPECT_TRUE(::dpt::test::holds_for(description, cases, __VA_ARGS__))
// A planted bug: the property must find a counterexample within `cases` cases.
#define DPT_EXPECT_COUNTEREXAMPLE(description, cases, ...) \
  EXPECT_FALSE(::dpt::test::holds_for(::dpt::test::planted_bug_description(description), cases, __VA_ARGS__, false))
