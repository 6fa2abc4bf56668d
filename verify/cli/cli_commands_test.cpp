// The command line as the tools people know: --version and `version`, "did you
// mean" for a mistyped command, the dptwin build in every JSON document,
// `hardware list|show`, `verify --backend cuda` on a machine without a GPU,
// help examples, one meaning for -o (a file), and the README's exit codes and
// samples. Through the real executable; expected values come from the library
// files and the README themselves, never from dptwin's own output.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "engine/core/closest_name.hpp"
#include "verify/support/cli_run.hpp"
#include "verify/support/profile_text.hpp"
#include "verify/support/test_files.hpp"

namespace dpt::test {
namespace {

namespace fs = std::filesystem;
using dpt::closest_name;
using dpt::edit_distance;

const fs::path kSource(DPT_SOURCE_DIR);

fs::path fresh_dir(const std::string& name) { return test::fresh_test_dir(fs::path("cli_commands") / name); }

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// The version line: CMake's project version (a compile definition of this test)
// and a git revision (hex, possibly -dirty) or "unknown" outside a checkout.
TEST(CliVersion, FlagAndCommandPrintTheProjectVersionAndRevision) {
  const std::regex line("dptwin " + std::string(DPT_PROJECT_VERSION) +
                        R"( \(git ([0-9a-f]{7,40}(-dirty)?|unknown)\)\n)");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--version"}, {"version"}}) {
    const CliResult r = run_dptwin(args, fresh_dir("version"));
    EXPECT_EQ(r.exit_code, 0) << args[0] << r.err;
    EXPECT_TRUE(std::regex_match(r.out, line)) << args[0] << ": " << r.out;
  }
  const CliResult j = run_dptwin({"version", "--json"}, fresh_dir("version_json"));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out).at("dptwin").at("version"), DPT_PROJECT_VERSION);
  // A report names the same revision (it had the one its build folder was configured at).
  const std::string revision = nlohmann::json::parse(j.out).at("dptwin").at("git_revision");
  const fs::path dir = fresh_dir("version_report");
  const CliResult rep = run_dptwin({"report", "--report", "rep"}, dir);
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  std::ifstream md(dir / "rep" / "report.md");
  const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("version " + std::string(DPT_PROJECT_VERSION) + ", git revision " + revision), std::string::npos)
      << revision;
}

