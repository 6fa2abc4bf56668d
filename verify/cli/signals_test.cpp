// Stop signals and budgets through the real executable. Invariants: SIGINT to a run's
// process group (Ctrl-C) or SIGTERM to its parent ends every process of the run within
// a few seconds, with exit 128 + signal, and leaves no temporary folder; a run whose
// SIGINT is ignored (nohup) is not disturbed by it and finishes; a prediction past its
// event or wall-clock budget ends with exit 3 and a message naming the budget.
// Before the fix, SimGrid's SIGINT handler called exit() in the simulation children
// (which could deadlock in free), and SIGTERM left a sweep's workers and its
// temporary folder behind.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "verify/cli/spawn.hpp"

namespace fs = std::filesystem;
using namespace dpt::test;
using namespace std::chrono_literals;

namespace {

// A sweep of a few seconds: 40 points, two at a time, each point a forked worker that
// forks its simulation. Long enough (about 4.5 s on 2 idle cores of this machine kind) that
// every signal below lands while it runs, also on a machine twice as fast: a sweep that
// ended before its Ctrl-C exits 0, which no signal handling should be blamed for.
const char* kSweep =
    "schema_version: 1\n"
    "hardware: dgx-h100-cluster\n"
    "model: gpt2-124m\n"
    "strategy: ddp\n"
    "batch_per_device: 8\n"
    "sweep:\n"
    "  gpus: [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]\n"
    "  bucket_cap_mb: [1, 5, 25, 100]\n";

struct Case {
  fs::path dir, tmp;
};

// Two points: a run that is meant to finish.
const char* kShortSweep =
    "schema_version: 1\n"
    "hardware: dgx-h100\n"
    "model: gpt2-124m\n"
    "strategy: ddp\n"
    "batch_per_device: 8\n"
    "sweep:\n"
    "  gpus: [4, 8]\n";

Case make_case(const std::string& name, const char* scenario = kSweep) {
  Case c;
  c.dir = fs::path(DPT_BINARY_DIR) / "signals_test" / name;
  fs::remove_all(c.dir);
  c.tmp = c.dir / "tmp";
  fs::create_directories(c.tmp);
  std::ofstream(c.dir / "sweep.yaml") << scenario;
  return c;
}

int temp_folders(const fs::path& tmp) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(tmp))
    if (e.path().filename().string().rfind("dptwin-", 0) == 0) ++n;
  return n;
}

// Starts the sweep and waits until its workers are running (its temporary folder exists).
pid_t start_sweep(const Case& c, const SpawnOptions& extra = {}) {
  SpawnOptions o = extra;
  o.env["TMPDIR"] = c.tmp.string();
  const pid_t pid = spawn_dptwin({"sweep", "sweep.yaml", "--jobs", "2", "-o", "out.json"}, c.dir, o);
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (temp_folders(c.tmp) == 0 && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(300ms);  // the workers fork their simulations
  return pid;
}

}  // namespace

