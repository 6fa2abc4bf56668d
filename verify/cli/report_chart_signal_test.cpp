// Stop signals while a report's charts are drawn, through the real executable with a
// fake, slow gnuplot first on PATH (a script in the case's folder). Invariant: SIGINT
// or SIGTERM, to dptwin alone or to its whole group, ends the run within a few
// seconds with exit 128 + signal; gnuplot ends too (no process of the group is left);
// no temporary chart folder and no staging folder are left; the report written
// before is unchanged.
// Shown to fail before the fix (gnuplot forked outside the stop-signal scope): SIGINT
// to dptwin alone ended it at once by the default disposition, leaving the fake
// gnuplot running and its dptwin-chart-* folder in TMPDIR.
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "verify/cli/spawn.hpp"

namespace fs = std::filesystem;
using namespace dpt::test;
using namespace std::chrono_literals;

namespace {

std::map<std::string, std::string> folder_files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != ".dptwin-report.lock")
      out[fs::relative(e.path(), dir).string()] = slurp(e.path());
  return out;
}

int entries_containing(const fs::path& dir, const std::string& part) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(part) != std::string::npos) ++n;
  return n;
}

struct Case {
  fs::path dir, tmp, started;
  std::map<std::string, std::string> report_before;
};

// A sweep result and a complete report drawn by the real gnuplot; then a fake gnuplot
// that marks its start and sleeps a minute.
Case make_case(const std::string& name) {
  Case c;
  c.dir = fs::path(DPT_BINARY_DIR) / "report_chart_signal" / name;
  fs::remove_all(c.dir);
  c.tmp = c.dir / "tmp";
  c.started = c.dir / "gnuplot-started";
  fs::create_directories(c.tmp);
  fs::create_directories(c.dir / "bin");
  std::ofstream(c.dir / "s.yaml") << "schema_version: 1\nname: charted\nhardware: dgx-a100\nmodel: resnet50\n"
                                     "strategy: ddp\nbatch_per_device: 32\nsweep:\n  devices: [1, 2]\n";
  SpawnOptions o;
  o.env["TMPDIR"] = c.tmp.string();
  EXPECT_EQ(wait_for(spawn_dptwin({"sweep", "s.yaml", "--jobs", "1", "-o", "s.json", "--report", "rep"}, c.dir, o), 120s),
            0)
      << slurp(c.dir / ".stderr");
  c.report_before = folder_files(c.dir / "rep");
  const fs::path fake = c.dir / "bin" / "gnuplot";
  std::ofstream(fake) << "#!/bin/sh\n: > '" << c.started.string() << "'\nexec sleep 60\n";
  fs::permissions(fake, fs::perms::owner_all);
  return c;
}

// Starts `dptwin report` with the fake gnuplot and returns once it is drawing.
pid_t start_report(const Case& c) {
  SpawnOptions o;
  o.env["TMPDIR"] = c.tmp.string();
  o.env["PATH"] = (c.dir / "bin").string() + ":" + std::getenv("PATH");
  const pid_t pid = spawn_dptwin({"report", "s.json", "--report", "rep"}, c.dir, o);
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (!fs::exists(c.started) && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(fs::exists(c.started)) << "the fake gnuplot never started: " << slurp(c.dir / ".stderr");
  return pid;
}

void expect_stopped_cleanly(const Case& c, pid_t pid, int sig) {
  const auto rc = wait_for(pid, 10s);
  if (!rc) kill_group(pid);
  ASSERT_TRUE(rc.has_value()) << "dptwin did not end within 10 s of signal " << sig;
  EXPECT_EQ(*rc, 128 + sig) << slurp(c.dir / ".stderr");
  EXPECT_TRUE(group_gone_within(pid, 5s)) << "gnuplot left running";
  EXPECT_EQ(entries_containing(c.tmp, "dptwin-chart-"), 0) << "a temporary chart folder was left";
  EXPECT_EQ(entries_containing(c.dir, "rep.partial-"), 0) << "a staging folder was left";
  EXPECT_EQ(folder_files(c.dir / "rep"), c.report_before);
}

}  // namespace

TEST(ReportChartSignals, SigintToDptwinAloneStopsGnuplotAndCleansUp) {
  become_subreaper();
  const Case c = make_case("sigint-pid");
  const pid_t pid = start_report(c);
  ::kill(pid, SIGINT);  // `kill -INT PID`: gnuplot gets it only from dptwin
  expect_stopped_cleanly(c, pid, SIGINT);
}

TEST(ReportChartSignals, CtrlCToTheGroupStopsEverything) {
  become_subreaper();
  const Case c = make_case("sigint-group");
  const pid_t pid = start_report(c);
  ::kill(-pid, SIGINT);  // the terminal's Ctrl-C
  expect_stopped_cleanly(c, pid, SIGINT);
}

TEST(ReportChartSignals, SigtermToDptwinAloneStopsGnuplotAndCleansUp) {
  become_subreaper();
  const Case c = make_case("sigterm-pid");
  const pid_t pid = start_report(c);
  ::kill(pid, SIGTERM);
  expect_stopped_cleanly(c, pid, SIGTERM);
}