TEST(CliUnknownCommand, ATypoGetsTheClosestCommandAndExit2) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"predcit", "dptwin: unknown command 'predcit'; did you mean 'predict'?\n"},
      {"hardwre", "dptwin: unknown command 'hardwre'; did you mean 'hardware'?\n"},
      {"sweeep", "dptwin: unknown command 'sweeep'; did you mean 'sweep'?\n"},
      {"xyzzy", "dptwin: unknown command 'xyzzy'\n"},  // nothing close: no guess
  };
  for (const auto& [word, first_line] : cases) {
    const CliResult r = run_dptwin({word, "--json"}, fresh_dir("typo"));
    EXPECT_EQ(r.exit_code, 2) << word;
    EXPECT_EQ(r.err.substr(0, r.err.find('\n') + 1), first_line) << r.err;
    EXPECT_NE(r.err.find("Commands: bench calibrate compare"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST(CliUnknownCommand, AMistypedFlagGetsTheClosestFlagOfItsCommand) {
  const CliResult r = run_dptwin({"predict", "--hardwre", "dgx-a100"}, fresh_dir("flag_typo"));
  EXPECT_EQ(r.exit_code, 2);
  // CLI11 reports the stray value first ("scenario: File does not exist: dgx-a100"); the hint follows.
  EXPECT_NE(r.err.find("dptwin: unknown flag '--hardwre'; did you mean '--hardware'?\n"), std::string::npos) << r.err;
  // Sub-subcommands: hardware list takes --json.
  const CliResult l = run_dptwin({"hardware", "list", "--jsn"}, fresh_dir("flag_typo"));
  EXPECT_EQ(l.exit_code, 2);
  EXPECT_NE(l.err.find("did you mean '--json'?"), std::string::npos) << l.err;
}

// Invariant: the suggestion is a name at the smallest edit distance from the word,
// and no suggestion is made when every name is further than the typo bound.
TEST(CliUnknownCommand, SuggestionIsAtTheSmallestDistance) {
  const std::vector<std::string> names = {"man", "merge", "model", "plan", "predict", "report", "sweep", "split"};
  EXPECT_EQ(edit_distance("predcit", "predict"), 1u);  // one transposition
  EXPECT_EQ(edit_distance("", "man"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);   // the textbook example
  for (const std::string word : {"pan", "splti", "modle", "repot", "swep", "mege"}) {
    const auto s = closest_name(word, names);
    ASSERT_TRUE(s.has_value()) << word;
    std::size_t best = 100;
    for (const auto& n : names) best = std::min(best, edit_distance(word, n));
    EXPECT_EQ(edit_distance(word, *s), best) << word << " -> " << *s;
  }
  EXPECT_FALSE(closest_name("benchmark", names).has_value());
  // A name in other letter case is the suggestion, however many letters differ in case
  // (an environment variable's spelling of a file key).
  EXPECT_EQ(closest_name("NCCL_P2P_DISABLE", {"nccl_version", "nccl_p2p_disable"}), "nccl_p2p_disable");
  EXPECT_EQ(closest_name("PREDICT", names), "predict");
}

void expect_names_the_build(const nlohmann::json& j, const std::string& command) {
  ASSERT_TRUE(j.is_object()) << command << ": a top-level array could carry no version key";
  ASSERT_TRUE(j.contains("dptwin")) << command;
  EXPECT_EQ(j.at("dptwin").at("version"), DPT_PROJECT_VERSION) << command;
  EXPECT_TRUE(j.at("dptwin").at("git_revision").is_string()) << command;
}

// Every JSON document printed with --json is an object that carries the build
// that wrote it, and what predict --json prints reads back where a step report
// is read (compare).
TEST(CliJson, EveryJsonOutputNamesTheBuild) {
  const fs::path dir = fresh_dir("json");
  write(dir / "s.yaml", "schema_version: 1\nhardware: desktop-2gpu-pcie-p2p\nmodel: resnet50\nstrategy: ddp\n"
                        "devices: 2\nbatch_per_device: 32\nsweep:\n  strategy: [dp, ddp]\n");
  const std::vector<std::vector<std::string>> commands = {
      {"predict", "--hardware", "dgx-a100", "--model", "resnet50", "--strategy", "ddp", "--devices", "2",
       "--batch-per-device", "32", "--json"},
      {"sweep", "s.yaml", "--jobs", "2", "--json"},
      {"split", "--batch", "5", "--devices", "4", "--json"},
      {"hardware", "list", "--json"},
      {"model", "list", "--json"},
      {"version", "--json"},
      {"bench", "--backend", "sim", "--hardware", "dgx-a100", "-b", "1M", "-e", "1M", "--json"},
      {"lesson", "--only", "split-64-on-2", "--json"},
  };
  for (const auto& args : commands) {
    const CliResult r = run_dptwin(args, dir);
    ASSERT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    expect_names_the_build(j, args[0]);
    if (args[0] == "predict") write(dir / "predicted.json", r.out);
    if (args[0] == "sweep") write(dir / "swept.json", r.out);
    if (args[0] == "lesson") {  // the verdicts under "claims": the one claim asked for, from its file
      ASSERT_EQ(j.at("claims").size(), 1u) << r.out;
      EXPECT_NE(j.at("claims")[0].at("file").get<std::string>().find("split-64-on-2.yaml"), std::string::npos);
      EXPECT_EQ(j.at("claims")[0].at("lesson_claim"), 1) << r.out;  // the file's lesson_claim: 1
      EXPECT_EQ(j.at("claims")[0].at("verdict"), "PASS") << r.out;
    }
  }
  // lesson's text verdict names the lesson's claims its checks cover and where the rest are checked.
  const CliResult lesson = run_dptwin({"lesson", "--only", "split-64-on-2"}, dir);
  ASSERT_EQ(lesson.exit_code, 0) << lesson.err;
  EXPECT_NE(lesson.out.find("1 of 1 checks hold, of the lesson's claims 1; claims 2-4"), std::string::npos) << lesson.out;
  const CliResult c = run_dptwin({"compare", "predicted.json", "predicted.json"}, dir);
  EXPECT_EQ(c.exit_code, 0) << c.err;
  // A measured report does not split host copies out of its exposed communication: its
  // column reads n/a there, not 0 (an outside-user review); the predicted one has a time.
  {
    auto measured = nlohmann::json::parse(std::ifstream(dir / "predicted.json"));
    measured["source"] = "measured";
    std::ofstream(dir / "measured.json") << measured.dump();
    const CliResult m = run_dptwin({"compare", "predicted.json", "measured.json"}, dir);
    ASSERT_EQ(m.exit_code, 0) << m.err;
    const auto at = m.out.find("  of it host copies");
    ASSERT_NE(at, std::string::npos) << m.out;
    const std::string line = m.out.substr(at, m.out.find('\n', at) - at);
    EXPECT_EQ(line.substr(line.size() - 3), "n/a") << line;
    EXPECT_EQ(line.find("n/a"), line.size() - 3) << line;
  }
  // compare --json: the inputs, in order, under "reports", each with its label
  // (the file's stem) and the step report read back from the file.
  const CliResult cj = run_dptwin({"compare", "predicted.json", "predicted.json", "--json"}, dir);
  ASSERT_EQ(cj.exit_code, 0) << cj.err;
  const auto cmp = nlohmann::json::parse(cj.out);
  expect_names_the_build(cmp, "compare");
  const auto predicted = nlohmann::json::parse(std::ifstream(dir / "predicted.json"));
  ASSERT_EQ(cmp.at("reports").size(), 2u) << cj.out;
  for (const auto& row : cmp.at("reports")) {
    EXPECT_EQ(row.at("label"), "predicted");
    EXPECT_EQ(row.at("report").at("step_time_s"), predicted.at("step_time_s"));
  }
  const CliResult rep = run_dptwin({"report", "swept.json", "--report", "rep"}, dir);
  EXPECT_EQ(rep.exit_code, 0) << rep.err;
  // A results file's points are predicted already: a scenario flag with it is refused
  // (it was ignored, and the report answered the file's question), nothing written.
  const CliResult flagged = run_dptwin({"report", "swept.json", "--hardware", "dgx-h100", "--report", "rep2"}, dir);
  EXPECT_EQ(flagged.exit_code, 2) << flagged.err;
  EXPECT_NE(flagged.err.find("--hardware: swept.json holds points already predicted"), std::string::npos)
      << flagged.err;
  EXPECT_FALSE(fs::exists(dir / "rep2"));
}

TEST(CliHardware, ListNamesEveryLibraryFileWithItsDescription) {
  const CliResult r = run_dptwin({"hardware", "list"}, fresh_dir("hardware_list"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int files = 0;
  for (const auto& e : fs::directory_iterator(kSource / "scenarios" / "hardware")) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    const std::string description = YAML::LoadFile(e.path().string())["description"].as<std::string>();
    const std::string name = e.path().stem().string();
    // One line per file: the name first, the description on the same line.
    const auto at = r.out.find("\n" + name + " ");
    ASSERT_NE(at, std::string::npos) << name << "\n" << r.out;
    const std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find(description), std::string::npos) << line;
  }
  EXPECT_GE(files, 8);
}

// The fidelity table's machines (single GPUs and servers of published measurements) are
// hardware a user can name: `hardware list` shows each in a table of its own with its
// description, --json lists them apart from the library's, and --hardware NAME predicts on the
// same file as its path does (planted bug it catches: the fallback dropped, or the file of
// another machine loaded). A name in neither set suggests the nearest of both.
TEST(CliHardware, TheFidelityTablesMachinesAreNamedAndListed) {
  const fs::path dir = fresh_dir("hardware_measured");
  const fs::path measured = kSource / "scenarios" / "measured" / "public" / "hardware";
  const CliResult r = run_dptwin({"hardware", "list"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t section = r.out.find("\nthe fidelity table's machines (");
  ASSERT_NE(section, std::string::npos) << r.out;
  int files = 0;
  for (const auto& e : fs::directory_iterator(measured)) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    const std::string name = e.path().stem().string();
    const std::string description = YAML::LoadFile(e.path().string())["description"].as<std::string>();
    const auto at = r.out.find("\n" + name + " ", section);
    ASSERT_NE(at, std::string::npos) << name << "\n" << r.out;
    const std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find(description), std::string::npos) << line;
  }
  EXPECT_GE(files, 10);
  const CliResult j = run_dptwin({"hardware", "list", "--json"}, dir);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto listed = nlohmann::json::parse(j.out);
  EXPECT_EQ(static_cast<int>(listed.at("measured_machines").size()), files);
  for (const auto& row : listed.at("hardware")) EXPECT_NE(row.at("name"), "h100-pcie-1x");

  auto step_s = [&](const std::string& hardware) {
    const CliResult p = run_dptwin({"predict", "--hardware", hardware, "--model", "resnet50", "--strategy", "single",
                                    "--batch-per-device", "64", "--json"},
                                   dir);
    EXPECT_EQ(p.exit_code, 0) << p.err;
    const auto report = nlohmann::json::parse(p.out);
    return report.at("step_time_s").get<double>();
  };
  EXPECT_DOUBLE_EQ(step_s("h100-pcie-1x"), step_s((measured / "h100-pcie-1x.yaml").string()));

  const CliResult typo = run_dptwin({"predict", "--hardware", "h100-pcie", "--model", "resnet50", "--strategy", "single",
                                     "--batch-per-device", "64"},
                                    dir);
  EXPECT_EQ(typo.exit_code, 2) << typo.err;
  EXPECT_NE(typo.err.find("unknown hardware 'h100-pcie'; did you mean 'h100-pcie-1x'?"), std::string::npos)
      << typo.err;
  const size_t machines = typo.err.find("; the fidelity table's machines: ");
  ASSERT_NE(machines, std::string::npos) << typo.err;
  EXPECT_NE(typo.err.find("h100-pcie-1x", machines), std::string::npos) << typo.err;
  EXPECT_NE(typo.err.find("rtx6000-ada-1x", machines), std::string::npos) << typo.err;
  // The start of exactly one name is suggested where no name is close ("a10" of "a10-1x").
  const CliResult start = run_dptwin({"hardware", "show", "a10"}, dir);
  EXPECT_EQ(start.exit_code, 2) << start.err;
  EXPECT_NE(start.err.find("unknown hardware 'a10'; did you mean 'a10-1x'?"), std::string::npos) << start.err;
  // verify, which reads its hardware on its own path, takes the names too (it had looked for
  // the library's a10-1x.yaml alone: a code review).
  const CliResult v = run_dptwin({"verify", "--hardware", "a10-1x", "--devices", "1"}, dir);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_EQ(v.err.find("unknown hardware"), std::string::npos) << v.err;
}

// Every key of every hardware file the project ships (the library's and the fidelity
// table's own) is documented by `dptwin hardware schema`, which an installed binary carries
// (an outside-user review found the schema only in a source header, which is not installed;
// writing this test found op_efficiency's attention and sdpa and network.gpu_direct_rdma
// missing from it).
std::set<std::string> keys_of(const fs::path& yaml) {
  std::set<std::string> keys;
  std::istringstream in(slurp(yaml));
  std::string line;
  const std::regex quoted("\"[^\"]*\""), key("([a-z_][a-z_0-9]*):");
  while (std::getline(in, line)) {
    line = std::regex_replace(line.substr(0, line.find('#')), quoted, "\"\"");
    for (std::sregex_iterator it(line.begin(), line.end(), key), end; it != end; ++it) keys.insert((*it)[1]);
  }
  return keys;
}

TEST(CliHardware, SchemaDocumentsEveryKeyTheShippedFilesUse) {
  const CliResult r = run_dptwin({"hardware", "schema"}, fresh_dir("hardware_schema"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int files = 0;
  for (const fs::path& dir : {kSource / "scenarios" / "hardware", kSource / "scenarios" / "measured" / "public" / "hardware"})
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".yaml") continue;
      ++files;
      for (const auto& k : keys_of(e.path()))
        EXPECT_NE(r.out.find(k + ":"), std::string::npos) << k << " (" << e.path().filename().string() << ")";
    }
  EXPECT_GE(files, 12);
  EXPECT_NE(r.out.find("staged_bidirectional:"), std::string::npos);
}

// A plan file's candidate given as a path relative to the file, run from another folder:
// the plan resolves it there for the sweep and for the answer's node note alike (the note
// read it from the working directory and failed after the whole sweep: a code review).
TEST(CliPlan, AHardwarePathRelativeToThePlanFile) {
  const fs::path dir = fresh_dir("plan-relative-hardware");
  fs::create_directories(dir / "p");
  fs::copy_file(kSource / "scenarios" / "hardware" / "dgx-a100-cluster.yaml", dir / "p" / "mybox.yaml");
  write(dir / "p" / "plan.yaml",
        "schema_version: 1\nmodel: resnet50\nbatch_per_device: 32\noptimizer: sgd_momentum\n"
        "target:\n  samples_per_s: 40000\nplan:\n  candidates:\n    - {hardware: mybox.yaml, price_per_gpu_hour: 2}\n"
        "  strategies: [ddp]\n  max_gpus: 64\n");
  const CliResult r = run_dptwin({"plan", "p/plan.yaml", "-o", "out.json", "--report", "rep"}, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("more than the 4 its hardware file describes"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "out.json"));
  // The report's Assumptions describe the file, not "not found".
  EXPECT_EQ(slurp(dir / "rep" / "report.md").find("hardware file not found"), std::string::npos);
}

// Found by an outside-user review: flags a plan file would ignore were ignored silently
// (exit 0, the file's f32 answer under --precision f16-master); a --precision flag could not
// take the place of a file's dtype: f32 (every shipped what-if file refused f16-master); and
// predict's report counted one micro-batch of an accumulated step.
TEST(CliPlanAndPrecision, FlagsAreAppliedOrRefusedNeverIgnored) {
  const fs::path dir = fresh_dir("plan_flags");
  const std::string plan = (kSource / "scenarios" / "whatif" / "plan-resnet50.yaml").string();
  for (const std::vector<std::string>& flag :
       {std::vector<std::string>{"--precision", "f16-master"}, {"--max-gpus", "2"}, {"--optimizer", "sgd"}}) {
    std::vector<std::string> args{"plan", plan, "-j", "1"};
    args.insert(args.end(), flag.begin(), flag.end());
    const CliResult r = run_dptwin(args, dir);
    EXPECT_EQ(r.exit_code, 2) << flag[0] << "\n" << r.err;
    EXPECT_NE(r.err.find(flag[0] + ": a plan file sets its candidates' training"), std::string::npos) << r.err;
  }
  write(dir / "s.yaml", "schema_version: 1\nhardware: dgx-a100\nmodel: gpt2-124m\nstrategy: ddp\ndevices: 2\n"
                        "batch_per_device: 2\ndtype: f32\n");
  const CliResult flag = run_dptwin({"predict", "s.yaml", "--precision", "f16-master", "--json"}, dir);
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_EQ(nlohmann::json::parse(flag.out).at("precision"), "f16-master");
  // Both in one file still have to agree.
  write(dir / "both.yaml", "schema_version: 1\nhardware: dgx-a100\nmodel: gpt2-124m\nstrategy: ddp\ndevices: 2\n"
                           "batch_per_device: 2\ndtype: f32\nprecision: f16-master\n");
  const CliResult both = run_dptwin({"predict", "both.yaml"}, dir);
  EXPECT_EQ(both.exit_code, 2) << both.err;
  EXPECT_NE(both.err.find("precision f16-master keeps parameters in f16, but dtype is f32"), std::string::npos) << both.err;
  // The report's batch is the step's: 2 micro-batches of 2 per GPU on 2 GPUs.
  const CliResult acc = run_dptwin({"predict", "s.yaml", "--accumulate", "2", "--report", "rep"}, dir);
  ASSERT_EQ(acc.exit_code, 0) << acc.err;
  const std::string csv = slurp(dir / "rep" / "points.csv");
  const std::string header = csv.substr(0, csv.find('\n')), row = csv.substr(csv.find('\n') + 1);
  auto column = [](const std::string& line, int i) {
    std::istringstream in(line);
    std::string cell;
    for (int k = 0; k <= i; ++k) std::getline(in, cell, ',');
    return cell;
  };
  int batch_col = -1;
  for (int i = 0; i < 40; ++i)
    if (column(header, i) == "batch_global") batch_col = i;
  ASSERT_GE(batch_col, 0) << header;
  EXPECT_EQ(column(row, batch_col), "8") << csv;
  EXPECT_NE(slurp(dir / "rep" / "report.md").find("## Assumptions"), std::string::npos);  // as sweep's reports
  // The summary names f16-master's f32 masters next to the optimizer it wraps.
  const CliResult summary = run_dptwin({"predict", "s.yaml", "--precision", "f16-master", "--optimizer", "sgd"}, dir);
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_NE(summary.out.find("f16-master: plus f32 master weights"), std::string::npos) << summary.out;
  // compare of steps with different global batches answers in throughput.
  write(dir / "big.yaml", "schema_version: 1\nhardware: dgx-a100\nmodel: gpt2-124m\nstrategy: ddp\ndevices: 4\n"
                          "batch_per_device: 2\n");
  const CliResult cmp = run_dptwin({"compare", "s.yaml", "big.yaml", "--report", "cmp"}, dir);
  ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
  const std::string cmp_md = slurp(dir / "cmp" / "report.md");
  EXPECT_NE(cmp_md.find("big trains "), std::string::npos) << cmp_md;
  // compare's report has the terminal table's rows (it dropped the batch and breakdown rows)
  // and an Assumptions section, as predict's and sweep's (found by an outside-user review).
  for (const char* md_row : {"| batch (global/per GPU) |", "| exposed communication |", "|   of it host copies |",
                          "| comm hook |", "| activation checkpointing |", "## Assumptions", "| DDP bucket size | 25 MiB |"})
    EXPECT_NE(cmp_md.find(md_row), std::string::npos) << md_row << "\n" << cmp_md;
  // The comm hook and checkpointing a scenario ran with are in both.
  write(dir / "hooked.yaml", "schema_version: 1\nhardware: dgx-a100\nmodel: gpt2-124m\nstrategy: ddp\ndevices: 4\n"
                             "batch_per_device: 2\ncomm_hook: fp16_compress\ncheckpoint: every\n"
                             "overrides: {gpu.memory: 40 GiB}\n");
  const CliResult hooked = run_dptwin({"compare", "big.yaml", "hooked.yaml", "--report", "cmp2"}, dir);
  ASSERT_EQ(hooked.exit_code, 0) << hooked.err;
  const std::string hooked_md = slurp(dir / "cmp2" / "report.md");
  EXPECT_NE(hooked_md.find("| comm hook | none | fp16_compress |"), std::string::npos) << hooked_md;
  EXPECT_NE(hooked_md.find("| activation checkpointing | none | every layer |"), std::string::npos) << hooked_md;
  EXPECT_NE(hooked_md.find("| hardware overrides | none | gpu.memory = 40 GiB |"), std::string::npos) << hooked_md;
  // A step report written by predict --out records its overrides too; two inputs of one stem
  // are told apart by their file names.
  ASSERT_EQ(run_dptwin({"predict", "hooked.yaml", "--out", "hooked.json"}, dir).exit_code, 0);
  const CliResult same_stem = run_dptwin({"compare", "hooked.yaml", "hooked.json"}, dir);
  ASSERT_EQ(same_stem.exit_code, 0) << same_stem.err;
  EXPECT_NE(same_stem.out.find("hooked.yaml"), std::string::npos) << same_stem.out;
  EXPECT_NE(same_stem.out.find("hooked.json"), std::string::npos) << same_stem.out;
  const std::string overrides_line = same_stem.out.substr(same_stem.out.find("hardware overrides"));
  EXPECT_EQ(overrides_line.substr(0, overrides_line.find('\n')).find("none"), std::string::npos) << same_stem.out;
  EXPECT_NE(hooked_md.find("| DDP comm hook | none (gradients all-reduced in their own dtype), fp16_compress |"),
            std::string::npos)
      << hooked_md;
  EXPECT_NE(hooked_md.find("hooked: gpu.memory"), std::string::npos) << hooked_md;
  // A plan whose every candidate is out of memory says so.
  const CliResult oom = run_dptwin({"plan", "--model", "llama-2-7b", "--target-samples-per-s", "1", "--hardware",
                                    "l40s-4x-pcie4:1.1", "--strategies", "ddp", "--batch-per-device", "1",
                                    "--optimizer", "adamw", "-j", "1"},
                                   dir);
  EXPECT_NE(oom.out.find("does not fit in GPU memory in any of them"), std::string::npos) << oom.out << oom.err;
}

TEST(CliHardware, ShowPrintsTheFileAsItIs) {
  const fs::path file = kSource / "scenarios" / "hardware" / "dgx-h100.yaml";
  const CliResult r = run_dptwin({"hardware", "show", "dgx-h100"}, fresh_dir("hardware_show"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = slurp(file);
  ASSERT_GE(r.out.size(), text.size());
  EXPECT_EQ(r.out.substr(r.out.size() - text.size()), text);  // after a "# PATH" line
  const CliResult bad = run_dptwin({"hardware", "show", "dgx-h200"}, fresh_dir("hardware_bad"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown hardware 'dgx-h200'"), std::string::npos) << bad.err;
}

bool has_gpu() { return fs::exists("/dev/nvidia0") || fs::exists("/dev/nvidiactl"); }

// CI without a GPU: verify --backend cuda reports every part skipped with the
// reason, in the console and as JUnit <skipped>, and exits 0 (3 with --require-device).
TEST(CliVerify, CudaWithoutAGpuWritesSkippedJUnitAndExits0) {
  if (has_gpu()) GTEST_SKIP() << "this machine has a GPU: verify --backend cuda runs for real";
  const fs::path dir = fresh_dir("verify_cuda");
  const CliResult r = run_dptwin({"verify", "--backend", "cuda", "--junit", "out/verify.xml"}, dir);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string xml = slurp(dir / "out" / "verify.xml");
  EXPECT_NE(xml.find("<testsuite"), std::string::npos) << xml;
  for (const char* part : {"name=\"correctness\"", "name=\"performance\""}) EXPECT_NE(xml.find(part), std::string::npos) << xml;
  std::size_t skipped = 0;
  for (auto at = xml.find("<skipped"); at != std::string::npos; at = xml.find("<skipped", at + 1)) ++skipped;
  EXPECT_EQ(skipped, 2u) << xml;
  EXPECT_NE(xml.find("backend cuda unavailable"), std::string::npos) << xml;
  EXPECT_NE(r.out.find("0 failed, 0 errors, 2 skipped in "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": SKIPPED\n"), std::string::npos) << r.out;  // not "PASSED": nothing ran
  // Validating a node, a missing device is the finding: an error in JUnit, not a skip.
  const CliResult strict =
      run_dptwin({"verify", "--backend", "cuda", "--require-device", "--junit", "out/strict.xml"}, dir);
  EXPECT_EQ(strict.exit_code, 3) << strict.err;
  const std::string strict_xml = slurp(dir / "out" / "strict.xml");
  EXPECT_EQ(strict_xml.find("<skipped"), std::string::npos) << strict_xml;
  EXPECT_NE(strict_xml.find("<error"), std::string::npos) << strict_xml;
  // A node runbook's next step reads --calibrate-out: skipped, it is not written, and
  // stderr says so (it said nothing).
  const CliResult calibrate = run_dptwin(
      {"verify", "--backend", "cuda", "--hardware", "dgx-h100", "--only", "performance", "--calibrate-out", "n.yaml"}, dir);
  EXPECT_EQ(calibrate.exit_code, 0) << calibrate.err;
  EXPECT_FALSE(fs::exists(dir / "n.yaml"));
  EXPECT_NE(calibrate.err.find("warning: --calibrate-out n.yaml not written: backend cuda unavailable"),
            std::string::npos)
      << calibrate.err;
}

TEST(CliHelp, VerifyCalibrateAndNewCommandsHaveExamples) {
  for (const char* cmd : {"verify", "calibrate", "hardware", "version", "completion", "man", "model"}) {
    const CliResult r = run_dptwin({cmd, "--help"}, fresh_dir("help"));
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("Example"), std::string::npos) << cmd;
    EXPECT_NE(r.out.find("  dptwin " + std::string(cmd)), std::string::npos) << cmd;
    EXPECT_NE(r.out.find("Exit codes: 0 success"), std::string::npos) << cmd;
  }
}

// bench --help once said --op defaults to all_reduce and also "every collective when not given".
TEST(CliHelp, BenchOpStatesOneDefaultPerBackend) {
  const CliResult r = run_dptwin({"bench", "--help"}, fresh_dir("help_bench"));
  ASSERT_EQ(r.exit_code, 0);
  const std::string op = r.out.substr(r.out.find("--op"), r.out.find("--algo") - r.out.find("--op"));
  EXPECT_EQ(op.find("(default: all_reduce)"), std::string::npos) << op;
  EXPECT_NE(op.find("all_reduce on sim"), std::string::npos) << op;
  EXPECT_NE(op.find("every collective on host and cuda"), std::string::npos) << op;
}

// -o is a file everywhere; directories are --report DIR. report keeps -o DIR with a note.
TEST(CliOutputFlags, DashOIsAFileAndReportTakesADirectory) {
  const fs::path dir = fresh_dir("dash_o");
  const CliResult p = run_dptwin({"predict", "--hardware", "dgx-a100", "--model", "resnet50", "--strategy", "ddp",
                                  "--devices", "2", "--batch-per-device", "32", "-o", "step.json"},
                                 dir);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir / "step.json")).at("schema"), "dptwin.step_report/1");
  write(dir / "s.yaml", "schema_version: 1\nhardware: desktop-2gpu-pcie-p2p\nmodel: resnet50\nstrategy: ddp\n"
                        "devices: 2\nbatch_per_device: 32\n");
  const CliResult rep = run_dptwin({"report", "s.yaml", "--report", "new"}, dir);
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_TRUE(fs::exists(dir / "new" / "report.html"));
  EXPECT_EQ(rep.err, "");
  const CliResult old = run_dptwin({"report", "s.yaml", "-o", "old"}, dir);
  ASSERT_EQ(old.exit_code, 0) << old.err;
  EXPECT_TRUE(fs::exists(dir / "old" / "report.html"));
  EXPECT_NE(old.err.find("-o DIR is deprecated; use --report DIR"), std::string::npos) << old.err;
  const CliResult both = run_dptwin({"report", "s.yaml", "-o", "a", "--report", "b"}, dir);
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
}

// train's measured step report (cuda) is -o FILE too; --report FILE stays with a note.
TEST(CliOutputFlags, TrainDashOIsTheStepReportFile) {
  const fs::path dir = fresh_dir("train_o");
  const std::vector<std::string> base = {"train", "--model", "mlp:4-8-2", "--batch", "8", "--steps", "1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_dptwin(args, dir);
  };
  const CliResult o = with({"-o", "r.json"});  // host backend: nothing to measure per op
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("-o, --trace and --tf32 need --backend cuda"), std::string::npos) << o.err;
  const CliResult old = with({"--report", "r.json"});
  EXPECT_EQ(old.exit_code, 2);
  EXPECT_NE(old.err.find("--report FILE is deprecated; use -o FILE"), std::string::npos) << old.err;
  EXPECT_FALSE(fs::exists(dir / "r.json"));
}

// The README: "0 ok, 1 a check or target failed, 2 bad flags or input, 3 the run
// failed"; out of memory is 1 for predict and for a sweep where no point fits.
TEST(CliExitCodes, AsTheReadmeDocuments) {
  const fs::path dir = fresh_dir("exit_codes");
  const std::string base = "schema_version: 1\nhardware: dgx1-v100\nmodel: gpt2-124m\nstrategy: ddp\n";
  write(dir / "fits.yaml", base + "devices: 2\nbatch_per_device: 1\n");
  write(dir / "oom.yaml", base + "devices: 2\nbatch_per_device: 64\n");
  write(dir / "oom-sweep.yaml", base + "batch_per_device: 64\nsweep:\n  devices: [1, 2]\n");
  write(dir / "some-fit.yaml", base + "devices: 2\nsweep:\n  batch_per_device: [1, 64]\n");
  write(dir / "target.yaml", base + "devices: 2\nbatch_per_device: 1\ntarget:\n  samples_per_s: 1e12\n");
  struct Case {
    std::vector<std::string> args;
    int code;
  };
  const std::vector<Case> cases = {
      {{"predict", "fits.yaml"}, 0},
      {{"predict", "oom.yaml"}, 1},
      {{"predict", "target.yaml"}, 1},
      {{"sweep", "oom-sweep.yaml", "--jobs", "2"}, 1},
      {{"sweep", "oom-sweep.yaml", "--jobs", "2", "--shard", "0/2", "-o", "shard.json"}, 0},  // a shard judges nothing
      {{"sweep", "some-fit.yaml", "--jobs", "2"}, 0},
      {{"report", "oom-sweep.yaml", "--report", "oom-report"}, 1},
      {{"plan", "--model", "resnet50", "--target-samples-per-s", "1e9", "--hardware", "dgx-a100:2.40", "--max-gpus",
        "8"},
       1},  // no configuration meets the target
      {{"verify", "--backend", "host", "--only", "correctness", "--cases", "5", "--seed", "1", "--inject-bug",
        "drop-chunk"},
       1},  // a check failed (the planted bug is found)
      {{"lesson", "--only", "split-64-on-2"}, 0},
      {{"predict", "fits.yaml", "--devices", "0"}, 2},
      {{"predict", "missing.yaml"}, 2},
      {{"predcit", "fits.yaml"}, 2},
  };
  for (const auto& c : cases) {
    const CliResult r = run_dptwin(c.args, dir);
    std::string cmd;
    for (const auto& a : c.args) cmd += a + " ";
    EXPECT_EQ(r.exit_code, c.code) << cmd << "\n" << r.out << r.err;
  }
  // 3: the run failed (here: past its simulation event budget).
  ::setenv("DPTWIN_SIM_EVENTS", "100", 1);
  const CliResult budget = run_dptwin({"predict", "fits.yaml"}, dir);
  ::unsetenv("DPTWIN_SIM_EVENTS");
  EXPECT_EQ(budget.exit_code, 3) << budget.err;
}

// Invariant: output a command cannot write to standard output fails the run (exit 3, the
// reason on stderr), as a failed --out does; with room for it the same command exits 0.
// The full disk is RLIMIT_FSIZE on the child (its .stdout file in the test's folder);
// the closed pipe a pipe whose reading end is closed (`dptwin ... | head` after head left).
// Both with the signal dispositions a shell gives (SIGXFSZ and SIGPIPE at their defaults,
// which kill the process unless dptwin ignores them) and with them ignored. Shown to fail
// before the check: `predict --json` exited 0 with a truncated document; and before
// dptwin ignored the signals: killed by SIGXFSZ (153) and SIGPIPE (141), nothing said.
TEST(CliExitCodes, StandardOutputThatCannotBeWrittenFailsTheRun) {
  const fs::path dir = fresh_dir("stdout_full");
  write(dir / "fits.yaml", "schema_version: 1\nhardware: dgx1-v100\nmodel: gpt2-124m\nstrategy: ddp\n"
                           "devices: 2\nbatch_per_device: 1\n");
  const auto limited = [](bool ignored) {
    return [ignored] {
      std::signal(SIGXFSZ, ignored ? SIG_IGN : SIG_DFL);
      const rlimit lim{512, 512};  // room for an error line on stderr, not for the output
      setrlimit(RLIMIT_FSIZE, &lim);
    };
  };
  const auto closed_pipe = [](bool ignored) {
    return [ignored] {
      std::signal(SIGPIPE, ignored ? SIG_IGN : SIG_DFL);
      int fds[2];
      if (::pipe(fds) != 0) ::_exit(126);
      ::close(fds[0]);
      ::dup2(fds[1], 1);
      ::close(fds[1]);
    };
  };
  const std::vector<std::vector<std::string>> commands = {
      {"predict", "fits.yaml", "--json"}, {"hardware", "list"}, {"model", "list"}};
  for (const auto& args : commands) {
    for (const bool ignored : {true, false})
      for (const auto& [what, failing] : {std::pair{"full disk", std::function<void()>(limited(ignored))},
                                          std::pair{"closed pipe", std::function<void()>(closed_pipe(ignored))}}) {
        const CliResult full = run_dptwin_with(args, dir, failing);
        EXPECT_EQ(full.exit_code, 3) << args[0] << ", " << what << (ignored ? ", signal ignored" : "") << "\n"
                                     << full.err;
        EXPECT_NE(full.err.find("writing standard output failed"), std::string::npos) << args[0] << "\n" << full.err;
      }
    const CliResult room = run_dptwin(args, dir);
    EXPECT_EQ(room.exit_code, 0) << args[0] << "\n" << room.err;
    EXPECT_GT(room.out.size(), 512u) << args[0];  // the case needs output past the limit
  }
}

// Invariant: a run that ends out of memory (exit 1) writes a consistent set of outputs:
// --out and --json carry its step report with out_of_memory, and --trace an empty trace
// saying why, never the trace of an earlier run beside the new report; that holds for the
// twin's own out of memory and for the one found before the step (parameters, gradients
// and optimizer state alone too big), which printed nothing for --json and wrote no --out.
// A sweep whose every point failed (exit 3) leaves an earlier -o file as it was.
// A step out of memory before its first optimizer step holds none of the optimizer's state
// (PyTorch allocates it then): the message says what comes on top, AdamW's two tensors per
// parameter, twice the parameters' bytes in its own breakdown; SGD without momentum has none.
TEST(CliPredict, OutOfMemoryNamesTheOptimizerStateStillToCome) {
  const fs::path dir = fresh_dir("predict-oom-state");
  const std::vector<std::string> flags = {"predict", "--hardware", "dgx-a100", "--model", "gpt2-1.5b", "--strategy",
                                          "ddp", "--devices", "8", "--batch-per-device", "16", "--optimizer"};
  auto with = [&](const char* optimizer) {
    auto f = flags;
    f.push_back(optimizer);
    return run_dptwin(f, dir);
  };
  const CliResult adamw = with("adamw");
  ASSERT_EQ(adamw.exit_code, 1) << adamw.err;
  std::smatch params, state;
  ASSERT_TRUE(std::regex_search(adamw.out, params, std::regex("parameters=([0-9.]+) GiB"))) << adamw.out;
  ASSERT_TRUE(std::regex_search(adamw.out, state,
                                std::regex("not yet allocated when it failed: ([0-9.]+) GiB more of adamw state per GPU")))
      << adamw.out;
  EXPECT_NEAR(std::stod(state[1]), 2 * std::stod(params[1]), 0.002) << adamw.out;
  const CliResult sgd = with("sgd");
  ASSERT_EQ(sgd.exit_code, 1) << sgd.err;
  EXPECT_EQ(sgd.out.find("not yet allocated"), std::string::npos) << sgd.out;
}

// NCCL plans and runs its collectives at its own per-link NVLink figure (20 GB/s on SM80):
// an override above it speeds nothing NCCL does, and the prediction says so (a review's
// nvswitch.link_bandwidth 25 -> 100 GB/s changed nothing and said nothing); one below it
// slows the collectives, without the warning.
TEST(CliPredict, ALinkFasterThanNcclsFigureIsWarnedAbout) {
  const fs::path dir = fresh_dir("predict-fast-link");
  auto with = [&](const char* rate) {
    return run_dptwin({"predict", "--hardware", "dgx-a100", "--model", "gpt2-124m", "--strategy", "ddp", "--devices",
                       "8", "--batch-per-device", "4", "--json", "--override",
                       std::string("nvswitch.link_bandwidth=") + rate},
                      dir);
  };
  const CliResult fast = with("100 GB/s"), slow = with("10 GB/s");
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  ASSERT_EQ(slow.exit_code, 0) << slow.err;
  const auto f = nlohmann::json::parse(fast.out), s = nlohmann::json::parse(slow.out);
  EXPECT_NE(f.at("warnings").dump().find("above NCCL's 20 GB/s per link for compute capability 8.0"), std::string::npos)
      << f.at("warnings").dump();
  EXPECT_EQ(s.at("warnings").dump().find("above NCCL's"), std::string::npos) << s.at("warnings").dump();
  EXPECT_EQ(f.at("hardware_overrides"), nlohmann::json::array({"nvswitch.link_bandwidth = 100 GB/s"}));
  EXPECT_GT(s.at("step_time_s").get<double>(), f.at("step_time_s").get<double>());
}

// Fused attention on a hardware file without op_efficiency.sdpa runs at efficiency.gemm,
// about 4x FlashAttention-2's measured fraction: said (a hand-written H100 PCIe file came out
// faster than a DGX H100, silently). A file with the figure (dgx-a100) says nothing.
TEST(CliPredict, FusedAttentionWithoutItsOwnFigureIsWarnedAbout) {
  const fs::path dir = fresh_dir("predict-sdpa-default");
  auto on = [&](const char* hardware) {
    return run_dptwin({"predict", "--hardware", hardware, "--model",
                       "transformer:layers=2,hidden=256,heads=4,seq=512,vocab=1000,attn=sdpa", "--strategy", "single",
                       "--batch-per-device", "2", "--precision", "bf16-amp", "--json"},
                      dir);
  };
  const CliResult l40s = on("l40s-4x-pcie4"), a100 = on("dgx-a100");
  ASSERT_EQ(l40s.exit_code, 0) << l40s.err;
  ASSERT_EQ(a100.exit_code, 0) << a100.err;
  EXPECT_NE(nlohmann::json::parse(l40s.out).at("warnings").dump().find(
                "gives no gpu.op_efficiency.sdpa: fused attention (scaled_dot_product_attention) ran at "
                "efficiency.gemm's 0.74"),
            std::string::npos)
      << l40s.out;
  EXPECT_EQ(nlohmann::json::parse(a100.out).at("warnings").dump().find("op_efficiency.sdpa"), std::string::npos)
      << a100.out;
}

// GEMMs a hardware file gives no matmul figure for run at efficiency.gemm's default; where
// they take a tenth or more of the kernel time the prediction says so, naming the file and
// the compute type (an outside-user review: three files without one ran BERT-large 23-46 %
// fast, silently). A file with the figure for that type, a model whose matmuls are a sliver
// (ResNet-50's classifier), and a file that sets efficiency.gemm itself say nothing.
TEST(CliPredict, MatmulsWithoutTheGpusOwnFigureAreWarnedAbout) {
  const fs::path dir = fresh_dir("predict-gemm-default");
  auto warnings = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "predict");
    args.push_back("--json");
    const CliResult r = run_dptwin(args, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out).at("warnings").dump();
  };
  const std::string a10 = warnings({"--hardware", "a10-1x", "--model", "gpt2-124m", "--strategy", "single",
                                    "--batch-per-device", "4", "--precision", "bf16-amp"});
  EXPECT_NE(a10.find("a10-1x.yaml gives no gpu.op_efficiency.gemm for bf16: its matmuls ("), std::string::npos) << a10;
  EXPECT_NE(a10.find("% of the kernel time) ran at efficiency.gemm's default 0.74"), std::string::npos) << a10;
  EXPECT_EQ(warnings({"--hardware", "dgx-a100", "--model", "gpt2-124m", "--strategy", "single", "--batch-per-device",
                      "4", "--precision", "bf16-amp"})
                .find("op_efficiency.gemm"),
            std::string::npos);
  EXPECT_EQ(warnings({"--hardware", "a10-1x", "--model", "resnet50", "--strategy", "single", "--batch-per-device", "32"})
                .find("op_efficiency.gemm"),
            std::string::npos);
  EXPECT_EQ(warnings({"--hardware", "host-cpu-gloo", "--model", "mlp:256-1024-1024-10", "--strategy", "ddp",
                      "--devices", "2", "--batch-per-device", "16"})
                .find("op_efficiency.gemm"),
            std::string::npos);
}

// A DDP step whose NCCL runs through host memory (SHM) says so, with the reason:
// NCCL_P2P_DISABLE=1 on NVSwitch, GPUs without peer access, GPUs beyond NCCL's p2pLevel
// (an Intel root complex); NVSwitch with P2P, one GPU, and gloo on the host say nothing.
TEST(CliPredict, DdpOverHostMemoryIsWarnedAbout) {
  const fs::path dir = fresh_dir("predict-shm");
  auto warnings = [&](const std::string& hw, int devices, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"predict", "--hardware", hw, "--model", "resnet50", "--strategy",
                                     devices > 1 ? "ddp" : "single", "--devices", std::to_string(devices),
                                     "--batch-per-device", "32", "--json"};
    args.insert(args.end(), more.begin(), more.end());
    const CliResult r = run_dptwin(args, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out).at("warnings").dump();
  };
  const std::string shm = "NCCL connects this node's GPUs through host memory, its SHM transport (";
  const std::string off = warnings("dgx-a100", 8, {"--override", "nccl_p2p_disable=true"});
  EXPECT_NE(off.find(shm + "nccl_p2p_disable is set, as by NCCL_P2P_DISABLE=1)"), std::string::npos) << off;
  EXPECT_NE(off.find("so read this step time as a lower bound"), std::string::npos) << off;
  const std::string geforce = warnings("rtx4090-2x-pcie4", 2);
  EXPECT_NE(geforce.find(shm + "GPUs 0 and 1 have no peer access"), std::string::npos) << geforce;
  const std::string intel = warnings("l40s-4x-pcie4", 4);
  EXPECT_NE(intel.find("beyond NCCL's p2pLevel"), std::string::npos) << intel;
  EXPECT_EQ(warnings("dgx-a100", 8).find("SHM transport"), std::string::npos);
  EXPECT_EQ(warnings("rtx4090-2x-pcie4", 1).find("SHM transport"), std::string::npos);
  const CliResult gloo = run_dptwin({"predict", "--hardware", "host-cpu-gloo", "--model", "mlp:64-64-10", "--strategy",
                                     "ddp", "--devices", "2", "--batch-per-device", "4", "--json"},
                                    dir);
  ASSERT_EQ(gloo.exit_code, 0) << gloo.err;
  EXPECT_EQ(nlohmann::json::parse(gloo.out).at("warnings").dump().find("SHM transport"), std::string::npos);
}

