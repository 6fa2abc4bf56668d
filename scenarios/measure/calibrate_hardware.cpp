// `dptwin calibrate`'s one entry point: each --from file is told apart by its content
// (bench JSON or an nccl-tests log) and handed to the calibrator of that input.
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/io/input_file.hpp"
#include "scenarios/measure/calibrate.hpp"
#include "scenarios/measure/calibrate_bench.hpp"
#include "scenarios/measure/calibrate_nccl.hpp"

namespace dpt {
namespace {
// Below this fraction of a link's rate a calibrated efficiency is flagged (see changes).
constexpr double kLowEfficiency = 0.05;


// The file's JSON when it is a JSON object (bench output), else nothing (an nccl-tests log).
std::optional<nlohmann::json> json_object_in(const std::string& path) {
  require_regular_input(path, path);
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot be read", path));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') return std::nullopt;
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
}

std::string log_summary(const NcclTestsLog& log) {
  std::string s = fmt::format("{}: {} on {} ranks{}, {} sizes ({} to {} B)", log.where, log.collective, log.ranks,
                              log.device_names.empty() ? "" : " (" + log.device_names.front() + ")", log.rows.size(),
                              log.rows.front().size_bytes, log.rows.back().size_bytes);
  for (const auto& w : log.nccl_warnings) s += "\n  warning: " + w;
  return s;
}

void from_bench(const sim::HardwareSpec& base, const std::string& base_yaml, const DeviceBenchResult& bench,
                const std::string& where, CalibratedHardware& out) {
  const BenchCalibration r = calibrate_from_bench(base, base_yaml, bench, where);
  out.spec = r.spec;
  out.yaml = r.yaml;
  for (const auto& f : r.fields)
    out.changes.push_back(fmt::format("efficiency.{} {:.4g} -> {:.4g}: {}{}", f.field, f.before, f.after, f.source,
                                      f.capped ? " (capped at 1: faster than the datasheet)" : ""));
}

void from_logs(const sim::HardwareSpec& base, const std::vector<NcclTestsLog>& logs, const std::string& date,
               CalibratedHardware& out) {
  const NcclCalibrationResult r = calibrate_from_nccl_logs(base, logs, date);
  out.spec = r.spec;
  out.yaml = r.yaml;
  for (const auto& note : r.notes) out.changes.push_back("note: " + note);
  for (const auto& fc : r.fields) {
    // The host-staged rate is in bytes per second (shown in GB/s); the others are fractions.
    const bool rate = fc.field == "pcie.staged_bidirectional";
    const std::string before = rate ? fmt::format("{:.4g} GB/s", fc.before / 1e9) : fmt::format("{:.4g}", fc.before);
    const std::string after = rate ? fmt::format("{:.4g} GB/s", fc.after / 1e9) : fmt::format("{:.4g}", fc.after);
    if (!fc.fitted) {
      out.changes.push_back(fmt::format("{} {}: not calibrated: {}", fc.field, before, fc.bound));
      continue;
    }
    out.changes.push_back(fmt::format("{} {} -> {}: {} busbw at {} B measured {:.4g} GB/s, twin {:.4g} -> "
                                      "{:.4g} GB/s{}",
                                      fc.field, before, after, fc.collective, fc.size_bytes,
                                      fc.measured_busbw_Bps / 1e9, fc.predicted_before_Bps / 1e9,
                                      fc.predicted_after_Bps / 1e9,
                                      fc.reached ? "" : " (cannot reach: " + fc.bound + ")"));
    if (!fc.note.empty()) out.changes.push_back("note: " + fc.note);
    // An efficiency this low is a machine running another way than its file says (SHM where
    // the file has P2P, a link trained down, a throttled GPU) more often than a slow link:
    // written, but said.
    if (!rate && fc.field.rfind("efficiency.", 0) == 0 && fc.field != "efficiency.nccl_latency" &&
        fc.after < kLowEfficiency)
      out.changes.push_back(fmt::format(
          "warning: {} {:.4g} is under {}: the log ran about {:.0f}x slower than the file's links allow; check that "
          "it ran as the file describes (NCCL_P2P_DISABLE: the file's nccl_p2p_disable; NCCL_ALGO/NCCL_PROTO; the "
          "transport NCCL_DEBUG=INFO names)",
          fc.field, fc.after, kLowEfficiency, fc.before / fc.after));
  }
}

}  // namespace

CalibratedHardware calibrate_hardware(const sim::HardwareSpec& base, const std::string& base_yaml,
                                      const CalibrationInputs& inputs) {
  if (inputs.files.empty()) throw std::invalid_argument("calibrate: no input file given");
  CalibratedHardware out;
  std::vector<NcclTestsLog> logs;
  std::optional<DeviceBenchResult> bench;
  std::string bench_where;
  for (const auto& path : inputs.files) {
    if (const auto j = json_object_in(path)) {
      if (bench)
        throw std::invalid_argument(fmt::format("{}: a second bench file (the first: {}); calibrate from one bench "
                                                "run at a time",
                                                path, bench_where));
      bench = device_bench_from_json(*j, path);
      bench_where = path;
      out.read.push_back(fmt::format("{}: dptwin bench --backend {} on {} ({} devices, {})", path, bench->backend,
                                     bench->hostname, bench->device_names.size(), bench->date));
    } else {
      logs.push_back(read_nccl_tests_log(path, inputs.op));
      out.read.push_back(log_summary(logs.back()));
    }
  }
  if (bench && !logs.empty())
    throw std::invalid_argument(fmt::format("{}: a bench file cannot be mixed with nccl-tests logs ({}); calibrate "
                                            "from one, then pass its output as --hardware for the other",
                                            bench_where, logs.front().where));
  if (bench) from_bench(base, base_yaml, *bench, bench_where, out);
  else from_logs(base, logs, inputs.date, out);
  return out;
}

}  // namespace dpt
