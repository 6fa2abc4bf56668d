// The one output writer on paths that are not plain files: symbolic links are written
// through to their targets (atomically, beside the target), FIFOs get the bytes
// straight through (and one without a reader is an error, not a hang), checkpoints
// refuse streams, directories are refused, and a killed writer's temporary file is
// removed by the next write of that file. Only links and FIFOs inside a temporary
// folder are used: never a real device.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/io/atomic_file.hpp"
#include "verify/support/test_files.hpp"

namespace fs = std::filesystem;
using namespace dpt;

namespace {

using dpt::test::slurp;

fs::path atomic_dir(const std::string& name) { return test::fresh_test_dir(fs::path("atomic_file_test") / name); }
int entries(const fs::path& d) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(d)) ++n;
  return n;
}

// A pid that is certainly not running: a child that has exited and been reaped.
long dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

}  // namespace

TEST(AtomicFile, LinkIsWrittenThroughToItsTarget) {
  const fs::path d = atomic_dir("link");
  fs::create_directories(d / "real");
  std::ofstream(d / "real" / "out.json") << "old";
  fs::create_symlink("real/out.json", d / "link.json");
  write_file_atomic((d / "link.json").string(), std::string_view("new"));
  // The link is still a link, its target holds the new bytes, and no temporary file
  // is left beside either.
  EXPECT_TRUE(fs::is_symlink(d / "link.json"));
  EXPECT_EQ(slurp(d / "real" / "out.json"), "new");
  EXPECT_EQ(entries(d), 2);
  EXPECT_EQ(entries(d / "real"), 1);
}

TEST(AtomicFile, LinkChainsAndDanglingLinksReachTheLastTarget) {
  const fs::path d = atomic_dir("chain");
  fs::create_symlink(d / "b", d / "a");  // a -> b -> c (c does not exist yet)
  fs::create_symlink("c", d / "b");
  write_file_atomic((d / "a").string(), std::string_view("made"));
  EXPECT_TRUE(fs::is_symlink(d / "a"));
  EXPECT_TRUE(fs::is_symlink(d / "b"));
  EXPECT_EQ(slurp(d / "c"), "made");
  // A loop is refused with the path named, not followed forever.
  fs::create_symlink("loop2", d / "loop1");
  fs::create_symlink("loop1", d / "loop2");
  try {
    write_file_atomic((d / "loop1").string(), std::string_view("x"));
    FAIL() << "wrote through a link loop";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic links in a row"), std::string::npos) << e.what();
  }
}

