#include "scenarios/verify/verify_check.hpp"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <exception>
#include <stdexcept>

namespace dpt::verify {

const char* check_kind_name(CheckKind k) {
  switch (k) {
    case CheckKind::correctness: return "correctness";
    case CheckKind::performance: return "performance";
  }
  return "?";
}

CheckKind check_kind_from_name(const std::string& name) {
  if (name == "correctness") return CheckKind::correctness;
  if (name == "performance") return CheckKind::performance;
  throw std::invalid_argument("unknown check kind '" + name + "' (known: correctness, performance)");
}

const char* check_status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::passed: return "PASS";
    case CheckStatus::failed: return "FAIL";
    case CheckStatus::error: return "ERROR";
    case CheckStatus::skipped: return "SKIP";
  }
  return "?";
}

CheckCounts VerifyRun::counts(std::optional<CheckKind> kind) const {
  CheckCounts c;
  for (const auto& r : results) {
    if (kind && r.kind != *kind) continue;
    ++c.total;
    c.duration_s += r.duration_s;
    switch (r.status) {
      case CheckStatus::passed: ++c.passed; break;
      case CheckStatus::failed: ++c.failed; break;
      case CheckStatus::error: ++c.errors; break;
      case CheckStatus::skipped: ++c.skipped; break;
    }
  }
  return c;
}

bool VerifyRun::passed() const {
  const CheckCounts c = counts();
  return c.failed == 0 && c.errors == 0;
}

std::vector<CheckResult> run_checks(const std::vector<Check>& checks, std::optional<CheckKind> only,
                                    const CheckObserver& observer) {
  std::vector<CheckResult> results;
  for (const auto& check : checks) {
    if (only && check.kind != *only) continue;
    CheckResult r;
    r.name = check.name;
    r.kind = check.kind;
    const auto start = std::chrono::steady_clock::now();
    try {
      CheckOutcome o = check.run();
      r.status = o.status;
      r.figure = std::move(o.figure);
      r.message = std::move(o.message);
    } catch (const std::exception& e) {
      r.status = CheckStatus::error;
      r.message = std::string("the check could not run: ") + e.what();
    }
    r.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (observer) observer(r);
    results.push_back(std::move(r));
  }
  return results;
}

std::string local_hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace dpt::verify
