// The verify check runner and its reporters: results, counts, console lines, JSON,
// and JUnit XML that validates against verify/data/junit.xsd (with xmllint) and
// lists every check. A deliberately broken report must fail validation, so the
// schema check is shown to be able to fail.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "scenarios/verify/verify_check.hpp"
#include "scenarios/verify/verify_report.hpp"
#include "verify/support/test_files.hpp"

namespace dpt::test {
using namespace dpt::verify;
namespace {

namespace fs = std::filesystem;
fs::path temp_dir() {
  const fs::path d = fs::path(DPT_BINARY_DIR) / "verify_report_test";
  fs::create_directories(d);
  return d;
}

// Runs xmllint --schema on the file; returns its exit status (0: valid) and output.
std::pair<int, std::string> xmllint_validate(const fs::path& xml) {
  const fs::path out = xml.string() + ".xmllint";
  const std::string cmd = "xmllint --noout --schema '" + std::string(DPT_SOURCE_DIR) + "/verify/data/junit.xsd' '" +
                          xml.string() + "' > '" + out.string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  return {WEXITSTATUS(status), slurp(out)};
}

bool have_xmllint() { return std::system("command -v xmllint > /dev/null 2>&1") == 0; }

// Five checks covering every status, with markup characters in names and messages.
std::vector<Check> sample_checks() {
  return {
      {"correctness.split", CheckKind::correctness, [] { return CheckOutcome::pass("300 cases"); }},
      {"correctness.dp_equivalence", CheckKind::correctness,
       [] { return CheckOutcome::fail("failed after 4 cases", "counterexample: <B=5, N=4> & \"dropped\"\nseed 42"); }},
      {"correctness.collectives", CheckKind::correctness,
       []() -> CheckOutcome { throw std::runtime_error("all_reduce: rank 1: timed out"); }},
      {"performance.peer_bandwidth.gpu1<->gpu2", CheckKind::performance,
       [] { return CheckOutcome::fail("0.40 of predicted", "peer link gpu1<->gpu2 at 40 % of the hardware file"); }},
      {"performance.peer_bandwidth", CheckKind::performance, [] { return CheckOutcome::skip("one device: no peers"); }},
  };
}

VerifyRun sample_run() {
  VerifyRun run;
  run.backend = "host";
  run.devices = 2;
  run.seed = 42;
  run.cases = 100;
  run.timestamp = "2026-12-02T14:30:00Z";
  run.hostname = "ci-runner";
  run.results = run_checks(sample_checks());
  return run;
}

TEST(VerifyRunner, RecordsEveryStatusAndTurnsExceptionsIntoErrors) {
  std::vector<std::string> observed;
  const auto results = run_checks(sample_checks(), std::nullopt, [&](const CheckResult& r) { observed.push_back(r.name); });
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(observed.size(), 5u);  // the observer sees each check as it finishes
  EXPECT_EQ(results[0].status, CheckStatus::passed);
  EXPECT_EQ(results[1].status, CheckStatus::failed);
  EXPECT_EQ(results[2].status, CheckStatus::error);
  EXPECT_NE(results[2].message.find("all_reduce: rank 1: timed out"), std::string::npos);
  EXPECT_EQ(results[3].status, CheckStatus::failed);
  EXPECT_EQ(results[4].status, CheckStatus::skipped);
  for (const auto& r : results) EXPECT_GE(r.duration_s, 0.0);
}

TEST(VerifyRunner, OnlyRunsTheRequestedKind) {
  const auto perf = run_checks(sample_checks(), CheckKind::performance);
  ASSERT_EQ(perf.size(), 2u);
  for (const auto& r : perf) EXPECT_EQ(r.kind, CheckKind::performance);
  EXPECT_THROW(check_kind_from_name("speed"), std::invalid_argument);
}

TEST(VerifyRunner, CountsAndVerdict) {
  const VerifyRun run = sample_run();
  const CheckCounts c = run.counts();
  EXPECT_EQ(c.total, 5);
  EXPECT_EQ(c.passed, 1);
  EXPECT_EQ(c.failed, 2);
  EXPECT_EQ(c.errors, 1);
  EXPECT_EQ(c.skipped, 1);
  EXPECT_FALSE(run.passed());
  EXPECT_EQ(run.counts(CheckKind::correctness).total, 3);

  VerifyRun ok = run;
  ok.results = run_checks({sample_checks()[0], sample_checks()[4]});
  EXPECT_TRUE(ok.passed());  // a skipped check does not fail a run
}

TEST(VerifyConsole, OneLinePerCheckWithStatusAndFigure) {
  const VerifyRun run = sample_run();
  std::ostringstream os;
  write_console_report(run, os);
  const std::string text = os.str();
  EXPECT_EQ(console_line(run.results[0]).rfind("PASS  correctness.split", 0), 0u);
  EXPECT_NE(console_line(run.results[0]).find("300 cases"), std::string::npos);
  EXPECT_EQ(console_line(run.results[1]).rfind("FAIL", 0), 0u);
  EXPECT_EQ(console_line(run.results[2]).rfind("ERROR", 0), 0u);
  EXPECT_EQ(console_line(run.results[4]).rfind("SKIP", 0), 0u);
  // The failure's message follows its line, indented, every line of it.
  EXPECT_NE(text.find("      counterexample: <B=5, N=4>"), std::string::npos);
  EXPECT_NE(text.find("      seed 42"), std::string::npos);
  EXPECT_NE(text.find("verify: 5 checks, 1 passed, 2 failed, 1 error, 1 skipped"), std::string::npos);
  EXPECT_NE(text.find("FAILED"), std::string::npos);
}

TEST(VerifyJson, CarriesEveryCheckAndTheCounts) {
  const auto j = verify_run_to_json(sample_run());
  EXPECT_EQ(j.at("schema"), "dptwin.verify/1");
  EXPECT_EQ(j.at("passed"), false);
  EXPECT_EQ(j.at("counts").at("failed"), 2);
  ASSERT_EQ(j.at("checks").size(), 5u);
  EXPECT_EQ(j.at("checks")[3].at("name"), "performance.peer_bandwidth.gpu1<->gpu2");
  EXPECT_EQ(j.at("checks")[3].at("status"), "FAIL");
  EXPECT_EQ(j.at("checks")[3].at("kind"), "performance");
}

TEST(VerifyJunit, EscapesMarkupAndControlCharacters) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(xml_escape(std::string("x\x01y\tz\n")), "x?y\tz\n");
}

TEST(VerifyJunit, ValidatesAgainstTheSchemaAndListsEveryCheck) {
  ASSERT_TRUE(have_xmllint()) << "xmllint is missing: run ci/install-deps (package libxml2-utils)";
  const VerifyRun run = sample_run();
  const fs::path path = temp_dir() / "report.xml";
  write_junit_xml(run, path.string());
  const auto [status, output] = xmllint_validate(path);
  EXPECT_EQ(status, 0) << output;
  const std::string xml = slurp(path);
  for (const auto& r : run.results)
    EXPECT_NE(xml.find("<testcase name=\"" + xml_escape(r.name) + "\""), std::string::npos) << r.name;
  EXPECT_NE(xml.find("<testsuites name=\"dptwin verify\" tests=\"5\" failures=\"2\" errors=\"1\" skipped=\"1\""),
            std::string::npos);
  EXPECT_NE(xml.find("name=\"dptwin.verify.correctness\" id=\"0\" package=\"dptwin.verify\" tests=\"3\" "
                     "failures=\"1\" errors=\"1\" skipped=\"0\""),
            std::string::npos);
  EXPECT_NE(xml.find("<failure message=\"counterexample: &lt;B=5, N=4&gt; &amp; &quot;dropped&quot;\""),
            std::string::npos);
  EXPECT_NE(xml.find("<skipped message=\"one device: no peers\"/>"), std::string::npos);
  EXPECT_NE(xml.find("timestamp=\"2026-12-02T14:30:00\""), std::string::npos);
}

TEST(VerifyJunit, SchemaRejectsABrokenReport) {
  ASSERT_TRUE(have_xmllint()) << "xmllint is missing: run ci/install-deps (package libxml2-utils)";
  // The planted bugs a writer could make: a missing count, an unknown element, a
  // negative time. Each must fail validation, or the schema proves nothing.
  std::string good = verify_run_to_junit_xml(sample_run());
  const std::vector<std::pair<std::string, std::string>> breakages = {
      {"tests=\"5\" ", ""},
      {"<system-out>300 cases</system-out>", "<stdout>300 cases</stdout>"},
      {"<testcase name=\"correctness.split\" classname=\"dptwin.verify.correctness\" time=\"",
       "<testcase name=\"correctness.split\" classname=\"dptwin.verify.correctness\" time=\"-5"}};
  int i = 0;
  for (const auto& [from, to] : breakages) {
    std::string bad = good;
    const auto at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    bad.replace(at, from.size(), to);
    const fs::path path = temp_dir() / ("broken" + std::to_string(i++) + ".xml");
    std::ofstream(path) << bad;
    EXPECT_NE(xmllint_validate(path).first, 0) << "accepted: " << to;
  }
}

TEST(VerifyJunit, WritesAtomicallyAndNamesAnUnwritablePath) {
  const fs::path path = temp_dir() / "atomic.xml";
  std::ofstream(path) << "previous";
  write_junit_xml(sample_run(), path.string());
  EXPECT_EQ(slurp(path).rfind("<?xml", 0), 0u);
  for (const auto& entry : fs::directory_iterator(temp_dir()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  // A missing directory is made (CI's `--junit reports/verify.xml`)...
  const fs::path nested = temp_dir() / "reports" / "r.xml";
  fs::remove_all(temp_dir() / "reports");
  write_junit_xml(sample_run(), nested.string());
  EXPECT_EQ(slurp(nested).rfind("<?xml", 0), 0u);
  // ... but one that cannot be (below a regular file) is an error naming it.
  std::ofstream(temp_dir() / "not-a-dir") << "x";
  const std::string bad = (temp_dir() / "not-a-dir" / "r.xml").string();
  try {
    write_junit_xml(sample_run(), bad);
    FAIL() << "wrote below a regular file";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("not-a-dir"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dpt::test