TEST(Signals, SigtermToASweepStopsItsWorkersAndRemovesItsTempFolder) {
  become_subreaper();
  const Case c = make_case("sigterm");
  const pid_t pid = start_sweep(c);
  ASSERT_EQ(temp_folders(c.tmp), 1);
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(pid, SIGTERM);  // the parent only, as `kill PID` does
  const auto rc = wait_for(pid, 10s);
  if (!rc) kill_group(pid);
  ASSERT_TRUE(rc.has_value()) << "the sweep did not end within 10 s of SIGTERM";
  EXPECT_EQ(*rc, 128 + SIGTERM) << slurp(c.dir / ".stderr");
  EXPECT_TRUE(group_gone_within(pid, 5s)) << "workers left running";
  EXPECT_EQ(temp_folders(c.tmp), 0);
  EXPECT_FALSE(fs::exists(c.dir / "out.json"));
  EXPECT_NE(slurp(c.dir / ".stderr").find("interrupted by signal 15"), std::string::npos) << slurp(c.dir / ".stderr");
  std::cout << fmt::format("SIGTERM: sweep ended after {:.2f} s\n",
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

TEST(Signals, CtrlCToTheGroupEndsEveryProcessPromptly) {
  become_subreaper();
  // Several tries: the deadlock it guards against struck in 7 of 80.
  for (int i = 0; i < 5; ++i) {
    const Case c = make_case(fmt::format("sigint{}", i));
    const pid_t pid = start_sweep(c);
    std::this_thread::sleep_for(std::chrono::milliseconds(97 * i));
    ::kill(-pid, SIGINT);  // the whole group, as the terminal does
    const auto rc = wait_for(pid, 10s);
    if (!rc) kill_group(pid);
    ASSERT_TRUE(rc.has_value()) << "try " << i << ": the sweep did not end within 10 s of SIGINT";
    EXPECT_EQ(*rc, 128 + SIGINT) << slurp(c.dir / ".stderr");
    EXPECT_TRUE(group_gone_within(pid, 5s)) << "try " << i << ": processes left running";
    EXPECT_EQ(temp_folders(c.tmp), 0) << "try " << i;
  }
}

// The probe's deadlock: Ctrl-C during a multi-node `predict --every-rank`, at several
// points of the simulation. 256 nodes: about 4.5 s on an idle core, so every signal
// (0.4-1.4 s after the start) lands while it runs (64 nodes now end in 0.7 s).
TEST(Signals, CtrlCDuringAnEveryRankPredictionEndsIt) {
  become_subreaper();
  for (int i = 0; i < 5; ++i) {
    const fs::path dir = fs::path(DPT_BINARY_DIR) / "signals_test" / fmt::format("predict{}", i);
    fs::remove_all(dir);
    const pid_t pid = spawn_dptwin({"predict", "--hardware", "dgx-h100-cluster", "--nodes", "256", "--devices", "8",
                                    "--every-rank", "--model", "gpt2-124m", "--strategy", "ddp", "--batch-per-device",
                                    "8"},
                                   dir);
    std::this_thread::sleep_for(std::chrono::milliseconds(400 + 250 * i));
    ::kill(-pid, SIGINT);
    const auto rc = wait_for(pid, 10s);
    if (!rc) kill_group(pid);
    ASSERT_TRUE(rc.has_value()) << "try " << i << ": predict did not end within 10 s of SIGINT";
    EXPECT_EQ(*rc, 128 + SIGINT) << slurp(dir / ".stderr");
    EXPECT_TRUE(group_gone_within(pid, 5s)) << "try " << i << ": processes left running";
  }
}

TEST(Signals, IgnoredSigintDoesNotDisturbTheRun) {
  become_subreaper();
  const Case c = make_case("ignored", kShortSweep);
  SpawnOptions o;
  o.ignore_sigint = true;
  o.env["TMPDIR"] = c.tmp.string();
  const pid_t pid = spawn_dptwin({"sweep", "sweep.yaml", "--jobs", "2", "-o", "out.json"}, c.dir, o);
  for (int i = 0; i < 5; ++i) {  // Ctrl-C, again and again, while it runs
    std::this_thread::sleep_for(400ms);
    ::kill(-pid, SIGINT);
  }
  const auto rc = wait_for(pid, 120s);
  if (!rc) kill_group(pid);
  ASSERT_TRUE(rc.has_value()) << "the sweep hung";
  EXPECT_EQ(*rc, 0) << slurp(c.dir / ".stderr");
  EXPECT_TRUE(fs::exists(c.dir / "out.json"));
  EXPECT_TRUE(group_gone_within(pid, 5s));
  EXPECT_EQ(temp_folders(c.tmp), 0);
}

// The budgets, forced small: a prediction past them ends with exit 3 and says which.
TEST(Budget, EventAndWallClockBudgetsEndAPredictionWithExit3) {
  const fs::path dir = fs::path(DPT_BINARY_DIR) / "signals_test" / "budget";
  fs::remove_all(dir);
  const std::vector<std::string> args = {"predict", "--hardware", "dgx-h100", "--model", "resnet50", "--strategy",
                                         "ddp",     "--devices",  "8",        "--batch-per-device", "32"};
  struct BudgetCase {
    const char* var;
    const char* value;
    int exit_code;
    const char* says;
  };
  for (const BudgetCase& b : {BudgetCase{"DPTWIN_SIM_EVENTS", "100", 3, "the simulation passed its budget of 100 events"},
                              BudgetCase{"DPTWIN_SIM_WALL_S", "0.001", 3, "ran past its wall-clock budget of 0.001 s"},
                              BudgetCase{"DPTWIN_SIM_WALL_S", "soon", 2, "DPTWIN_SIM_WALL_S='soon'"}}) {
    SpawnOptions o;
    o.env[b.var] = b.value;
    const auto rc = wait_for(spawn_dptwin(args, dir, o), 60s);
    ASSERT_TRUE(rc.has_value()) << b.var << "=" << b.value;
    EXPECT_EQ(*rc, b.exit_code) << b.var << "=" << b.value;
    EXPECT_NE(slurp(dir / ".stderr").find(b.says), std::string::npos) << slurp(dir / ".stderr");
  }
  // Left alone, the same prediction succeeds.
  const auto rc = wait_for(spawn_dptwin(args, dir), 60s);
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 0) << slurp(dir / ".stderr");
}