// Nodes without GPUs per node run one GPU per node (the documented default), and the
// prediction says how to fill the nodes; with --devices or --gpus it says nothing.
TEST(CliPredict, NodesWithoutDevicesSayOneGpuPerNode) {
  const fs::path dir = fresh_dir("predict-nodes");
  const std::vector<std::string> base = {"predict",  "--hardware", "dgx-h100-cluster", "--model", "gpt2-124m",
                                         "--strategy", "ddp",       "--batch-per-device", "4", "--json"};
  auto with = [&](std::vector<std::string> extra) {
    auto f = base;
    f.insert(f.end(), extra.begin(), extra.end());
    return run_dptwin(f, dir);
  };
  const CliResult bare = with({"--nodes", "4"}), filled = with({"--nodes", "4", "--devices", "8"});
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  ASSERT_EQ(filled.exit_code, 0) << filled.err;
  const auto b = nlohmann::json::parse(bare.out), f = nlohmann::json::parse(filled.out);
  EXPECT_EQ(b.at("devices"), 4);
  EXPECT_NE(b.at("warnings").dump().find("4 nodes of 1 GPU each"), std::string::npos) << b.at("warnings").dump();
  EXPECT_NE(b.at("warnings").dump().find("gpus: 32"), std::string::npos) << b.at("warnings").dump();
  EXPECT_EQ(f.at("warnings").dump().find("nodes of 1 GPU"), std::string::npos) << f.at("warnings").dump();
}

