// What-if flags go straight into the typed scenario, through the same checks as
// the file's keys. Invariant: for every field and every bad value, the flag's error
// and the file key's error say the same thing after their location ("--devices: "
// against "bad.yaml:7: devices: "); and a good flag value lands in the scenario as
// the same typed value the file's key gives.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include "scenarios/cli/whatif_flags.hpp"

namespace dpt::test {
namespace {

using cli::whatif::PointFlags;

const std::string kGood =
    "schema_version: 1\n"
    "hardware: dgx-a100\n"
    "model: resnet50\n"
    "strategy: ddp\n"
    "batch_per_device: 32\n";

// The error of the good scenario with `key: value` (replacing the key's line, or
// added), without "bad.yaml:LINE: KEY: ".
std::string file_error(const std::string& key, const std::string& value) {
  std::string text;
  bool replaced = false;
  std::stringstream lines(kGood);
  for (std::string line; std::getline(lines, line);) {
    const bool same = line.rfind(key + ":", 0) == 0;
    text += (same ? key + ": " + value : line) + "\n";
    replaced = replaced || same;
  }
  if (!replaced) text += key + ": " + value + "\n";
  try {
    scenario::parse_scenario(text, "bad.yaml");
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    const std::smatch m = [&] {
      std::smatch r;
      std::regex_search(msg, r, std::regex("^bad\\.yaml:[0-9]+: " + key + ": "));
      return r;
    }();
    EXPECT_FALSE(m.empty()) << msg;
    return m.empty() ? msg : m.suffix().str();
  }
  return "<no error>";
}

// The error of the flags applied to the good scenario, without "FLAG: ".
std::string flag_error(const PointFlags& f, const std::string& flag) {
  scenario::Scenario s = scenario::parse_scenario(kGood, "good.yaml");
  try {
    cli::whatif::apply_point_flags(s, f);
  } catch (const std::invalid_argument& e) {
    const std::string prefix = flag + ": ";
    const std::string msg = e.what();
    EXPECT_EQ(msg.substr(0, prefix.size()), prefix) << msg;
    return msg.substr(prefix.size());
  }
  return "<no error>";
}

TEST(WhatifFlags, BadValuesGetTheFileKeysMessages) {
  struct Case {
    std::string key, flag, yaml;
    PointFlags flags;
  };
  auto with = [](auto setter) {
    PointFlags f;
    setter(f);
    return f;
  };
  const std::vector<Case> cases = {
      {"devices", "--devices", "0", with([](PointFlags& f) { f.devices = 0; })},
      {"devices", "--devices", "2000000", with([](PointFlags& f) { f.devices = 2000000; })},
      {"nodes", "--nodes", "-3", with([](PointFlags& f) { f.nodes = -3; })},
      {"batch_per_device", "--batch-per-device", "0", with([](PointFlags& f) { f.batch_per_device = 0; })},
      {"bucket_cap_mb", "--bucket-cap-mb", "1e-30", with([](PointFlags& f) { f.bucket_cap_mb = 1e-30; })},
      {"bucket_cap_mb", "--bucket-cap-mb", "-1", with([](PointFlags& f) { f.bucket_cap_mb = -1; })},
      {"bucket_cap_mb", "--bucket-cap-mb", "2e6", with([](PointFlags& f) { f.bucket_cap_mb = 2e6; })},
      {"strategy", "--strategy", "fsdp", with([](PointFlags& f) { f.strategy = "fsdp"; })},
      {"dtype", "--dtype", "f16", with([](PointFlags& f) { f.dtype = "f16"; })},
      {"optimizer", "--optimizer", "lamb", with([](PointFlags& f) { f.optimizer = "lamb"; })},
      {"hardware", "--hardware", "''", with([](PointFlags& f) { f.hardware = ""; })},
      {"comm_hook", "--comm-hook", "fp8", with([](PointFlags& f) { f.comm_hook = "fp8"; })},
      {"comm_hook", "--comm-hook", "powersgd:0", with([](PointFlags& f) { f.comm_hook = "powersgd:0"; })},
      {"checkpoint", "--checkpoint", "sometimes", with([](PointFlags& f) { f.checkpoint = "sometimes"; })},
      {"global_batch", "--global-batch", "0", with([](PointFlags& f) { f.global_batch = 0; })},
  };
  for (const auto& c : cases) {
    const std::string from_file = file_error(c.key, c.yaml);
    EXPECT_NE(from_file, "<no error>") << c.key << " " << c.yaml;
    EXPECT_EQ(flag_error(c.flags, c.flag), from_file) << c.flag << " " << c.yaml;
  }
}

TEST(WhatifFlags, GoodValuesLandTyped) {
  PointFlags f;
  f.devices = 4;
  f.bucket_cap_mb = 0.1 + 0.2;
  f.optimizer = "adamw";
  scenario::Scenario s = scenario::parse_scenario(kGood, "good.yaml");
  cli::whatif::apply_point_flags(s, f);
  EXPECT_EQ(s.base.devices, 4);
  EXPECT_EQ(s.base.bucket_cap_mb, 0.1 + 0.2);
  EXPECT_EQ(s.base.optimizer, scenario::OptimizerKind::adamw);
  EXPECT_EQ(s.base.where.at("devices"), "--devices: ");
}

// A list-valued override given as a flag is read as YAML, as the same key in a scenario
// file is: `--override 'nvlink.pairs=[]'` takes a DGX-1's NVLink away (the what-if of
// NCCL_P2P_DISABLE=1 with pcie.peer_to_peer=false), `[[0, 1, 2]]` leaves one pair of 2 links.
// Invariant: the flag and the file key resolve to the same hardware. Before, the flag's text
// stayed a scalar and resolution refused it ("expected a list of [gpu_a, gpu_b, links]").
TEST(WhatifFlags, ListOverridesAreReadAsTheFileReadsThem) {
  const std::filesystem::path scenarios = std::filesystem::path(DPT_SOURCE_DIR) / "scenarios";
  const auto lib = scenario::Library::at(scenarios);
  const std::string base =
      "schema_version: 1\nhardware: dgx1-v100\nmodel: resnet50\nstrategy: ddp\nbatch_per_device: 32\n";
  scenario::Scenario plain = scenario::parse_scenario(base, "plain.yaml", scenarios);
  ASSERT_TRUE(scenario::resolve_point(plain, plain.base, lib).hardware.nvlink.has_value());
  const std::size_t library_pairs = scenario::resolve_point(plain, plain.base, lib).hardware.nvlink->pairs.size();
  ASSERT_GT(library_pairs, 1u);  // the override must change something
  for (const std::string value : {"[]", "[[0, 1, 2]]"}) {
    scenario::Scenario file =
        scenario::parse_scenario(base + "overrides:\n  nvlink.pairs: " + value + "\n", "file.yaml", scenarios);
    scenario::Scenario flags = scenario::parse_scenario(base, "flags.yaml", scenarios);
    PointFlags f;
    f.overrides = {"nvlink.pairs=" + value};
    cli::whatif::apply_point_flags(flags, f);
    const auto from_file = scenario::resolve_point(file, file.base, lib).hardware.nvlink->pairs;
    const auto from_flag = scenario::resolve_point(flags, flags.base, lib).hardware.nvlink->pairs;
    EXPECT_EQ(from_file.size(), value == "[]" ? 0u : 1u) << value;
    ASSERT_EQ(from_flag.size(), from_file.size()) << value;
    for (std::size_t i = 0; i < from_flag.size(); ++i) {
      EXPECT_EQ(from_flag[i].a, from_file[i].a);
      EXPECT_EQ(from_flag[i].b, from_file[i].b);
      EXPECT_EQ(from_flag[i].links, from_file[i].links);
    }
  }
  // A flow value that is not YAML: the flag is named, and the parser's reason given.
  PointFlags bad;
  bad.overrides = {"nvlink.pairs=[[0, 1"};
  EXPECT_EQ(flag_error(bad, "--override nvlink.pairs:1").substr(0, 19), "YAML syntax error: ");
}

TEST(WhatifFlags, ContradictoryFlagsAreRefused) {
  scenario::Scenario s = scenario::parse_scenario(kGood, "good.yaml");
  PointFlags f;
  f.gpus = 64;
  f.nodes = 2;
  EXPECT_THROW(cli::whatif::apply_point_flags(s, f), std::invalid_argument);
  PointFlags b;
  b.batch = 64;
  b.batch_per_device = 8;
  try {
    cli::whatif::apply_point_flags(s, b);
    FAIL() << "--batch with --batch-per-device was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--batch 64 --batch-per-device 8: give --batch (global) or --batch-per-device, not both");
  }
}

// Invariant: the default --jobs (sweep, report, plan, fidelity) is the number of CPUs this
// process may run on, not the machine's: pinned to one CPU (taskset -c 0, a Slurm job with
// one CPU) it starts one worker. This thread is pinned, then given its CPUs back.
TEST(WhatifFlags, DefaultJobsFollowTheCpusThisProcessMayUse) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(cli::whatif::default_jobs(), CPU_COUNT(&all));
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);
  const int pinned = cli::whatif::default_jobs();
  ASSERT_EQ(::sched_setaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(pinned, 1);
}

}  // namespace
}  // namespace dpt::test
