// Durability of outputs through the real executable: `dptwin train --checkpoint`
// killed with SIGKILL at random points, again and again, and a full disk (a child
// limited by RLIMIT_FSIZE). Invariant: the checkpoint file is always a complete
// checkpoint, byte for byte the previous one or the new one, never truncated or
// mixed; a failed write leaves the earlier file intact and says why.
// Shown to fail on a planted bug: with the writer writing in place (no temporary file,
// no rename), run 4 of 20 left a truncated 3,145,728-byte file and the test failed.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/io/atomic_file.hpp"
#include "engine/io/safetensors.hpp"
#include "verify/cli/spawn.hpp"

namespace fs = std::filesystem;
using namespace dpt;
using namespace dpt::test;

namespace {

// About 3.5 MiB of f32 weights: long enough to write that kills land inside writes.
const char* kModel = "mlp:256-1024-512-256";

std::vector<std::string> train_args(const std::string& checkpoint, int seed) {
  return {"train", "--model", kModel, "--steps", "0", "--seed", std::to_string(seed), "--checkpoint", checkpoint};
}

int stale_temps(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".dptwin-tmp.") != std::string::npos) ++n;
  return n;
}

}  // namespace

// Kills: DPTWIN_DURABILITY_KILLS (default 25: about 13 s alone, 30 s beside other tests).
TEST(Durability, CheckpointSurvivesSigkillAtRandomPoints) {
  become_subreaper();
  const fs::path dir = fs::path(DPT_BINARY_DIR) / "durability" / "kill";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // The complete checkpoints of four seeds, written by runs left alone; and how long
  // one run takes, to spread the kills over it.
  constexpr int kSeeds = 4;
  std::map<int, std::string> complete;
  double run_s = 0;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t pid = spawn_dptwin(train_args((dir / fmt::format("ref{}.safetensors", seed)).string(), seed), dir);
    ASSERT_EQ(wait_for(pid, std::chrono::seconds(60)), 0) << slurp(dir / ".stderr");
    run_s = std::max(run_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    complete[seed] = slurp(dir / fmt::format("ref{}.safetensors", seed));
    ASSERT_GT(complete[seed].size(), 3u << 20);
  }
  const fs::path ckpt = dir / "ckpt.safetensors";
  fs::copy_file(dir / "ref1.safetensors", ckpt);
  int kills = 0, after_kill = 0, intact = 0, replaced = 0, mid_write = 0;
  const char* env = std::getenv("DPTWIN_DURABILITY_KILLS");
  const int wanted = env ? std::atoi(env) : 25;
  std::mt19937 rng(12345);
  // Kills land in the last 60 % of a run (the write is at its end) and a little after.
  std::uniform_real_distribution<double> when(0.4 * run_s, 1.1 * run_s);
  int previous = 1;
  for (int i = 0; i < wanted; ++i) {
    const int seed = 1 + (previous % kSeeds);  // always a different checkpoint
    const pid_t pid = spawn_dptwin(train_args(ckpt.string(), seed), dir);
    std::this_thread::sleep_for(std::chrono::duration<double>(when(rng)));
    ::kill(pid, SIGKILL);
    const auto rc = wait_for(pid, std::chrono::seconds(30));
    ASSERT_TRUE(rc.has_value());
    ++after_kill;
    if (*rc == 128 + SIGKILL) ++kills;
    if (stale_temps(dir) > 0) ++mid_write;  // killed between temporary file and rename
    // The invariant: exactly the previous complete file or the new complete one.
    const std::string now = slurp(ckpt);
    const bool is_previous = now == complete[previous], is_new = now == complete[seed];
    EXPECT_TRUE(is_previous || is_new) << "run " << i << ": " << now.size() << " bytes, neither checkpoint";
    if (is_previous || is_new) {
      ++intact;
      // And it loads: a complete safetensors file with every tensor.
      EXPECT_NO_THROW(read_safetensors(ckpt.string()));
    }
    if (is_new) {
      ++replaced;
      previous = seed;
    }
  }
  // A last run left alone removes what killed writers left behind.
  const pid_t pid = spawn_dptwin(train_args(ckpt.string(), 1), dir);
  ASSERT_EQ(wait_for(pid, std::chrono::seconds(60)), 0) << slurp(dir / ".stderr");
  EXPECT_EQ(slurp(ckpt), complete[1]);
  EXPECT_EQ(stale_temps(dir), 0);
  std::cout << fmt::format("durability: {} runs, {} ended by SIGKILL ({} between temporary file and rename), "
                           "{} files intact, {} replaced by the new checkpoint\n",
                           after_kill, kills, mid_write, intact, replaced);
  EXPECT_EQ(intact, after_kill);
  EXPECT_GT(kills, 0);
}

