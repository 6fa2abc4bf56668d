// dptwin calibrate: turns measurements into a hardware file through the one calibrator
// (scenarios/measure/calibrate.hpp). `--from FILE` reads nccl-tests' own
// all_reduce_perf / all_gather_perf output and scales the efficiency field of the link
// that bounds each collective until the twin reproduces the log; or one
// `dptwin bench --out` JSON file, whose microbenchmarks set the efficiency fields
// against the datasheet rates.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "scenarios/cli/command.hpp"
#include "scenarios/cli/flag_limits.hpp"
#include "scenarios/cli/library_dir.hpp"
#include "scenarios/measure/calibrate.hpp"
#include "scenarios/verify/verify_check.hpp"
#include "sim/net/hardware.hpp"
#include "sim/twin/step_report.hpp"

namespace dpt::cli::cmd_calibrate {  // a namespace per command: unity batches join anonymous ones
namespace {

struct CalibrateFlags {
  std::vector<std::string> from;
  std::string hardware;
  std::string out;
  std::string op;
};

int run_calibrate(const CalibrateFlags& f) {
  limits::require_output_file("--out", f.out);  // refused before the work, not at the write
  // One log given twice (or by two names of one file) was read twice, as two measurements.
  for (size_t i = 0; i < f.from.size(); ++i)
    for (size_t j = i + 1; j < f.from.size(); ++j) {
      std::error_code ec;
      if (f.from[i] == f.from[j] || (std::filesystem::is_regular_file(f.from[i], ec) &&
                                     std::filesystem::is_regular_file(f.from[j], ec) &&
                                     limits::same_file(f.from[i], f.from[j])))
        throw std::invalid_argument(
            fmt::format("--from {}: the same file as --from {}; give each measurement once", f.from[j], f.from[i]));
    }
  const auto library = scenarios_dir() / "hardware";
  const sim::HardwareSpec base = sim::load_hardware(f.hardware, library);
  // The output never replaces an input: the hardware file it calibrates (a library file,
  // whose sources and comments the calibrated file does not keep) or a measurement.
  if (!f.out.empty()) {
    std::error_code ec;
    const auto same = [&](const std::string& input) {
      return !input.empty() && std::filesystem::is_regular_file(input, ec) && limits::same_file(f.out, input);
    };
    if (same(base.source_file))
      throw std::invalid_argument(fmt::format("--out {}: is the hardware file it calibrates ({}); write the calibrated "
                                              "file elsewhere and keep the original with its sources",
                                              f.out, base.source_file));
    for (const auto& m : f.from)
      if (same(m))
        throw std::invalid_argument(fmt::format("--out {}: is the measurement it calibrates from (--from {})", f.out, m));
  }
  std::string base_yaml;
  if (!base.source_file.empty()) {
    std::ifstream in(base.source_file);
    base_yaml.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const CalibratedHardware r = calibrate_hardware(
      base, base_yaml,
      {f.from, f.op.empty() ? std::nullopt : std::optional<std::string>(f.op), verify::utc_timestamp_now()});
  // With the file on stdout, what was read and changed goes to stderr: `calibrate ... >
  // my.yaml` writes a hardware file that loads (the summary had made it invalid YAML).
  std::ostream& said = f.out.empty() ? std::cerr : std::cout;
  for (const auto& line : r.read) said << line << "\n";
  for (const auto& line : r.changes) said << line << "\n";
  if (f.out.empty()) {
    std::cout << r.yaml;
  } else {
    write_file_atomic(f.out, r.yaml, {.create_parent_dirs = true});
    std::cout << "calibrated hardware file written to " << f.out << "\n";
  }
  return kExitOk;
}

Registration reg{"calibrate", [](CLI::App& parent) -> RunFn {
  auto flags = std::make_shared<CalibrateFlags>();
  CLI::App* app = parent.add_subcommand(
      "calibrate", "Calibrate a hardware file from measurements: nccl-tests logs (all_reduce_perf, "
                   "all_gather_perf output) set the efficiency of the link that bounds each collective (or the "
                   "host-staged rate where NCCL runs SHM), and NCCL's latency scale; a "
                   "`dptwin bench --out` JSON file sets the efficiencies its microbenchmarks measure.");
  app->add_option("--from", flags->from, "nccl-tests output file(s), or one dptwin bench JSON file")
      ->required()
      ->check(CLI::ExistingFile);
  app->add_option("--hardware", flags->hardware, "The hardware file to calibrate (library name or path)")
      ->required();
  app->add_option("-o,--out", flags->out, "Where to write the calibrated hardware file (default: print it)");
  app->add_option("--op", flags->op,
                  "The collective, for logs that do not name it (older nccl-tests): all_reduce | all_gather")
      ->check(CLI::IsMember({"all_reduce", "all_gather"}));
  app->footer("Examples:\n"
              "  all_reduce_perf -b 8 -e 8G -f 2 -g 8 > all_reduce_perf.log    # nccl-tests on the node\n"
              "  dptwin calibrate --from all_reduce_perf.log --hardware dgx-h100 -o node17.yaml\n"
              "  dptwin predict --hardware node17.yaml --model gpt2-124m --strategy ddp --devices 8 --batch-per-device 8\n"
              "  dptwin bench --backend cuda --out node17-bench.json      # microbenchmarks on the node\n"
              "  dptwin calibrate --from node17-bench.json --hardware dgx-h100 -o node17.yaml\n\n" +
              exit_codes_help());
  return [flags] { return run_calibrate(*flags); };
}};

}  // namespace
}  // namespace dpt::cli::cmd_calibrate
