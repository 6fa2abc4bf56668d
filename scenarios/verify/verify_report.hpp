// Reporters for a `dptwin verify` run, as google/benchmark's: small functions over
// one value (VerifyRun), one per format.
//  - console: one line per check (PASS/FAIL/ERROR/SKIP, name, figure), the
//    failure's message indented below it, and a summary line;
//  - JSON (schema "dptwin.verify/1"), for scripts;
//  - JUnit XML, which CI systems (Jenkins, GitLab, GitHub test reporters) read:
//    <testsuites> with one <testsuite> per check kind and one <testcase> per
//    check; failures as <failure>, errors as <error>, skips as <skipped>.
//    verify/data/junit.xsd is the schema it is validated against.
#pragma once
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "scenarios/verify/verify_check.hpp"

namespace dpt::verify {

// One line for one result, without a trailing newline: "PASS  name  figure".
std::string console_line(const CheckResult& r);
// Every result (with failure messages indented), then the summary line.
void write_console_report(const VerifyRun& run, std::ostream& os);
// "verify: 14 checks, 13 passed, 1 failed, 0 errors, 0 skipped in 2.31 s: FAILED"
std::string console_summary(const VerifyRun& run);

nlohmann::json verify_run_to_json(const VerifyRun& run);

std::string verify_run_to_junit_xml(const VerifyRun& run);
// Written atomically (temporary file, fsync, rename): a CI job never reads half a report.
void write_junit_xml(const VerifyRun& run, const std::string& path);
void write_json_report(const VerifyRun& run, const std::string& path);

// Text made safe for XML 1.0 attribute values and character data: markup
// characters escaped, control characters other than tab/newline replaced by '?'.
std::string xml_escape(const std::string& text);

}  // namespace dpt::verify
