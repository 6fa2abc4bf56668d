// RapidCheck called as a library, for `dptwin verify`: a property runs with a
// given seed and case count, and its result becomes a CheckOutcome whose message
// holds RapidCheck's shrunk counterexample and the seed that reproduces it.
#pragma once
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <rapidcheck.h>

#include "scenarios/verify/rc_listener.hpp"
#include "scenarios/verify/verify_check.hpp"

namespace dpt::verify {

struct PropertyRun {
  std::string description;  // the invariant, in words ("DataParallel gradient == single-device gradient")
  int cases = 100;          // RapidCheck's max_success
  std::uint64_t seed = 0;   // RapidCheck's seed: the same seed and cases give the same cases
  std::string reproduce;    // the command line that reruns it ("dptwin verify --backend host ...")
};

// The outcome of one RapidCheck test: pass with the case count, or fail with the
// failure's description, the shrunk counterexample (one line per generated value)
// and how to reproduce it.
inline CheckOutcome outcome_of(const rc::detail::TestResult& result, const PropertyRun& run) {
  using namespace rc::detail;
  SuccessResult success;
  FailureResult failure;
  GaveUpResult gave_up;
  Error error;
  if (result.match(success)) return CheckOutcome::pass(fmt::format("{} cases", success.numSuccess));
  if (result.match(failure)) {
    std::ostringstream msg;
    msg << run.description << ": falsified after " << failure.numSuccess << " passing cases\n";
    msg << failure.description << "\n";
    msg << "counterexample (shrunk):\n";
    for (const auto& [type, value] : failure.counterExample) msg << "  " << value << "\n";
    msg << fmt::format("seed {} (RapidCheck seed; reproduce with: {})", run.seed, run.reproduce);
    return CheckOutcome::fail(fmt::format("counterexample after {} cases (seed {})", failure.numSuccess, run.seed),
                              msg.str());
  }
  if (result.match(gave_up))
    return CheckOutcome::fail(fmt::format("gave up after {} cases", gave_up.numSuccess),
                              run.description + ": too many generated cases were discarded: " + gave_up.description);
  result.match(error);
  return {CheckStatus::error, {}, run.description + ": RapidCheck could not run the property: " + error.description};
}

// Runs `property` (a callable RapidCheck can test: it draws with *gen and asserts
// with RC_ASSERT / RC_FAIL) with the run's seed and case count.
// RapidCheck prints "Using configuration: seed=..." to stderr the first time its
// configuration is read; verify prints its own seed, so that read happens here with
// stderr silenced.
inline void load_rapidcheck_configuration_quietly() {
  static const bool loaded = [] {
    std::streambuf* saved = std::cerr.rdbuf(nullptr);
    rc::detail::configuration();
    std::cerr.rdbuf(saved);
    return true;
  }();
  (void)loaded;
}

template <typename Property>
CheckOutcome check_property(const PropertyRun& run, Property&& property) {
  using namespace rc::detail;
  load_rapidcheck_configuration_quietly();
  TestParams params;
  params.seed = run.seed;
  params.maxSuccess = run.cases;
  params.maxSize = 100;
  TestMetadata metadata;
  metadata.id = run.description;
  metadata.description = run.description;
  QuietRcListener quiet;
  return outcome_of(checkTestable(std::forward<Property>(property), metadata, params, quiet), run);
}

}  // namespace dpt::verify