// The warnings of `dptwin predict --json` for a model file in `dir`, one GPU, on `hardware`,
// with `extra` flags; the prediction must succeed.
std::string predict_warnings(const fs::path& dir, const std::string& model, const std::string& hardware,
                             const std::string& batch, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"predict", "--hardware", hardware, "--model", model, "--strategy", "single",
                                   "--batch", batch, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = run_dptwin(args, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out).at("warnings").dump() : std::string();
}

// A Hugging Face config read without :seq= runs its position count as the sample: past 8,192
// tokens the prediction says so and how to name the training length; with :seq= it does not.
TEST(CliPredict, ALongDefaultSequenceIsNamed) {
  const fs::path dir = fresh_dir("predict-long-seq");
  write(dir / "cfg.json", R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
      "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 131072, "vocab_size": 100})");
  const std::string w = predict_warnings(dir, "hf:cfg.json", "dgx-h100", "1");
  EXPECT_NE(w.find("hf:cfg.json runs samples of 131072 tokens, its config's position count (max_position_embeddings); "
                   "name the sequence you train with hf:cfg.json:seq=N"),
            std::string::npos)
      << w;
  EXPECT_EQ(predict_warnings(dir, "hf:cfg.json:seq=4096", "dgx-h100", "1").find("position count"), std::string::npos);
}

