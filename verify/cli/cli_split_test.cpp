// `dptwin split` end to end: the lesson's examples, printed exactly.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace {

struct SplitRun {
  int rc;
  std::string out;
};

SplitRun dptwin_split(const std::string& args) {
  const std::string cmd = std::string(DPT_BINARY_DIR) + "/scenarios/dptwin split " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(CliSplit, DataParallelUsesThreeOfFourDevicesForFiveSamples) {
  const SplitRun r = dptwin_split("--batch 5 --devices 4");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out,
            "dp: batch 5 on 4 devices, torch.chunk along dim 0: chunk size 2, 3 chunk(s) [2, 2, 1]; device 3 gets "
            "nothing and no replica\n"
            "device 0: 2 samples [0, 1]\n"
            "device 1: 2 samples [2, 3]\n"
            "device 2: 1 sample [4]\n"
            "device 3: 0 samples\n");
}

TEST(CliSplit, DistributedSamplerIsStridedAndPadded) {
  // PyTorch: DistributedSampler(range(10), num_replicas=4, shuffle=False).
  const SplitRun r = dptwin_split("--batch 10 --devices 4 --strategy ddp --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["padding"], 2);
  EXPECT_EQ(doc["assignment"][2]["indices"], nlohmann::json({2, 6, 0}));
  EXPECT_EQ(doc["assignment"][3]["indices"], nlohmann::json({3, 7, 1}));
}

TEST(CliSplit, BadFlagsAreUsageErrors) {
  EXPECT_EQ(dptwin_split("--batch 5 --devices 0").rc, 2);
  EXPECT_EQ(dptwin_split("--batch 5 --devices 2 --shuffle").rc, 2);  // dp has no shuffle
  EXPECT_EQ(dptwin_split("--batch 5").rc, 2);                          // --devices is required
}

}  // namespace