TEST(AtomicFile, ReplacedFileKeepsItsMode) {
  const fs::path d = atomic_dir("mode");
  std::ofstream(d / "f") << "old";
  fs::permissions(d / "f", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  write_file_atomic((d / "f").string(), std::string_view("new"));
  EXPECT_EQ(fs::status(d / "f").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
}

TEST(AtomicFile, FifoGetsTheBytesStraightThrough) {
  const fs::path d = atomic_dir("fifo");
  const fs::path fifo = d / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  // The writer must find the reader: retry while it has not opened its end yet.
  const std::string text(200'000, 'x');  // more than a pipe buffer: the write blocks until read
  for (int tries = 0;; ++tries) {
    try {
      write_file_atomic(fifo.string(), std::string_view(text));
      break;
    } catch (const std::runtime_error& e) {
      ASSERT_LT(tries, 500) << e.what();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  reader.join();
  EXPECT_EQ(got, text);
  // Still a FIFO: nothing was renamed over it.
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(entries(d), 1);
}

TEST(AtomicFile, FifoWithoutReaderIsAnErrorNotAHang) {
  const fs::path d = atomic_dir("fifo_noreader");
  const fs::path fifo = d / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    write_file_atomic(fifo.string(), std::string_view("x"));
    FAIL() << "wrote to a FIFO without a reader";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("a FIFO with no reader"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(AtomicFile, CheckpointsRefuseStreamsAndEveryoneRefusesDirectories) {
  const fs::path d = atomic_dir("refuse");
  const fs::path fifo = d / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink("pipe", d / "link-to-pipe");
  for (const fs::path& p : {fifo, d / "link-to-pipe"}) {
    try {
      check_output_path(p.string(), OutputKind::replaceable, "--checkpoint");
      FAIL() << "a checkpoint accepted " << p;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--checkpoint " + p.string(), 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find("must be a regular file"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(check_output_path(p.string(), OutputKind::stream, "--out"));
  }
  fs::create_directories(d / "dir" / "keep");
  EXPECT_THROW(check_output_path((d / "dir").string(), OutputKind::stream, "--out"), std::invalid_argument);
  EXPECT_THROW(write_file_atomic((d / "dir").string(), std::string_view("x")), std::invalid_argument);
  EXPECT_TRUE(fs::is_directory(d / "dir" / "keep"));
  // A new file and an existing regular file are fine for both kinds.
  std::ofstream(d / "old") << "x";
  for (const char* name : {"new", "old"})
    for (OutputKind k : {OutputKind::stream, OutputKind::replaceable})
      EXPECT_NO_THROW(check_output_path((d / name).string(), k, "--out"));
  // A checkpoint in a folder that does not exist is refused before the run (its write
  // never creates the folder); a stream output there is not (its write may create it).
  const std::string lost = (d / "no-such-folder" / "c.safetensors").string();
  try {
    check_output_path(lost, OutputKind::replaceable, "--checkpoint");
    FAIL() << "a checkpoint in a missing folder accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--checkpoint " + lost, 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_output_path(lost, OutputKind::stream, "--out"));
}

// A writer killed between creating its temporary file and the rename leaves
// `.NAME.dptwin-tmp.<pid>`; the next write of NAME removes it when that pid is gone,
// and leaves the temporary files of live writers alone.
TEST(AtomicFile, StaleTempFileOfADeadWriterIsRemoved) {
  const fs::path d = atomic_dir("stale");
  const std::string target = (d / "ckpt.safetensors").string();
  const std::string stale = atomic_temp_path(target, dead_pid());
  const std::string live = atomic_temp_path(target, 1);  // init: always running
  const std::string other = atomic_temp_path((d / "other.json").string(), dead_pid());
  for (const auto& p : {stale, live, other}) std::ofstream(p) << std::string(1000, 'z');
  write_file_atomic(target, std::string_view("new"));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));  // another file's temporaries are its own writer's business
  EXPECT_EQ(slurp(target), "new");
  EXPECT_EQ(fs::path(stale).filename().string().rfind(".ckpt.safetensors.dptwin-tmp.", 0), 0u);
}

// A child killed while writing: SIGKILL after the temporary file exists but before the
// rename (the child stops itself there). The old file is intact, and the next write
// cleans up.
TEST(AtomicFile, KillDuringWriteLeavesTheOldFile) {
  const fs::path d = atomic_dir("kill");
  const std::string target = (d / "f").string();
  write_file_atomic(target, std::string_view("old"));
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Write through a FIFO-free path slowly: create the temp by hand as the writer
    // names it, then wait to be killed.
    std::ofstream(atomic_temp_path(target, ::getpid())) << "half";
    ::pause();
    ::_exit(0);
  }
  while (!fs::exists(atomic_temp_path(target, pid))) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_EQ(slurp(target), "old");
  EXPECT_EQ(entries(d), 2);
  write_file_atomic(target, std::string_view("new"));
  EXPECT_EQ(slurp(target), "new");
  EXPECT_EQ(entries(d), 1);
}

// Leftover folders of killed runs (a sweep's or a chart's temporary folder, a report's
// staging folder): entries named PREFIX<pid>[SEP...] are removed, whole, when <pid> is
// gone; entries of live processes, other prefixes and names that only look alike stay.
TEST(AtomicFile, LeftoversOfDeadWritersAreRemovedAndLiveOnesKept) {
  const fs::path d = atomic_dir("leftovers");
  const long dead = dead_pid();
  const std::vector<std::string> removed = {fmt::format("dptwin-sweep-{}-Ab12cd", dead),
                                            fmt::format("dptwin-sweep-{}-x", dead)};
  const std::vector<std::string> kept = {"dptwin-sweep-1-Ab12cd",                      // init: alive
                                         fmt::format("dptwin-sweep-{}-me", ::getpid()),  // this process
                                         fmt::format("dptwin-chart-{}-Ab12cd", dead),    // another prefix
                                         "dptwin-sweep-Ab12cd",                          // no pid
                                         fmt::format("dptwin-sweep-{}", dead)};         // no separator after it
  for (const auto& n : removed) {
    fs::create_directories(d / n / "sub");
    std::ofstream(d / n / "sub" / "0.json") << "{}";
  }
  for (const auto& n : kept) fs::create_directories(d / n);
  remove_dead_writers_leftovers(d.string(), "dptwin-sweep-", '-');
  for (const auto& n : removed) EXPECT_FALSE(fs::exists(d / n)) << n;
  for (const auto& n : kept) EXPECT_TRUE(fs::exists(d / n)) << n;
  // Without a separator the pid ends the name: "rep.partial-<pid>".
  fs::create_directories(d / fmt::format("rep.partial-{}", dead));
  fs::create_directories(d / fmt::format("rep.partial-{}x", dead));
  remove_dead_writers_leftovers(d.string(), "rep.partial-", '\0');
  EXPECT_FALSE(fs::exists(d / fmt::format("rep.partial-{}", dead)));
  EXPECT_TRUE(fs::exists(d / fmt::format("rep.partial-{}x", dead)));
}

// make_run_temp_dir creates PREFIX-<own pid>-XXXXXX in TMPDIR, a new one per call,
// after removing the folders that dead runs left there.
TEST(AtomicFile, RunTempDirCarriesThePidAndClearsDeadRunsFolders) {
  const fs::path d = atomic_dir("run_temp");
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("TMPDIR", d.c_str(), 1);
  const fs::path stale = d / fmt::format("dptwin-chart-{}-Zz9999", dead_pid());
  fs::create_directories(stale);
  const fs::path a = make_run_temp_dir("dptwin-chart"), b = make_run_temp_dir("dptwin-chart");
  if (old) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::is_directory(a));
  EXPECT_NE(a, b);
  EXPECT_EQ(a.parent_path(), d);
  EXPECT_EQ(a.filename().string().rfind(fmt::format("dptwin-chart-{}-", ::getpid()), 0), 0u) << a;
}
