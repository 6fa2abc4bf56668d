// Durability of sweep results (`dptwin sweep S.yaml -o out.json`) and report folders
// (`dptwin report SWEEP.json --report DIR`) through the real executable: each run is
// killed with SIGKILL (the whole process group, workers and gnuplot included) at a
// random point, again and again, alternating between two scenarios whose outputs
// differ. Invariants, checked after every kill:
// - out.json parses and is one run's complete result: equal to the previous complete
//   result or the new one (wall-clock fields aside), never truncated or mixed;
// - the report folder holds exactly one run's files, every file byte for byte that
//   run's (the Markdown of one report never beside the HTML of the other);
// - the next run left alone removes what the killed ones left behind (temporary
//   files, staging folders, temporary folders in TMPDIR).
// A full disk (a child limited by RLIMIT_FSIZE) leaves the earlier outputs intact, with
// a clear error naming the file.
// Shown to fail on planted bugs: with the report written in place (no staging folder)
// the folder held alpha's charts beside bravo's report.md after a kill; with the
// staging folder's leftovers not removed, "rep.partial-<pid>" folders stayed.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "verify/cli/spawn.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace dpt::test;

namespace {

// Two small sweeps with different names and points, so their outputs differ everywhere.
void write_scenarios(const fs::path& dir) {
  const std::map<std::string, std::string> devices = {{"alpha", "[1, 2, 4]"}, {"bravo", "[2, 8]"}};
  for (const auto& [name, axis] : devices)
    std::ofstream(dir / (name + ".yaml")) << "schema_version: 1\nname: " << name
                                          << "\nhardware: dgx-a100\nmodel: resnet50\nstrategy: ddp\n"
                                             "batch_per_device: 32\nsweep:\n  devices: "
                                          << axis << "\n";
}

// A sweep result without its wall-clock fields (they differ from run to run).
json without_wall_clock(json j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end();) {
      if (it.key() == "wall_s" || it.key() == "dptwin") it = j.erase(it);
      else {
        *it = without_wall_clock(*it);
        ++it;
      }
    }
  } else if (j.is_array()) {
    for (auto& e : j) e = without_wall_clock(e);
  }
  return j;
}

// Every file of a report folder (relative path -> bytes), without the lock file and
// with the report's date (2026-12-03T16:21:22Z, the time of the run) blanked.
std::map<std::string, std::string> folder_files(const fs::path& dir) {
  static const std::regex date(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename() == ".dptwin-report.lock") continue;
    out[fs::relative(e.path(), dir).string()] = std::regex_replace(slurp(e.path()), date, "DATE");
  }
  return out;
}

// Entries of `dir` whose name contains `part` (leftovers of killed writers).
int leftovers(const fs::path& dir, const std::string& part) {
  int n = 0;
  if (!fs::exists(dir)) return 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(part) != std::string::npos) ++n;
  return n;
}

int kills_wanted(int fallback) {
  const char* env = std::getenv("DPTWIN_OUTPUT_KILLS");
  return env ? std::atoi(env) : fallback;
}

// Runs dptwin in `dir` to the end (the test's own TMPDIR) and returns its exit code.
int run_to_end(const std::vector<std::string>& args, const fs::path& dir, SpawnOptions o = {}) {
  o.env["TMPDIR"] = (dir / "tmp").string();
  const auto rc = wait_for(spawn_dptwin(args, dir, o), std::chrono::seconds(120));
  return rc.value_or(-1);
}

