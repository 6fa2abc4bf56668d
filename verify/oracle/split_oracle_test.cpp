// Oracle: the batch split, torch.randperm and DistributedSampler compared with
// tables produced by PyTorch 1.13 itself (Debian's python3-torch under /usr/bin/python3).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/parallel/split.hpp"
#include "verify/support/shell_run.hpp"

namespace dpt {
namespace {

using Sizes = std::vector<std::int64_t>;

// ---- oracle: tables from PyTorch itself --------------------------------------------
// Runs a Python snippet under Debian's torch and parses its JSON output; null when
// torch is unavailable (the test then skips, saying why).
std::unique_ptr<nlohmann::json> run_torch(const std::string& code) {
  const std::string cmd = "/usr/bin/python3 -c '" + code + "' 2>/dev/null";
  const dpt::test::ShellResult r = dpt::test::run_shell(cmd);
  if (r.exit_code != 0 || r.out.empty()) return nullptr;
  return std::make_unique<nlohmann::json>(nlohmann::json::parse(r.out));
}

TEST(SplitOracle, ChunkSizesEqualTorchChunkTable) {
  auto table = run_torch(
      "import torch, json\n"
      "cases = [(b, n) for b in range(0, 130) for n in range(1, 17)] + [(4096, 64), (4095, 64), (1000, 7), (63, 64)]\n"
      "print(json.dumps([[b, n, [c.shape[0] for c in torch.arange(b).chunk(n)]] for b, n in cases]))\n");
  if (!table) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  for (const auto& row : *table) {
    const auto b = row[0].get<std::int64_t>();
    const auto n = row[1].get<int>();
    EXPECT_EQ(chunk_sizes(b, n), row[2].get<Sizes>()) << "B=" << b << " N=" << n;
  }
}

TEST(SplitOracle, RandpermAndDistributedSamplerEqualTorch) {
  auto table = run_torch(
      "import torch, json\n"
      "from torch.utils.data import DistributedSampler\n"
      "perms = []\n"
      "for n, s in [(0, 0), (1, 3), (12, 0), (12, 42), (100, 7), (1000, 2**32 + 5)]:\n"
      "  g = torch.Generator(); g.manual_seed(s); perms.append([n, s, torch.randperm(n, generator=g).tolist()])\n"
      "samplers = []\n"
      "for ln in [0, 1, 5, 10, 17, 64]:\n"
      "  for reps in [1, 2, 3, 4, 7]:\n"
      "    for shuffle in [False, True]:\n"
      "      for dl in [False, True]:\n"
      "        for seed, epoch in [(0, 0), (5, 3)]:\n"
      "          ds = list(range(ln))\n"
      "          per = []\n"
      "          for r in range(reps):\n"
      "            smp = DistributedSampler(ds, num_replicas=reps, rank=r, shuffle=shuffle, seed=seed, drop_last=dl)\n"
      "            smp.set_epoch(epoch); per.append(list(smp))\n"
      "          samplers.append([ln, reps, shuffle, dl, seed, epoch, per])\n"
      "print(json.dumps({\"perms\": perms, \"samplers\": samplers}))\n");
  if (!table) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  for (const auto& p : (*table)["perms"])
    EXPECT_EQ(torch_randperm(p[0].get<std::int64_t>(), p[1].get<std::uint64_t>()), p[2].get<Sizes>())
        << "n=" << p[0] << " seed=" << p[1];
  int compared = 0;
  for (const auto& s : (*table)["samplers"]) {
    DistributedSamplerOptions o;
    o.num_replicas = s[1].get<int>();
    o.shuffle = s[2].get<bool>();
    o.drop_last = s[3].get<bool>();
    o.seed = s[4].get<std::uint64_t>();
    o.epoch = s[5].get<std::int64_t>();
    for (int r = 0; r < o.num_replicas; ++r, ++compared)
      EXPECT_EQ(distributed_sampler_indices(s[0].get<std::int64_t>(), r, o), s[6][size_t(r)].get<Sizes>())
          << "len=" << s[0] << " replicas=" << o.num_replicas << " rank=" << r << " shuffle=" << o.shuffle
          << " drop_last=" << o.drop_last << " seed=" << o.seed << " epoch=" << o.epoch;
  }
  EXPECT_GT(compared, 500);
}

}  // namespace
}  // namespace dpt
