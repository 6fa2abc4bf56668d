// Hardware, scenario and model files as a hostile or careless user writes them.
// 1. A seeded mutation sweep over every library file: each mutated text is either
//    accepted or refused with std::invalid_argument; any other exception is an
//    internal error and a crash kills the test. Counts are printed for the README.
// 2. The probe's findings through the executable, each with its exact input: exit 2
//    with file, line and key named, quickly (no hang), never a signal.
// 3. format_figure on figures far outside the usual range.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "scenarios/report/report_format.hpp"
#include "scenarios/scenario/model_library_yaml.hpp"
#include "scenarios/scenario/scenario.hpp"
#include "sim/net/hardware.hpp"
#include "verify/support/cli_run.hpp"
#include "verify/support/test_files.hpp"

namespace fs = std::filesystem;
using namespace dpt;

namespace {

using dpt::test::slurp;

using dpt::test::kScenarios;
// Values that broke parsers before: integer limits, wrap-around, absurd magnitudes,
// non-numbers, YAML tags and aliases.
const std::vector<std::string> kNasty = {
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "4294967296", "4294967297",
    "1e300", "1e-300", "1e300 s", "1e20 s", "1e30 s", "1e-300 B/s", "-1", "0", "nan", ".nan", ".inf", "-.inf",
    "!!binary AAAA", "!!set {a}", "&a x", "*a", "[]", "{}", "~", "\"\"", "0x10", "1_000", "1e400 GB/s"};

std::string mutate(const std::string& text, std::mt19937& rng) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  if (lines.empty()) return text;
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const size_t i = pick(lines.size());
  switch (pick(6)) {
    case 0: {  // a value replaced by a nasty one
      const auto colon = lines[i].find(": ");
      if (colon != std::string::npos) lines[i] = lines[i].substr(0, colon + 2) + kNasty[pick(kNasty.size())];
      break;
    }
    case 1: lines.insert(lines.begin() + static_cast<long>(i), lines[i]); break;  // a duplicate line (key)
    case 2: lines.erase(lines.begin() + static_cast<long>(i)); break;            // a missing line
    case 3: {  // one byte changed
      if (!lines[i].empty()) lines[i][pick(lines[i].size())] = static_cast<char>(pick(256));
      break;
    }
    case 4: lines.resize(i + 1); break;  // truncated
    default: lines[i] = std::string(pick(8), ' ') + lines[i];  // indentation broken
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

struct Tally {
  int tried = 0, accepted = 0, refused = 0, internal = 0;
};

void sweep_file(const fs::path& file, int mutations, const std::function<void(const std::string&)>& parse, Tally& t,
                std::mt19937& rng) {
  const std::string text = slurp(file);
  for (int m = 0; m < mutations; ++m) {
    std::string input = mutate(text, rng);
    if (m % 3 == 0) input = mutate(input, rng);  // and some with two mutations
    ++t.tried;
    try {
      parse(input);
      ++t.accepted;
    } catch (const std::invalid_argument&) {
      ++t.refused;
    } catch (const std::exception& e) {
      ++t.internal;
      ADD_FAILURE() << file.filename() << ": not std::invalid_argument: " << e.what() << "\n--- input:\n" << input;
    }
  }
}

}  // namespace

// Mutations per library file: DPTWIN_MUTATIONS (default 200; about 5,000 inputs).
TEST(InputFiles, MutatedLibraryFilesAreAcceptedOrRefusedCleanly) {
  const char* env = std::getenv("DPTWIN_MUTATIONS");
  const int per_file = env ? std::atoi(env) : 200;
  std::mt19937 rng(20261203);
  Tally hw, scen, model;
  for (const auto& e : fs::directory_iterator(kScenarios / "hardware"))
    sweep_file(e.path(), per_file, [&](const std::string& s) { sim::parse_hardware_yaml(s, "h.yaml"); }, hw, rng);
  for (const char* sub : {"whatif", "lesson"})
    for (const auto& e : fs::directory_iterator(kScenarios / sub))
      sweep_file(e.path(), per_file,
                 [&](const std::string& s) { scenario::parse_scenario(s, "s.yaml", kScenarios / sub); }, scen, rng);
  for (const auto& e : fs::directory_iterator(kScenarios / "models"))
    if (e.path().extension() == ".yaml")
      sweep_file(e.path(), per_file / 4, [&](const std::string& s) { parse_model_yaml(s, "m.yaml"); }, model, rng);
  for (const auto& [name, t] : {std::pair<const char*, const Tally&>{"hardware", hw}, {"scenario", scen},
                                {"model", model}})
    std::cout << fmt::format("{} files: {} mutated inputs, {} accepted, {} refused with std::invalid_argument, {} "
                             "internal errors, 0 crashes\n",
                             name, t.tried, t.accepted, t.refused, t.internal);
  EXPECT_EQ(hw.internal + scen.internal + model.internal, 0);
  EXPECT_GT(hw.refused, hw.tried / 2);
}

namespace {

struct FileCase {
  const char* name;
  std::string file;      // the hardware (or model) file's text
  std::string expected;  // a part of stderr after "dptwin predict: error: "
};

std::string h100_with(const std::string& from, const std::string& to) {
  std::string text = slurp(kScenarios / "hardware" / "dgx-h100.yaml");
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

}  // namespace

// The probe's findings as `dptwin predict --hardware FILE`: a crash (SIGSEGV), a hang,
// a wrap and a 0 s step before; now exit 2 within seconds, naming the line and key.
TEST(InputFiles, ProbeFindingsThroughTheExecutable) {
  const std::vector<FileCase> cases = {
      {"int64max", h100_with("dispatch_cost: 10 us", "dispatch_cost: 9223372036854775807"),
       "h.yaml:59: host.dispatch_cost: '9223372036854775807' has no unit; a time needs one"},
      {"binary", h100_with("cpu: \"2x Intel Xeon Platinum 8480C\"", "cpu: !!binary AAAA"),
       "h.yaml:54: host.cpu: YAML tag '!!binary' is not supported"},
      {"duplicate", h100_with("peer_to_peer: true", "peer_to_peer: true\n  peer_to_peer: true"),
       "h.yaml:42: pcie.peer_to_peer: duplicate key (first given at line 41)"},
      {"links2e32", h100_with("links_per_gpu: 18", "links_per_gpu: 4294967296"),
       "h.yaml:49: nvswitch.links_per_gpu: 4294967296 is outside 1 .. 64"},
      {"nodes2e32", h100_with("nodes: 1", "nodes: 4294967297"), "h.yaml:8: nodes: 4294967297 is outside 1 .. 4096"},
      {"latency1e300", h100_with("latency: 1 us", "latency: 1e300 s"),
       "h.yaml:40: pcie.latency: 1e300 s is outside 1 ns .. 1 s"},
      {"latency1e20", h100_with("latency: 1 us", "latency: 1e20 s"),
       "h.yaml:40: pcie.latency: 1e20 s is outside 1 ns .. 1 s"},
      {"latency1e30", h100_with("latency: 1 us", "latency: 1e30 s"),
       "h.yaml:40: pcie.latency: 1e30 s is outside 1 ns .. 1 s"},
      {"bandwidth1e-300", h100_with("nic_bandwidth: 400 Gb/s", "nic_bandwidth: 1e-300 B/s"),
       "h.yaml:63: network.nic_bandwidth: 1e-300 B/s is outside 125 KB/s .. 12.5 TB/s"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path dir = fs::path(DPT_BINARY_DIR) / "input_files_test" / c.name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "h.yaml") << c.file;
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = test::run_dptwin({"predict", "--hardware", "h.yaml", "--model", "resnet50", "--strategy", "ddp",
                                     "--devices", "8", "--batch-per-device", "32"},
                                    dir);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("dptwin predict: error: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  }
}

// Scenario and model fields: duplicate keys, a bucket limit that rounds to 0 bytes, a
// parameter shape whose element count overflows int64.
TEST(InputFiles, ScenarioAndModelFieldsAreBounded) {
  const std::string good = "schema_version: 1\nhardware: dgx-a100\nmodel: resnet50\nstrategy: ddp\ndevices: 8\n"
                           "batch_per_device: 32\n";
  auto scenario_error = [](const std::string& text) -> std::string {
    try {
      scenario::parse_scenario(text, "s.yaml", ".");
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(scenario_error(good + "devices: 4\n"), "s.yaml:7: devices: duplicate key (first given at line 5)");
  EXPECT_EQ(scenario_error(good + "bucket_cap_mb: 1e-30\n"),
            "s.yaml:7: bucket_cap_mb: 1e-30 MiB is outside 9.5367431640625e-07 .. 1048576 MiB (1 byte .. 1 TiB)");
  EXPECT_EQ(scenario_error(good + "target: {samples_per_s: 1e300}\n"),
            "s.yaml:7: target.samples_per_s: 1e300 is outside 0.000277778 .. 1e+12");
  std::string model = slurp(kScenarios / "models" / "resnet50.yaml");
  const auto pos = model.find("shape: [");
  ASSERT_NE(pos, std::string::npos);
  const auto end = model.find(']', pos);
  model.replace(pos, end - pos + 1, "shape: [4294967296, 4294967296, 4294967296]");
  try {
    parse_model_yaml(model, "m.yaml");
    FAIL() << "an overflowing shape was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has more than 10000000000000 elements"), std::string::npos) << e.what();
  }
}

// format_figure segfaulted on 1e20 (long long overflow) and printed a 1e30 s step as 0 s.
TEST(InputFiles, FiguresFarOutOfRangeStillPrint) {
  EXPECT_EQ(report::format_figure(1e20), "1.00e+20");
  EXPECT_EQ(report::format_figure(-1e30), "-1.00e+30");
  EXPECT_EQ(report::format_duration(1e30), "1.00e+30 s");
  EXPECT_EQ(report::format_figure(1e-300), "1.00e-300");
  EXPECT_EQ(report::format_figure(9.99e14), "999,000,000,000,000");  // the last integer figure
  EXPECT_EQ(report::format_figure(12437.2), "12,400");                // unchanged below
}

// Mutants the loader accepts are predicted through the executable: exit 0 (a figure),
// 1 (out of memory) or 3 (a run-time error with a message), within a bound, never a
// signal. Mutants: DPTWIN_PREDICT_MUTANTS (default 20, about 12 s).
TEST(InputFiles, AcceptedHardwareMutantsPredictWithoutCrashOrHang) {
  const char* env = std::getenv("DPTWIN_PREDICT_MUTANTS");
  const int wanted = env ? std::atoi(env) : 20;
  std::mt19937 rng(7);
  const std::string base = slurp(kScenarios / "hardware" / "dgx-h100.yaml");
  int predicted = 0, tries = 0;
  std::map<int, int> by_exit;
  while (predicted < wanted && ++tries < 100 * wanted) {
    const std::string text = mutate(base, rng);
    try {
      sim::parse_hardware_yaml(text, "h.yaml");
    } catch (const std::invalid_argument&) {
      continue;  // refused at load: covered above
    }
    const fs::path dir = fs::path(DPT_BINARY_DIR) / "input_files_test" / "mutants";
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "h.yaml") << text;
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = test::run_dptwin({"predict", "--hardware", "h.yaml", "--model", "resnet50", "--strategy", "ddp",
                                     "--devices", "8", "--batch-per-device", "32"},
                                    dir);
    ++predicted;
    ++by_exit[r.exit_code];
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 3) << r.exit_code << " " << r.err << "\n"
                                                                           << text;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(120));
  }
  std::string tally;
  for (const auto& [code, n] : by_exit) tally += fmt::format(" exit {}: {};", code, n);
  std::cout << fmt::format("accepted hardware mutants predicted: {} ({})\n", predicted, tally);
  EXPECT_EQ(predicted, wanted);
}