// A full disk as a file-size limit: the write fails with a clear error (exit 3, the file
// and the reason named) and the earlier checkpoint is unchanged; nothing is left behind.
TEST(Durability, FullDiskLeavesTheEarlierCheckpoint) {
  const fs::path dir = fs::path(DPT_BINARY_DIR) / "durability" / "full";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path ckpt = dir / "ckpt.safetensors";
  ASSERT_EQ(wait_for(spawn_dptwin({"train", "--model", "mlp:4-8-2", "--steps", "0", "--checkpoint", ckpt.string()}, dir),
                     std::chrono::seconds(60)),
            0)
      << slurp(dir / ".stderr");
  const std::string before = slurp(ckpt);
  SpawnOptions limited;
  limited.file_size_limit_bytes = 1 << 20;  // 1 MiB: the 3.5 MiB checkpoint does not fit
  const auto rc = wait_for(spawn_dptwin(train_args(ckpt.string(), 2), dir, limited), std::chrono::seconds(60));
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 3);
  const std::string err = slurp(dir / ".stderr");
  EXPECT_NE(err.find(ckpt.string() + ": write failed: File too large (previous file left unchanged)"),
            std::string::npos)
      << err;
  EXPECT_EQ(slurp(ckpt), before);
  EXPECT_EQ(stale_temps(dir), 0);
}

// A checkpoint path that is a FIFO is refused before training (exit 2), and the FIFO
// is left as it was; a link to a file is written through.
TEST(Durability, CheckpointToAFifoIsRefusedBeforeTheRun) {
  const fs::path dir = fs::path(DPT_BINARY_DIR) / "durability" / "fifo";
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  const auto rc = wait_for(spawn_dptwin({"train", "--model", "mlp:4-8-2", "--steps", "1", "--checkpoint", "pipe"}, dir),
                           std::chrono::seconds(60));
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 2);
  EXPECT_EQ(slurp(dir / ".stderr"),
            "dptwin train: error: --checkpoint pipe: is a FIFO, device or pipe; this output is read back later and "
            "must be a regular file\n");
  EXPECT_EQ(slurp(dir / ".stdout"), "");  // nothing ran
  EXPECT_TRUE(fs::is_fifo(dir / "pipe"));
  fs::create_directories(dir / "real");
  fs::create_symlink("real/c.safetensors", dir / "link.safetensors");
  ASSERT_EQ(wait_for(spawn_dptwin({"train", "--model", "mlp:4-8-2", "--steps", "0", "--checkpoint", "link.safetensors"}, dir),
                     std::chrono::seconds(60)),
            0);
  EXPECT_TRUE(fs::is_symlink(dir / "link.safetensors"));
  EXPECT_NO_THROW(read_safetensors((dir / "real" / "c.safetensors").string()));
}

// Report outputs on links and FIFOs through the executable: a link keeps being a link
// and its target gets the JSON; a FIFO's reader gets the JSON straight through.
TEST(Durability, PredictOutputThroughALinkAndAFifo) {
  const fs::path dir = fs::path(DPT_BINARY_DIR) / "durability" / "outputs";
  fs::remove_all(dir);
  fs::create_directories(dir / "real");
  const std::vector<std::string> predict = {"predict", "--hardware", "dgx-h100", "--model", "resnet50", "--strategy",
                                            "ddp",     "--devices",  "2",        "--batch-per-device", "8", "--out"};
  fs::create_symlink("real/report.json", dir / "link.json");
  auto args = predict;
  args.push_back("link.json");
  ASSERT_EQ(wait_for(spawn_dptwin(args, dir), std::chrono::seconds(120)), 0) << slurp(dir / ".stderr");
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_NE(slurp(dir / "real" / "report.json").find("\"step_time_s\""), std::string::npos);
  ASSERT_EQ(::mkfifo((dir / "pipe.json").c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = slurp(dir / "pipe.json"); });
  args = predict;
  args.push_back("pipe.json");
  const auto rc = wait_for(spawn_dptwin(args, dir), std::chrono::seconds(120));
  if (!rc) {  // never leave the reader blocked: open the FIFO for writing once
    std::ofstream(dir / "pipe.json") << "";
  }
  reader.join();
  ASSERT_EQ(rc, 0) << slurp(dir / ".stderr");
  EXPECT_NE(got.find("\"step_time_s\""), std::string::npos) << got;
  EXPECT_TRUE(fs::is_fifo(dir / "pipe.json"));
}
