// `dptwin split` end to end: the lesson's examples, printed exactly.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "verify/support/shell_run.hpp"

namespace {

using SplitRun = dpt::test::ShellResult;

SplitRun dptwin_split(const std::string& args) { return dpt::test::run_dptwin_shell("split " + args); }

TEST(CliSplit, DataParallelUsesThreeOfFourDevicesForFiveSamples) {
  const SplitRun r = dptwin_split("--batch 5 --devices 4");
  EXPECT_EQ(r.exit_code, 0);
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
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["padding"], 2);
  EXPECT_EQ(doc["assignment"][2]["indices"], nlohmann::json({2, 6, 0}));
  EXPECT_EQ(doc["assignment"][3]["indices"], nlohmann::json({3, 7, 1}));
}

TEST(CliSplit, BadFlagsAreUsageErrors) {
  EXPECT_EQ(dptwin_split("--batch 5 --devices 0").exit_code, 2);
  EXPECT_EQ(dptwin_split("--batch 5 --devices 2 --shuffle").exit_code, 2);  // dp has no shuffle
  EXPECT_EQ(dptwin_split("--batch 5").exit_code, 2);                          // --devices is required
}

}  // namespace