// A layer type within a typo of a module dptwin knows ("BottleNeck", "GPT2Blok") is charged
// as a GEMM layer, not as the module meant (a review's ResNet-50 ran 1.87x slower, silently):
// the prediction names it with the module meant; the library's own file has no such warning.
TEST(CliPredict, AMisspelledLayerTypeIsNamed) {
  const fs::path dir = fresh_dir("predict-layer-type");
  const CliResult show = run_dptwin({"model", "show", "resnet50"}, dir);
  ASSERT_EQ(show.exit_code, 0) << show.err;
  std::string text = show.out;
  ASSERT_NE(text.find("type: Bottleneck"), std::string::npos);
  write(dir / "ok.yaml", text);
  for (size_t at = text.find("type: Bottleneck"); at != std::string::npos; at = text.find("type: Bottleneck", at))
    text.replace(at, 16, "type: BottleNeck");
  write(dir / "typo.yaml", text);
  auto warnings = [&](const char* file) { return predict_warnings(dir, file, "dgx-a100", "8"); };
  const std::string typo = warnings("typo.yaml");
  EXPECT_NE(typo.find("layer type 'BottleNeck'"), std::string::npos) << typo;
  EXPECT_NE(typo.find("did you mean 'Bottleneck'? Such a layer is charged as a GEMM layer"), std::string::npos) << typo;
  EXPECT_EQ(warnings("ok.yaml").find("no module dptwin knows"), std::string::npos);
}

