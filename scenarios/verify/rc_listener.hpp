// A RapidCheck listener that reports nothing: `dptwin verify` reports through its own
// reporters, and tests that expect a planted bug to fail must not print RapidCheck's
// "reproduce" line as if a test had failed.
#pragma once
#include <rapidcheck.h>

namespace dpt::verify {

class QuietRcListener : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

}  // namespace dpt::verify