// The seconds one run of `args` takes (the longest of two), to spread kills over it.
double run_seconds(const std::vector<std::string>& args, const fs::path& dir) {
  double s = 0;
  for (int i = 0; i < 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(run_to_end(args, dir), 0) << slurp(dir / ".stderr");
    s = std::max(s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return s;
}

// Starts `args` and kills its whole group with SIGKILL after `after_s`; true when the
// kill ended it (false: it had finished already).
bool run_and_kill(const std::vector<std::string>& args, const fs::path& dir, double after_s) {
  SpawnOptions o;
  o.env["TMPDIR"] = (dir / "tmp").string();
  const pid_t pid = spawn_dptwin(args, dir, o);
  std::this_thread::sleep_for(std::chrono::duration<double>(after_s));
  ::kill(-pid, SIGKILL);
  const auto rc = wait_for(pid, std::chrono::seconds(30));
  EXPECT_TRUE(group_gone_within(pid, std::chrono::seconds(10)));
  return rc == 128 + SIGKILL;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(DPT_BINARY_DIR) / "output_durability" / name;
  fs::remove_all(dir);
  fs::create_directories(dir / "tmp");
  write_scenarios(dir);
  return dir;
}

}  // namespace

// Kills: DPTWIN_OUTPUT_KILLS (default 8: about 15 s alone).
TEST(OutputDurability, SweepResultSurvivesSigkillAtRandomPoints) {
  become_subreaper();
  const fs::path dir = fresh_dir("sweep");
  const std::vector<std::string> names = {"alpha", "bravo"};
  auto args = [](const std::string& name) {
    return std::vector<std::string>{"sweep", name + ".yaml", "--jobs", "1", "-o", "out.json"};
  };
  std::map<std::string, json> complete;
  double run_s = 0;
  for (const auto& name : names) {
    run_s = std::max(run_s, run_seconds(args(name), dir));
    complete[name] = without_wall_clock(json::parse(slurp(dir / "out.json")));
  }
  ASSERT_NE(complete["alpha"], complete["bravo"]);
  std::mt19937 rng(2026);
  // Most kills in the second half, where the workers end and the result is written.
  std::uniform_real_distribution<double> when(0.3 * run_s, 1.05 * run_s);
  std::string previous = "bravo";  // the last reference run wrote bravo's result
  int runs = 0, kills = 0, intact = 0, replaced = 0;
  for (int i = 0; i < kills_wanted(8); ++i) {
    const std::string name = previous == "alpha" ? "bravo" : "alpha";
    ++runs;
    if (run_and_kill(args(name), dir, when(rng))) ++kills;
    json now;
    try {
      now = without_wall_clock(json::parse(slurp(dir / "out.json")));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "run " << i << ": out.json does not parse: " << e.what();
      continue;
    }
    // The invariant: the previous complete result or the new one.
    const bool is_previous = now == complete[previous], is_new = now == complete[name];
    EXPECT_TRUE(is_previous || is_new) << "run " << i << ": out.json is neither sweep's complete result";
    if (is_previous || is_new) ++intact;
    if (is_new) {
      ++replaced;
      previous = name;
    }
  }
  // A run left alone removes the killed runs' temporary files and folders.
  ASSERT_EQ(run_to_end(args("alpha"), dir), 0) << slurp(dir / ".stderr");
  EXPECT_EQ(leftovers(dir, ".dptwin-tmp."), 0);
  EXPECT_EQ(leftovers(dir / "tmp", "dptwin-sweep-"), 0);
  std::cout << fmt::format("sweep -o: {} runs, {} ended by SIGKILL, {} results intact, {} replaced by the new one\n",
                           runs, kills, intact, replaced);
  EXPECT_EQ(intact, runs);
  EXPECT_GT(kills, 0);
}

// Kills: twice DPTWIN_OUTPUT_KILLS report runs (default 8: 16 runs, about 20 s alone).
TEST(OutputDurability, ReportFolderSurvivesSigkillAtRandomPoints) {
  become_subreaper();
  const fs::path dir = fresh_dir("report");
  const std::vector<std::string> names = {"alpha", "bravo"};
  // The sweep results the reports are drawn from, and each report written once alone
  // (in the same folder name, so the texts that name it agree), then moved aside.
  std::map<std::string, std::map<std::string, std::string>> complete;
  auto args = [](const std::string& name) {
    return std::vector<std::string>{"report", name + ".json", "--report", "rep"};
  };
  double run_s = 0;
  for (const auto& name : names) {
    ASSERT_EQ(run_to_end({"sweep", name + ".yaml", "--jobs", "1", "-o", name + ".json"}, dir), 0)
        << slurp(dir / ".stderr");
    run_s = std::max(run_s, run_seconds(args(name), dir));
    complete[name] = folder_files(dir / "rep");
    ASSERT_TRUE(complete[name].count("report.html")) << name;
    ASSERT_TRUE(complete[name].count("report.md")) << name;
  }
  ASSERT_NE(complete["alpha"].at("report.md"), complete["bravo"].at("report.md"));
  std::mt19937 rng(2027);
  std::uniform_real_distribution<double> when(0.2 * run_s, 1.05 * run_s);
  std::string previous = "bravo";
  int runs = 0, kills = 0, intact = 0, replaced = 0, left_partial = 0;
  for (int i = 0; i < 2 * kills_wanted(8); ++i) {
    const std::string name = previous == "alpha" ? "bravo" : "alpha";
    ++runs;
    if (run_and_kill(args(name), dir, when(rng))) ++kills;
    if (leftovers(dir, "rep.partial-") > 0) ++left_partial;
    const auto now = folder_files(dir / "rep");
    // The invariant: every file of the folder is one run's, and the folder is whole.
    const bool is_previous = now == complete[previous], is_new = now == complete[name];
    EXPECT_TRUE(is_previous || is_new) << "run " << i << ": the report folder is neither report whole ("
                                       << now.size() << " files)";
    if (is_previous || is_new) ++intact;
    if (is_new) {
      ++replaced;
      previous = name;
    }
  }
  ASSERT_EQ(run_to_end(args("alpha"), dir), 0) << slurp(dir / ".stderr");
  EXPECT_EQ(folder_files(dir / "rep"), complete["alpha"]);
  EXPECT_EQ(leftovers(dir, "rep.partial-"), 0);
  EXPECT_EQ(leftovers(dir, "rep.old-"), 0);
  EXPECT_EQ(leftovers(dir / "tmp", "dptwin-chart-"), 0);
  std::cout << fmt::format("report --report: {} runs, {} ended by SIGKILL ({} left a staging folder), "
                           "{} folders intact, {} replaced by the new report\n",
                           runs, kills, left_partial, intact, replaced);
  EXPECT_EQ(intact, runs);
  EXPECT_GT(kills, 0);
}

// A full disk as a file-size limit: the sweep result and the report folder written
// before stay as they were, the command exits 3 naming the file, and nothing of the
// failed write is left behind.
TEST(OutputDurability, FullDiskLeavesEarlierResultAndReport) {
  const fs::path dir = fresh_dir("full");
  ASSERT_EQ(run_to_end({"sweep", "alpha.yaml", "--jobs", "1", "-o", "out.json", "--report", "rep"}, dir), 0)
      << slurp(dir / ".stderr");
  const std::string before = slurp(dir / "out.json");
  const auto report_before = folder_files(dir / "rep");
  SpawnOptions limited;
  limited.file_size_limit_bytes = 512;  // smaller than any result or report file
  const int rc = run_to_end({"sweep", "bravo.yaml", "--jobs", "1", "-o", "out.json"}, dir, limited);
  EXPECT_EQ(rc, 3);
  const std::string err = slurp(dir / ".stderr");
  // Under the limit the points' own results cannot be written either, so every point fails
  // and the sweep leaves out.json as it was without writing; a sweep whose points ran fails
  // at the write instead. Either way the file is named.
  EXPECT_TRUE(err.find("out.json: write failed: File too large (previous file left unchanged)") != std::string::npos ||
              err.find("every point failed; out.json left as it was") != std::string::npos)
      << err;
  EXPECT_EQ(slurp(dir / "out.json"), before);
  const int rc_report = run_to_end({"report", "out.json", "--report", "rep"}, dir, limited);
  EXPECT_EQ(rc_report, 3);
  const std::string report_err = slurp(dir / ".stderr");
  EXPECT_NE(report_err.find(": write failed: File too large"), std::string::npos) << report_err;
  EXPECT_EQ(folder_files(dir / "rep"), report_before);
  EXPECT_EQ(leftovers(dir, ".dptwin-tmp."), 0);
  EXPECT_EQ(leftovers(dir, "rep.partial-"), 0);
  EXPECT_EQ(leftovers(dir / "tmp", "dptwin-"), 0);
}

// What killed writers leave (their pid is in each name, and it no longer runs) is
// removed by the next run that writes the same output: the -o result's temporary file
// (a whole sweep's and a shard's), the report's staging folder and moved-aside old
// report, and the sweep's and the charts' temporary folders in TMPDIR. The leftovers
// of a live process (this test's) are kept.
TEST(OutputDurability, NextRunRemovesTheLeftoversOfKilledWriters) {
  const fs::path dir = fresh_dir("leftovers");
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::vector<fs::path> stale = {dir / fmt::format(".out.json.dptwin-tmp.{}", dead),
                                       dir / fmt::format(".shard.json.dptwin-tmp.{}", dead),
                                       dir / fmt::format("rep.partial-{}", dead),
                                       dir / fmt::format("rep.old-{}", dead),
                                       dir / "tmp" / fmt::format("dptwin-sweep-{}-AbC123", dead),
                                       dir / "tmp" / fmt::format("dptwin-chart-{}-AbC123", dead)};
  const fs::path live = dir / fmt::format("rep.partial-{}", ::getpid());
  for (const auto& p : stale) {
    if (p.filename().string()[0] == '.') std::ofstream(p) << "{\"partial";
    else {
      fs::create_directories(p / "charts");
      std::ofstream(p / "report.md") << "# half a report";
    }
  }
  fs::create_directories(live);
  ASSERT_EQ(run_to_end({"sweep", "alpha.yaml", "--jobs", "1", "-o", "out.json", "--report", "rep"}, dir), 0)
      << slurp(dir / ".stderr");
  ASSERT_EQ(run_to_end({"sweep", "alpha.yaml", "--jobs", "1", "--shard", "0/2", "-o", "shard.json"}, dir), 0)
      << slurp(dir / ".stderr");
  for (const auto& p : stale) EXPECT_FALSE(fs::exists(p)) << p;
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(json::accept(slurp(dir / "out.json")));
  EXPECT_TRUE(json::accept(slurp(dir / "shard.json")));
}

// A result file written with -o names the build that wrote it, as --json output does
// ("dptwin": version and git revision), and every reader of sweep files takes it back:
// merge (whose own -o carries it again) and report.
TEST(OutputDurability, ResultFilesCarryTheDptwinVersion) {
  const fs::path dir = fresh_dir("version");
  ASSERT_EQ(run_to_end({"sweep", "alpha.yaml", "--jobs", "1", "--shard", "0/2", "-o", "s0.json"}, dir), 0)
      << slurp(dir / ".stderr");
  ASSERT_EQ(run_to_end({"sweep", "alpha.yaml", "--jobs", "1", "--shard", "1/2", "-o", "s1.json"}, dir), 0)
      << slurp(dir / ".stderr");
  ASSERT_EQ(run_to_end({"merge", "s0.json", "s1.json", "-o", "all.json"}, dir), 0) << slurp(dir / ".stderr");
  for (const char* f : {"s0.json", "s1.json", "all.json"}) {
    const json j = json::parse(slurp(dir / f));
    ASSERT_TRUE(j.contains("dptwin")) << f;
    EXPECT_TRUE(j.at("dptwin").at("version").is_string()) << f;
    EXPECT_TRUE(j.at("dptwin").at("git_revision").is_string()) << f;
  }
  EXPECT_EQ(run_to_end({"report", "all.json", "--report", "rep"}, dir), 0) << slurp(dir / ".stderr");
}