// The optimizer's kernels as PyTorch runs them (--optimizer-impl). Invariant: the same AdamW
// update costs most as a for-loop (9 kernels a parameter, each dispatched), less as foreach
// (the same 23 tensor passes in multi-tensor launches), least fused (7 passes); foreach is the
// default and the step report names it; dptwin's own per-parameter kernel is no choice here.
TEST(CliPredict, OptimizerImplementationsChargeTheirKernels) {
  const fs::path dir = fresh_dir("predict-optimizer-impl");
  auto optimizer_s = [&](const std::vector<std::string>& extra, std::string* impl = nullptr) {
    std::vector<std::string> args = {"predict", "--hardware", "dgx-a100", "--model", "gpt2-124m", "--strategy",
                                     "single", "--devices", "1", "--batch-per-device", "1", "--optimizer", "adamw",
                                     "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_dptwin(args, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return 0.0;
    const auto j = nlohmann::json::parse(r.out);
    if (impl) *impl = j.at("optimizer_impl").get<std::string>();
    return j.at("breakdown_s").at("optimizer").get<double>();
  };
  std::string impl;
  const double by_default = optimizer_s({}, &impl);
  EXPECT_EQ(impl, "foreach");
  const double loop = optimizer_s({"--optimizer-impl", "for_loop"});
  const double each = optimizer_s({"--optimizer-impl", "foreach"});
  const double fused = optimizer_s({"--optimizer-impl", "fused"});
  EXPECT_EQ(by_default, each);
  EXPECT_GT(loop, each);
  EXPECT_GT(each, 2.5 * fused);  // 23 tensor passes against 7, less the launches they share
  const CliResult own = run_dptwin({"predict", "--hardware", "dgx-a100", "--model", "gpt2-124m", "--strategy",
                                    "single", "--devices", "1", "--batch-per-device", "1", "--optimizer-impl",
                                    "per_parameter"},
                                   dir);
  EXPECT_EQ(own.exit_code, 2);
}

// A hand-written Linear whose FLOPs are below one row's (8,192 for Linear(10, 4096), whose
// row is 2 x 10 x 4096 + 4096 = 86,016) is named; the right count says nothing.
TEST(CliPredict, ALinearBelowOneRowsFlopsIsNamed) {
  const fs::path dir = fresh_dir("predict-linear-flops");
  const CliResult show = run_dptwin({"model", "show", "mlp:10-4096-2"}, dir);
  ASSERT_EQ(show.exit_code, 0) << show.err;
  std::string text = show.out;
  write(dir / "ok.yaml", text);
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  replace("forward_flops_per_sample: 86016", "forward_flops_per_sample: 8192");
  replace("forward_flops_per_sample: 106498", "forward_flops_per_sample: 28674");  // the totals follow
  write(dir / "low.yaml", text);
  auto warnings = [&](const char* file) { return predict_warnings(dir, file, "dgx-a100", "8"); };
  EXPECT_NE(warnings("low.yaml").find("layer '0' (Linear, weight [4096, 10]) states forward_flops_per_sample 8192, "
                                      "less than one row's 2 x 10 x 4096 + 4096 = 86016"),
            std::string::npos)
      << warnings("low.yaml");
  EXPECT_EQ(warnings("ok.yaml").find("less than one row"), std::string::npos);
  // Output features that are no multiple of the weight's rows contradict it (a review's
  // weight [12, 64] with output_features 10 passed silently); the right count says nothing.
  text = show.out;
  replace("output_features: 4096\n    parameters:\n      - {name: weight, shape: [4096, 10]}",
          "output_features: 4000\n    parameters:\n      - {name: weight, shape: [4096, 10]}");
  write(dir / "out.yaml", text);
  EXPECT_NE(warnings("out.yaml").find("layer '0' (Linear, weight [4096, 10]) states output_features 4000, not a "
                                      "multiple of its 4096 output features per row"),
            std::string::npos)
      << warnings("out.yaml");
  EXPECT_EQ(warnings("ok.yaml").find("not a multiple"), std::string::npos);
}

// A profiled model names the optimizer its step ran: a prediction stepping another says so
// (predict's default sgd had run an adamw profile silently); the profile's own says nothing.
TEST(CliPredict, AnOptimizerOtherThanTheProfilesIsSaid) {
  const fs::path dir = fresh_dir("predict-profile-optimizer");
  // The library's test profile (measured with adamw), with times for its ReLU layer too.
  write(dir / "p.yaml", profile_yaml("", "    forward_s: 0.001\n    backward_s: 0.001\n"));
  auto warnings = [&](const std::vector<std::string>& extra) {
    return predict_warnings(dir, "p.yaml", "dgx-h100", "4", extra);
  };
  EXPECT_NE(warnings({}).find("model Net was profiled stepping adamw; this prediction steps sgd (--optimizer adamw "
                              "matches the profile)"),
            std::string::npos)
      << warnings({});
  EXPECT_EQ(warnings({"--optimizer", "adamw"}).find("was profiled stepping"), std::string::npos);
}

// A configuration that runs out of memory has no step, so compare shows no breakdown of
// one: every time row reads n/a in its column, not 0 (which read as a free step).
TEST(CliCompare, OutOfMemoryColumnHasNoBreakdown) {
  const fs::path dir = fresh_dir("compare-oom");
  const std::string base = "schema_version: 1\nhardware: dgx-a100\nmodel: gpt2-1.5b\nstrategy: ddp\ndevices: 8\n";
  write(dir / "ok.yaml", base + "batch_per_device: 1\n");
  write(dir / "oom.yaml", base + "batch_per_device: 64\n");
  const CliResult r = run_dptwin({"compare", "ok.yaml", "oom.yaml"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"compute", "exposed communication", "dispatch", "interference", "optimizer"}) {
    const auto at = r.out.find(std::string("\n") + name + "  ");  // the label alone, padded (not "optimizer type")
    ASSERT_NE(at, std::string::npos) << name << "\n" << r.out;
    const std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_EQ(line.substr(line.size() - 3), "n/a") << line;
    EXPECT_EQ(line.find(" 0 "), std::string::npos) << line;
  }
  // Parameters alone too big (llama-2-7b in f32 with AdamW: 7e9 x 16 bytes on an 80 GiB
  // A100) is a column too, with the configuration it was, not an error that drops the
  // table; the report's table has the out-of-memory row the answer points to.
  write(dir / "static.yaml", "schema_version: 1\nhardware: dgx-a100\nmodel: llama-2-7b\nstrategy: ddp\ndevices: 8\n"
                             "batch_per_device: 2\noptimizer: adamw\n");
  const CliResult s = run_dptwin({"compare", "ok.yaml", "static.yaml", "--report", "rep"}, dir);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("every GPU"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("16/2"), std::string::npos) << s.out;  // batch (global/per GPU) as configured
  std::ifstream md(dir / "rep" / "report.md");
  const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("out of memory"), std::string::npos) << text;
  EXPECT_NE(text.find("every GPU"), std::string::npos) << text;
}

