// `dptwin train` as a user runs it: the executable, its exit codes and output.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

struct CliRun {
  int rc = -1;
  std::string out;  // stdout and stderr together
};

CliRun dptwin(const std::string& args) {
  const std::string cmd = std::string(DPT_BINARY_DIR) + "/scenarios/dptwin train " + args + " 2>&1";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<double> losses(const std::string& out) {
  std::vector<double> v;
  const std::regex line(R"(step (\d+) loss ([-+0-9.eE]+|nan|inf))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it)
    v.push_back(std::stod((*it)[2]));
  return v;
}

TEST(CliTrain, PrintsOneLossPerStepAndLearns) {
  const CliRun r = dptwin("--model mlp:8-32-4 --loss ce --optimizer adamw --lr 0.01 --batch 32 --steps 60 --seed 1");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto l = losses(r.out);
  ASSERT_EQ(l.size(), 60u) << r.out;
  EXPECT_LT(l.back(), 0.5 * l.front()) << r.out;
}

TEST(CliTrain, JsonHasEveryStepAndBothBatchFigures) {
  const CliRun r = dptwin("--model mlp:4-8-2 --steps 3 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("\"batch\": 32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"batch_per_device\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"step\": 3"), std::string::npos) << r.out;
}

TEST(CliTrain, CheckpointIsWrittenAndInitReproducesTheRun) {
  const auto dir = std::filesystem::temp_directory_path() / ("dptwin_cli_train_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string init = (dir / "init.safetensors").string(), other = (dir / "other.safetensors").string();
  ASSERT_EQ(dptwin("--model mlp:4-8-2 --dtype f64 --steps 0 --seed 5 --checkpoint " + init).rc, 0);
  ASSERT_EQ(dptwin("--model mlp:4-8-2 --dtype f64 --steps 0 --seed 7 --checkpoint " + other).rc, 0);
  const CliRun a = dptwin("--model mlp:4-8-2 --dtype f64 --steps 4 --seed 5");
  // The weights come from the file (and the dtype with them); --seed still picks the synthetic data.
  const CliRun b = dptwin("--model mlp:4-8-2 --steps 4 --seed 5 --init " + init);
  const CliRun c = dptwin("--model mlp:4-8-2 --steps 4 --seed 5 --init " + other);
  ASSERT_EQ(a.rc, 0) << a.out;
  ASSERT_EQ(b.rc, 0) << b.out;
  ASSERT_EQ(c.rc, 0) << c.out;
  EXPECT_EQ(losses(a.out), losses(b.out));
  EXPECT_NE(losses(a.out), losses(c.out));
  const CliRun bad = dptwin("--model mlp:4-8-2 --steps 1 --dtype f32 --init " + init);
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("--dtype"), std::string::npos) << bad.out;
  std::filesystem::remove_all(dir);
}

TEST(CliTrain, BadFlagsExitTwoNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"--model mlp:4-2 --no-such-flag", "--no-such-flag"},
      {"--steps 2", "--model"},
      {"--model mlp:4-x", "--model"},
      {"--model mlp:4-2 --lr -1", "--lr"},
      {"--model mlp:4-2 --batch 0", "--batch"},
      {"--model mlp:4-2 --steps -3", "--steps"},
      {"--model mlp:4-2 --devices 2", "--devices"},
      {"--model mlp:4-2 --activation tanh", "--activation"},
      {"--model mlp:4-2 --dtype f16", "--dtype"},
      {"--model mlp:4-2 --optimizer adamw --momentum 0.9", "--momentum"},
      {"--model mlp:4-2 --uneven weighted", "--uneven"},
      {"--model mlp:4-2 --strategy ddp --devices 2 --batch 10 --batch-per-device 4", "--batch-per-device"},
      {"--model mlp:4-2 --data /nonexistent/data.safetensors", "--data"},
  };
  for (auto& [args, flag] : cases) {
    const CliRun r = dptwin(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(flag), std::string::npos) << args << "\n" << r.out;
  }
}

std::vector<double> json_losses(const std::string& out) {
  std::vector<double> v;
  const auto doc = nlohmann::json::parse(out);
  for (auto& s : doc["steps"]) v.push_back(s["loss"].get<double>());
  return v;
}

TEST(CliTrain, SameDataGivesTheSameStepsUnderSingleDpAndDdp) {
  // --batch is the global batch for every strategy, and the data is consumed in the
  // same order, so with an even split the three runs compute the same losses (f64:
  // they differ only by the order of floating-point sums).
  const std::string common = "--model mlp:8-16-4 --dtype f64 --steps 4 --seed 2 --batch 64 --json";
  const CliRun single = dptwin(common);
  const CliRun dp = dptwin(common + " --strategy dp --devices 2");
  const CliRun ddp = dptwin(common + " --strategy ddp --devices 2");
  ASSERT_EQ(single.rc, 0) << single.out;
  ASSERT_EQ(dp.rc, 0) << dp.out;
  ASSERT_EQ(ddp.rc, 0) << ddp.out;
  const auto a = json_losses(single.out), b = json_losses(dp.out), c = json_losses(ddp.out);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  ASSERT_EQ(c.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i], a[i], 1e-12 * std::abs(a[i])) << "dp step " << i + 1;
    EXPECT_NEAR(c[i], a[i], 1e-12 * std::abs(a[i])) << "ddp step " << i + 1;
  }
  EXPECT_EQ(nlohmann::json::parse(dp.out)["batch_per_device"], nlohmann::json({32, 32}));
}

TEST(CliTrain, HelpShowsAnExample) {
  const CliRun r = dptwin("--help");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("Example:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--batch-per-device"), std::string::npos) << r.out;
}

}  // namespace
