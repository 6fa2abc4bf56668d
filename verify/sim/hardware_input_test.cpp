// Hostile and careless hardware files: each input the probe found (a crash, a hang, a
// silent wrap) as a regression case with its exact text, then a mutation sweep over
// every numeric field of every library file. Every bad input is a std::invalid_argument
// naming file, line and key: never a crash, a hang or a silently accepted value.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "sim/net/hardware.hpp"
#include "sim/net/yaml_util.hpp"
#include "verify/support/test_files.hpp"

namespace fs = std::filesystem;
using namespace dpt;
using namespace dpt::sim;

namespace {

using dpt::test::slurp;

using dpt::test::kHardwareLibrary;
// The library's dgx-h100.yaml with the first line matching `pattern` replaced.
std::string h100_with(const std::string& pattern, const std::string& replacement) {
  const std::string text = slurp(kHardwareLibrary / "dgx-h100.yaml");
  const std::regex re(pattern);
  EXPECT_TRUE(std::regex_search(text, re)) << pattern;
  return std::regex_replace(text, re, replacement, std::regex_constants::format_first_only);
}

// The 1-based line of the first occurrence of `needle` in `text`.
int line_of(const std::string& text, const std::string& needle) {
  const auto pos = text.find(needle);
  EXPECT_NE(pos, std::string::npos) << needle;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

std::string yaml_error_of(const std::string& text) {
  try {
    parse_hardware_yaml(text, "h.yaml");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

// The fuzzer's crash (SIGSEGV): a bare INT64_MAX where a duration is required.
// A hardware path that is a folder says so (it read "document: expected a mapping").
TEST(HardwareInput, AFolderGivenAsTheHardwareFileSaysSo) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("dpt_hw_dir_{}", ::getpid());
  fs::create_directories(dir / "box");
  try {
    load_hardware((dir / "box").string(), kHardwareLibrary);
    ADD_FAILURE() << "a folder was read as a hardware file";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), fmt::format("hardware file '{}' is a directory, not a YAML file",
                                                 (dir / "box").string()));
  }
  fs::remove_all(dir);
}

// PCIe switches that place some GPUs must place every one: a DGX H100 file with
// gpus_per_node raised to 16 and its switches left at GPUs 0-7 ran 16 GPUs, 8 of them on
// links the file never describes, without a word.
TEST(HardwareInput, SwitchesThatPlaceSomeGpusPlaceThemAll) {
  EXPECT_NE(yaml_error_of(h100_with("gpus_per_node: 8", "gpus_per_node: 16"))
                .find("pcie.switches: GPU 8 of gpus_per_node 16 is on no switch (the switches place 8 GPUs)"),
            std::string::npos)
      << yaml_error_of(h100_with("gpus_per_node: 8", "gpus_per_node: 16"));
}

TEST(HardwareInput, BareIntegerDispatchCostNeedsAUnit) {
  const std::string text = h100_with(R"(dispatch_cost: 10 us)", "dispatch_cost: 9223372036854775807");
  EXPECT_EQ(yaml_error_of(text), fmt::format("h.yaml:{}: host.dispatch_cost: '9223372036854775807' has no unit; a time "
                                        "needs one (allowed: s, ms, us, ns)",
                                        line_of(text, "dispatch_cost:")));
}

// The fuzzer's crash: a binary-tagged scalar.
TEST(HardwareInput, BinaryTagIsRefused) {
  const std::string text = h100_with(R"(cpu: "2x Intel Xeon Platinum 8480C")", "cpu: !!binary AAAA");
  EXPECT_EQ(yaml_error_of(text), fmt::format("h.yaml:{}: host.cpu: YAML tag '!!binary' is not supported (plain values only)",
                                        line_of(text, "cpu: !!binary")));
}

// The fuzzer's crash: a key given twice, accepted silently before.
TEST(HardwareInput, DuplicateKeyNamesBothLines) {
  const std::string text = h100_with(R"(peer_to_peer: true)", "peer_to_peer: true\n  peer_to_peer: false");
  const int first = line_of(text, "peer_to_peer: true");
  EXPECT_EQ(yaml_error_of(text),
            fmt::format("h.yaml:{}: pcie.peer_to_peer: duplicate key (first given at line {})", first + 1, first));
  // At the top level and in a flow mapping too.
  EXPECT_NE(yaml_error_of(h100_with(R"(nodes: 1)", "nodes: 1\nnodes: 1")).find("nodes: duplicate key"), std::string::npos);
  EXPECT_NE(yaml_error_of(h100_with(R"(\{socket: 0, gpus: \[0, 1\])", "{socket: 0, socket: 0, gpus: [0, 1]"))
                .find("pcie.switches[0].socket: duplicate key"),
            std::string::npos);
}

// Integers were narrowed to int before the range check: 2^32 became 0 and 2^32 + 1 became 1.
TEST(HardwareInput, IntegersAreCheckedBeforeNarrowing) {
  std::string text = h100_with(R"(links_per_gpu: 18)", "links_per_gpu: 4294967296");
  EXPECT_EQ(yaml_error_of(text), fmt::format("h.yaml:{}: nvswitch.links_per_gpu: 4294967296 is outside 1 .. 64",
                                        line_of(text, "links_per_gpu:")));
  text = h100_with(R"(nodes: 1)", "nodes: 4294967297");
  EXPECT_EQ(yaml_error_of(text), fmt::format("h.yaml:{}: nodes: 4294967297 is outside 1 .. 4096", line_of(text, "nodes:")));
  text = h100_with(R"(- \{socket: 0, gpus: \[0, 1\])", "- {socket: 4294967296, gpus: [0, 1]");
  EXPECT_NE(yaml_error_of(text).find("pcie.switches[0].socket: 4294967296 is outside 0 .. 15"), std::string::npos)
      << yaml_error_of(text);
}

// The hang (1e300 s), the format_figure segfault (1e20 s) and the 0 s step (1e30 s):
// absurd latencies are refused at load, in the units they were written in.
TEST(HardwareInput, AbsurdLatenciesAreOutsideTheirBounds) {
  for (const char* v : {"1e300 s", "1e20 s", "1e30 s", "2 s", "0.5 ns", "0 s", "-1 us"}) {
    const std::string text = h100_with(R"(latency: 1 us)", fmt::format("latency: {}", v));
    EXPECT_EQ(yaml_error_of(text), fmt::format("h.yaml:{}: pcie.latency: {} is outside 1 ns .. 1 s", line_of(text, "latency: " + std::string(v)), v));
  }
  // Too large to be a double at all.
  EXPECT_NE(yaml_error_of(h100_with(R"(latency: 1 us)", "latency: 1e400 s")).find("pcie.latency: expected a number"),
            std::string::npos);
}

TEST(HardwareInput, AbsurdRatesAreOutsideTheirBounds) {
  EXPECT_NE(yaml_error_of(h100_with(R"(link_bandwidth: 25 GB/s)", "link_bandwidth: 1e-300 B/s"))
                .find("nvswitch.link_bandwidth: 1e-300 B/s is outside 1 MB/s .. 10 TB/s"),
            std::string::npos);
  EXPECT_NE(yaml_error_of(h100_with(R"(nic_bandwidth: 400 Gb/s)", "nic_bandwidth: 1e-300 Gb/s"))
                .find("network.nic_bandwidth: 1e-300 Gb/s is outside 125 KB/s .. 12.5 TB/s"),
            std::string::npos);
  EXPECT_NE(yaml_error_of(h100_with(R"(bf16: 989.4 TFLOPS)", "bf16: 1e30 TFLOPS"))
                .find("gpu.peak_flops.bf16: 1e30 TFLOPS is outside 1 GFLOPS .. 100 PFLOPS"),
            std::string::npos);
  EXPECT_NE(yaml_error_of(h100_with(R"(memory: 81559 MiB)", "memory: 1 B")).find("gpu.memory: 1 B is outside 1 MiB .. 64 TiB"),
            std::string::npos);
  EXPECT_NE(yaml_error_of(h100_with(R"(dispatch_cost: 10 us)", "dispatch_cost: 1 s"))
                .find("host.dispatch_cost: 1 s is outside 1 ns .. 100 ms"),
            std::string::npos);
}

// Keys that are not scalars, nesting and alias bombs are refused before any getter runs.
TEST(HardwareInput, HostileYamlStructureIsRefused) {
  EXPECT_NE(yaml_error_of("? [a, b]\n: 1\n").find("a key must be a plain string"), std::string::npos);
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "[";
  for (int i = 0; i < 100; ++i) deep += "]";
  EXPECT_NE(yaml_error_of("x: " + deep + "\n").find("nested deeper than 64 levels"), std::string::npos) << yaml_error_of(deep);
  // Nine levels of ten aliases each: 10^9 nodes when expanded.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i)
    bomb += fmt::format("a{0}: &a{0} [*a{1}, *a{1}, *a{1}, *a{1}, *a{1}, *a{1}, *a{1}, *a{1}, *a{1}, *a{1}]\n", i, i - 1);
  EXPECT_NE(yaml_error_of(bomb).find("more than 1000000 YAML nodes"), std::string::npos) << yaml_error_of(bomb);
}

// Property: replacing any unit-carrying value of any library file with an absurd one
// (far out of range, a bare number, a negative) is refused with an error that names the
// field's line. The numbers of inputs and refusals are printed for the README's table.
// Shown to fail on a planted bug: with MapReader's range check (check_in) disabled, 320
// of the 448 mutations parsed and this test failed on each of them.
TEST(HardwareInput, EveryQuantityOfEveryLibraryFileRefusesAbsurdValues) {
  const std::regex quantity(R"(^(\s*-?\s*\{?)?(\s*)([a-z0-9_]+): ([-0-9.e+]+) ([A-Za-z/]+)(.*)$)");
  int tried = 0, refused = 0;
  for (const auto& name : list_hardware(kHardwareLibrary)) {
    const std::string text = slurp(kHardwareLibrary / (name + ".yaml"));
    std::vector<std::string> lines;
    std::stringstream ss(text);
    for (std::string l; std::getline(ss, l);) lines.push_back(l);
    for (size_t i = 0; i < lines.size(); ++i) {
      std::smatch m;
      if (!std::regex_match(lines[i], m, quantity)) continue;
      const std::string num = m[4].str(), unit = m[5].str();
      for (const std::string& v : {fmt::format("{}e300 {}", num, unit), fmt::format("1e-300 {}", unit), num,
                                   fmt::format("-{} {}", num, unit)}) {
        std::vector<std::string> changed = lines;
        changed[i] = fmt::format("{}{}{}: {}{}", m[1].str(), m[2].str(), m[3].str(), v, m[6].str());
        std::string mutated;
        for (const auto& l : changed) mutated += l + "\n";
        ++tried;
        const std::string err = yaml_error_of(mutated);
        const std::string where = fmt::format("h.yaml:{}: ", i + 1);
        if (err.rfind(where, 0) == 0 && err.find(m[3].str() + ": ") != std::string::npos) ++refused;
        else ADD_FAILURE() << name << " line " << i + 1 << " '" << changed[i] << "': " << err;
      }
    }
  }
  std::cout << fmt::format("hardware quantity mutations: {} tried, {} refused with file, line and key\n", tried,
                           refused);
  EXPECT_GT(tried, 200);
  EXPECT_EQ(refused, tried);
}