// A point whose parameters alone do not fit keeps the configuration it was in the results
// (GPUs, batches), as one that runs out of memory in the step does: it read "0x ... runs
// out of memory" with 0 GPUs and batch 0. Found by an outside-user review.
TEST(CliSweep, OutOfMemoryBeforeTheStepKeepsTheConfiguration) {
  const fs::path dir = fresh_dir("sweep-static-oom");
  write(dir / "s.yaml", "schema_version: 1\nhardware: dgx-a100\nmodel: llama-2-7b\nstrategy: ddp\n"
                        "batch_per_device: 2\noptimizer: adamw\nsweep:\n  gpus: [8, 16]\n");
  const CliResult r = run_dptwin({"sweep", "s.yaml", "--json"}, dir);
  ASSERT_EQ(r.exit_code, 1) << r.err;  // every point out of memory
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("points").size(), 2u);
  for (const auto& p : j.at("points")) {
    EXPECT_EQ(p.at("status"), "out_of_memory");
    EXPECT_EQ(p.at("devices"), 8) << p.dump();
    EXPECT_EQ(p.at("batch_per_device"), 2) << p.dump();
  }
  EXPECT_EQ(j.at("points")[1].at("nodes"), 2);
  EXPECT_EQ(j.at("points")[1].at("batch_global"), 32);
}

