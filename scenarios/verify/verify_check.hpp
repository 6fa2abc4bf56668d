// The check runner of `dptwin verify`: a check is a named question with a yes/no
// answer and one figure (a case count, a measured/predicted ratio), run once and
// recorded with its time. Reporters (verify_report.hpp) turn a run into console
// lines, JSON and JUnit XML.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/timestamp.hpp"
#include "engine/core/units.hpp"

namespace dpt::verify {

// Correctness checks prove the data-parallel path computes what PyTorch computes;
// performance checks compare what the machine does with what the twin predicts.
enum class CheckKind { correctness, performance };
const char* check_kind_name(CheckKind k);          // "correctness" | "performance"
CheckKind check_kind_from_name(const std::string& name);  // throws std::invalid_argument

// passed/failed: the check ran and answered. error: the check itself could not run
// (an exception: a collective error, a missing file). skipped: it does not apply
// here (peer bandwidth with one device), with the reason in the message.
enum class CheckStatus { passed, failed, error, skipped };
const char* check_status_name(CheckStatus s);  // "PASS" | "FAIL" | "ERROR" | "SKIP"

// What a check's run() answers.
struct CheckOutcome {
  CheckStatus status = CheckStatus::passed;
  std::string figure;   // one short line: "200 cases", "0.97 of predicted (12.1 vs 12.5 GB/s)"
  std::string message;  // why it failed or was skipped: counterexample, seed, likely cause
  static CheckOutcome pass(std::string figure) { return {CheckStatus::passed, std::move(figure), {}}; }
  static CheckOutcome fail(std::string figure, std::string message) {
    return {CheckStatus::failed, std::move(figure), std::move(message)};
  }
  static CheckOutcome skip(std::string reason) { return {CheckStatus::skipped, {}, std::move(reason)}; }
};

struct Check {
  std::string name;  // dotted, stable across runs: "correctness.dp_gradient_equivalence"
  CheckKind kind = CheckKind::correctness;
  std::function<CheckOutcome()> run;
};

struct CheckResult {
  std::string name;
  CheckKind kind = CheckKind::correctness;
  CheckStatus status = CheckStatus::passed;
  std::string figure;
  std::string message;
  Seconds duration_s = 0;
};

// Counts over a run's results.
struct CheckCounts {
  int total = 0, passed = 0, failed = 0, errors = 0, skipped = 0;
  Seconds duration_s = 0;
};

// One `dptwin verify` invocation: what ran where, and the results in run order.
struct VerifyRun {
  std::string backend;     // "host" | "sim" | "cuda"
  int devices = 0;
  std::string hardware;    // hardware file path or name; empty when none
  std::uint64_t seed = 0;  // RapidCheck seed of the correctness properties
  int cases = 0;           // RapidCheck cases per property
  std::string timestamp;   // ISO 8601 UTC, when the run started
  std::string hostname;
  // What the verdict does not cover (the sim backend measuring the twin of its own file);
  // empty when nothing needs saying.
  std::string note;
  std::vector<CheckResult> results;

  CheckCounts counts(std::optional<CheckKind> kind = std::nullopt) const;
  // True when no check failed or errored (skipped checks do not fail a run).
  bool passed() const;
};

// Called after each check finishes (console progress); may be empty.
using CheckObserver = std::function<void(const CheckResult&)>;

// Runs the checks in order (only those of `only` when given), timing each. An
// exception from run() becomes an `error` result naming the exception, so one
// broken check never hides the others.
std::vector<CheckResult> run_checks(const std::vector<Check>& checks, std::optional<CheckKind> only = std::nullopt,
                                    const CheckObserver& observer = {});

// "2026-12-02T14:30:00Z" for now (UTC): engine/core/timestamp.hpp's.
using dpt::utc_timestamp_now;
std::string local_hostname();

}  // namespace dpt::verify
