// Running a RapidCheck property a stated number of times inside a GoogleTest test,
// for properties that also check themselves against a planted bug: the count is part
// of the test (each case may fork simulations), the seed still comes from RC_PARAMS.
#pragma once
#include <sstream>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/detail/Configuration.h>

namespace dpt::test {

template <typename F> rc::detail::TestResult run_property(F property, int cases) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = cases;
  return rc::detail::checkTestable(property, rc::detail::TestMetadata{}, params);
}

// True when some case of `cases` falsifies the property (a planted bug is seen).
template <typename F> bool property_fails(F property, int cases) {
  return run_property(property, cases).template is<rc::detail::FailureResult>();
}

// Fails the enclosing test, with RapidCheck's counterexample, unless all `cases` hold.
template <typename F> void expect_property_holds(F property, int cases) {
  const auto result = run_property(property, cases);
  std::ostringstream why;
  rc::detail::printResultMessage(result, why);
  EXPECT_TRUE(result.template is<rc::detail::SuccessResult>()) << why.str();
}

}  // namespace dpt::test