TEST(CliOutputs, FailedRunsLeaveConsistentOutputs) {
  const fs::path dir = fresh_dir("failed_outputs");
  const std::vector<std::string> ddp8 = {"--hardware", "dgx-a100", "--strategy", "ddp", "--devices", "8"};
  const auto predict = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"predict"};
    args.insert(args.end(), ddp8.begin(), ddp8.end());
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--out", "k.json", "--trace", "t.json"});
    return run_dptwin(args, dir);
  };
  const CliResult ok = predict({"--model", "resnet50", "--batch-per-device", "32"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_FALSE(nlohmann::json::parse(test::slurp(dir / "t.json")).at("traceEvents").empty());
  struct Case {
    std::vector<std::string> flags;
    std::string model;
  };
  for (const Case& c : {Case{{"--model", "gpt2-1.5b", "--batch-per-device", "16"}, "gpt2-1.5b"},
                        Case{{"--model", "llama-2-7b", "--batch-per-device", "1", "--optimizer", "adamw", "--json"},
                             "llama-2-7b"}}) {
    const CliResult oom = predict(c.flags);
    EXPECT_EQ(oom.exit_code, 1) << c.model << "\n" << oom.err;
    const auto report = nlohmann::json::parse(test::slurp(dir / "k.json"));
    EXPECT_EQ(report.at("model"), c.model);
    EXPECT_FALSE(report.at("out_of_memory").is_null()) << c.model;
    const auto trace = nlohmann::json::parse(test::slurp(dir / "t.json"));
    EXPECT_TRUE(trace.at("traceEvents").empty()) << c.model;
    EXPECT_NE(trace.at("otherData").at("dptwin").get<std::string>().find("out of memory"), std::string::npos);
  }
  // The pre-step one printed its report for --json (the second case).
  EXPECT_FALSE(nlohmann::json::parse(test::slurp(dir / ".stdout")).at("out_of_memory").is_null());
  // A sweep whose every point fails (a wall-clock budget no point meets) keeps the earlier results.
  const std::string sweep = std::string(DPT_SOURCE_DIR) + "/scenarios/whatif/bucket-size.yaml";
  ASSERT_EQ(run_dptwin({"sweep", sweep, "-o", "sw.json", "--jobs", "2"}, dir).exit_code, 0);
  const std::string before = test::slurp(dir / "sw.json");
  const CliResult failed =
      run_dptwin_with({"sweep", sweep, "-o", "sw.json", "--jobs", "2"}, dir, [] { ::setenv("DPTWIN_SIM_WALL_S", "0.001", 1); });
  EXPECT_EQ(failed.exit_code, 3) << failed.err;
  EXPECT_NE(failed.err.find("sw.json left as it was"), std::string::npos) << failed.err;
  EXPECT_EQ(test::slurp(dir / "sw.json"), before);
}

// Every scenarios/... file the READMEs name exists, and the README's degraded-node
// sample (verify --as-measured) finds the slow link it plants.
TEST(CliReadme, SamplesAreShippedAndRun) {
  const std::regex path(R"(scenarios/[A-Za-z0-9_./-]+\.(yaml|json))");
  std::set<std::string> named;
  for (const char* readme : {"README.md", "scenarios/README.md"}) {
    const std::string text = slurp(kSource / readme);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), path); it != std::sregex_iterator(); ++it)
      if (!std::regex_search(it->str(), std::regex("[A-Z]{2,}"))) named.insert(it->str());  // not NAME.yaml
  }
  EXPECT_TRUE(named.count("scenarios/faults/dgx1-slow-link.yaml"));
  for (const auto& p : named) EXPECT_TRUE(fs::exists(kSource / p)) << p << " is named in a README but not shipped";
  const CliResult r = run_dptwin({"verify", "--backend", "sim", "--hardware", "dgx1-v100", "--devices", "4", "--only",
                                  "performance", "--as-measured",
                                  (kSource / "scenarios/faults/dgx1-slow-link.yaml").string()},
                                 fresh_dir("slow_link"));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // the planted slow link fails its checks
  EXPECT_NE(r.out.find("FAIL  performance.peer_bandwidth.gpu1->gpu2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.40 of predicted"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("no machine was measured"), std::string::npos) << r.out;  // a degraded twin stands in
  // Without --as-measured the sim backend measures the twin of its own file: it says so
  // before the checks, in the verdict and in the JSON (it had read as a node's PASSED).
  const CliResult self = run_dptwin({"verify", "--backend", "sim", "--hardware", "dgx1-v100", "--devices", "2",
                                     "--only", "performance"},
                                    fresh_dir("sim_self"));
  EXPECT_EQ(self.exit_code, 0) << self.out << self.err;
  EXPECT_NE(self.out.find("note: backend sim without --as-measured"), std::string::npos) << self.out;
  EXPECT_NE(self.out.find("PASSED (the twin against its own file: no machine was measured)"), std::string::npos)
      << self.out;
}

// A fault file names its machine with `base:`; anything else beside `faults:` is an
// error naming the file and key, as is a fault outside the base machine.
TEST(CliFaults, BaseFileErrorsNameFileAndKey) {
  const fs::path dir = fresh_dir("faults");
  const std::string fault = "faults:\n  - {link: [1, 2], bandwidth_factor: 0.4}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"base: dgx1-v100\n" + fault + "gpus_per_node: 4\n", "gpus_per_node"},
      {"base: dgx-h200\n" + fault, "unknown hardware 'dgx-h200'"},
      {"base: dgx1-v100\nfaults:\n  - {link: [1, 9], bandwidth_factor: 0.4}\n", "GPU 9 is not in this machine"},
  };
  for (const auto& [text, message] : cases) {
    write(dir / "bad.yaml", text);
    const CliResult r = run_dptwin({"verify", "--backend", "sim", "--hardware", "dgx1-v100", "--devices", "2",
                                    "--only", "performance", "--as-measured", "bad.yaml"},
                                   dir);
    EXPECT_EQ(r.exit_code, 2) << text << r.out;
    EXPECT_NE(r.err.find("bad.yaml"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

// A report made from a results file, or from merged shards, states the hardware
// overrides the points ran with and that the figures are simulated, as the sweep's own
// report does: they read "none" and had no Assumptions section (found by an outside-user
// review).
TEST(CliReport, ReportsFromResultsAndShardsKeepTheAssumptions) {
  const fs::path dir = fresh_dir("report-assumptions");
  write(dir / "s.yaml", "schema_version: 1\nname: s\nhardware: dgx-a100\nmodel: resnet50\nstrategy: ddp\n"
                        "batch_per_device: 32\nsweep:\n  devices: [1, 2]\n");
  ASSERT_EQ(run_dptwin({"sweep", "s.yaml", "--override", "gpu.memory=40 GiB", "-o", "r.json"}, dir).exit_code, 0);
  ASSERT_EQ(run_dptwin({"report", "r.json", "--report", "from-results"}, dir).exit_code, 0);
  EXPECT_NE(slurp(dir / "from-results" / "report.md").find("| hardware overrides | gpu.memory = 40 GiB |"),
            std::string::npos);
  for (const char* shard : {"0/2", "1/2"})
    ASSERT_EQ(run_dptwin({"sweep", "s.yaml", "--override", "gpu.memory=40 GiB", "--shard", shard, "-o",
                          std::string("shard-") + shard[0] + ".json"},
                         dir)
                  .exit_code,
              0);
  ASSERT_EQ(run_dptwin({"merge", "shard-0.json", "shard-1.json", "--report", "merged"}, dir).exit_code, 0);
  const std::string merged = slurp(dir / "merged" / "report.md");
  EXPECT_NE(merged.find("| hardware overrides | gpu.memory = 40 GiB |"), std::string::npos) << merged;
  EXPECT_NE(merged.find("simulated by the dptwin twin"), std::string::npos) << merged;
}

}  // namespace
}  // namespace dpt::test
