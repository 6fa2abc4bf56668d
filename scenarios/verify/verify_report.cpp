#include "scenarios/verify/verify_report.hpp"

#include <cstddef>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "engine/io/safetensors.hpp"

namespace dpt::verify {
namespace {

constexpr CheckKind kKinds[] = {CheckKind::correctness, CheckKind::performance};

void write_text_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, text, {.create_parent_dirs = true});
}

std::string indent(const std::string& text, const std::string& prefix) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out += prefix + line + "\n";
  return out;
}

// JUnit's timestamp has no time zone (the Ant schema's ISO8601 pattern); ours is UTC.
std::string junit_timestamp(const std::string& iso_utc) {
  std::string t = iso_utc;
  if (!t.empty() && t.back() == 'Z') t.pop_back();
  return t;
}

}  // namespace

std::string console_line(const CheckResult& r) {
  std::string line = fmt::format("{:<5} {:<52}", check_status_name(r.status), r.name);
  if (!r.figure.empty()) line += " " + r.figure;
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

std::string console_summary(const VerifyRun& run) {
  const CheckCounts c = run.counts();
  return fmt::format("verify: {} check{}, {} passed, {} failed, {} error{}, {} skipped in {:.2f} s: {}{}", c.total,
                     c.total == 1 ? "" : "s", c.passed, c.failed, c.errors, c.errors == 1 ? "" : "s", c.skipped,
                     c.duration_s,
                     !run.passed() ? "FAILED" : c.total > 0 && c.skipped == c.total ? "SKIPPED" : "PASSED",
                     run.note.empty() ? "" : " (the twin against its own file: no machine was measured)");
}

void write_console_report(const VerifyRun& run, std::ostream& os) {
  for (const auto& r : run.results) {
    os << console_line(r) << "\n";
    if (r.status != CheckStatus::passed && !r.message.empty()) os << indent(r.message, "      ");
  }
  os << console_summary(run) << "\n";
}

nlohmann::json verify_run_to_json(const VerifyRun& run) {
  using nlohmann::json;
  auto counts_json = [](const CheckCounts& c) {
    return json{{"total", c.total},     {"passed", c.passed},   {"failed", c.failed},
                {"errors", c.errors},   {"skipped", c.skipped}, {"time_s", c.duration_s}};
  };
  json checks = json::array();
  for (const auto& r : run.results) {
    checks.push_back({{"name", r.name},
                      {"kind", check_kind_name(r.kind)},
                      {"status", check_status_name(r.status)},
                      {"figure", r.figure},
                      {"message", r.message},
                      {"time_s", r.duration_s}});
  }
  return json{{"schema", "dptwin.verify/1"},
              {"backend", run.backend},
              {"devices", run.devices},
              {"hardware", run.hardware},
              {"seed", run.seed},
              {"cases", run.cases},
              {"timestamp", run.timestamp},
              {"hostname", run.hostname},
              {"note", run.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(run.note)},
              {"passed", run.passed()},
              {"counts", counts_json(run.counts())},
              {"checks", checks}};
}

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 forbids control characters other than tab, newline, carriage return.
        if (c < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') out += '?';
        else out += ch;
    }
  }
  return out;
}

std::string verify_run_to_junit_xml(const VerifyRun& run) {
  const CheckCounts all = run.counts();
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites name=\"dptwin verify\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" "
                   "time=\"{:.3f}\">\n",
                   all.total, all.failed, all.errors, all.skipped, all.duration_s);
  int suite_id = 0;
  for (const CheckKind kind : kKinds) {
    const CheckCounts c = run.counts(kind);
    if (c.total == 0) continue;
    const std::string suite = std::string("dptwin.verify.") + check_kind_name(kind);
    x += fmt::format("  <testsuite name=\"{}\" id=\"{}\" package=\"dptwin.verify\" tests=\"{}\" failures=\"{}\" "
                     "errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\" timestamp=\"{}\" hostname=\"{}\">\n",
                     suite, suite_id++, c.total, c.failed, c.errors, c.skipped, c.duration_s,
                     xml_escape(junit_timestamp(run.timestamp)), xml_escape(run.hostname));
    x += "    <properties>\n";
    auto property = [&](const std::string& name, const std::string& value) {
      x += fmt::format("      <property name=\"{}\" value=\"{}\"/>\n", xml_escape(name), xml_escape(value));
    };
    property("backend", run.backend);
    property("devices", std::to_string(run.devices));
    property("hardware", run.hardware);
    property("seed", std::to_string(run.seed));
    property("cases", std::to_string(run.cases));
    x += "    </properties>\n";
    for (const auto& r : run.results) {
      if (r.kind != kind) continue;
      x += fmt::format("    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3f}\">\n", xml_escape(r.name), suite,
                       r.duration_s);
      const std::string summary = r.message.substr(0, r.message.find('\n'));
      switch (r.status) {
        case CheckStatus::passed: break;
        case CheckStatus::failed:
          x += fmt::format("      <failure message=\"{}\" type=\"{}\">{}</failure>\n", xml_escape(summary),
                           check_kind_name(kind), xml_escape(r.message));
          break;
        case CheckStatus::error:
          x += fmt::format("      <error message=\"{}\" type=\"error\">{}</error>\n", xml_escape(summary),
                           xml_escape(r.message));
          break;
        case CheckStatus::skipped:
          x += fmt::format("      <skipped message=\"{}\"/>\n", xml_escape(summary));
          break;
      }
      if (!r.figure.empty()) x += fmt::format("      <system-out>{}</system-out>\n", xml_escape(r.figure));
      x += "    </testcase>\n";
    }
    x += "  </testsuite>\n";
  }
  x += "</testsuites>\n";
  return x;
}

void write_junit_xml(const VerifyRun& run, const std::string& path) {
  write_text_atomic(path, verify_run_to_junit_xml(run));
}

void write_json_report(const VerifyRun& run, const std::string& path) {
  write_text_atomic(path, verify_run_to_json(run).dump(2) + "\n");
}

}  // namespace dpt::verify
