// Limits on command-line values, checked before anything runs: a value out of
// range is std::invalid_argument naming the flag, the value and the limit (exit 2),
// never an allocation failure, a wrapped integer or a hang later on.
#pragma once
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "engine/core/units.hpp"

namespace dpt::cli::limits {

// Host "devices" are worker threads of this process: beyond this many the OS
// refuses threads (EAGAIN) long before the work means anything.
inline constexpr int kMaxHostDevices = 1024;

// DDP's bucket cap in MiB: at least one byte, at most 1 TiB.
inline constexpr double kMinBucketCapMb = 1.0 / (1024 * 1024);
inline constexpr double kMaxBucketCapMb = 1024.0 * 1024;

// What the kernel says this machine can still give (MemAvailable), or nullopt.
inline std::optional<Bytes> available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long long kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return static_cast<Bytes>(kib) * kKiB;
  return std::nullopt;
}

// "1.50 GiB", "3.2e+04 TiB": sizes in messages (GiB = 2^30 bytes).
inline std::string bytes_text(double bytes) {
  if (bytes < static_cast<double>(kKiB)) return fmt::format("{:.0f} B", bytes);
  if (bytes < static_cast<double>(kMiB)) return fmt::format("{:.2f} KiB", bytes / kKiB);
  if (bytes < static_cast<double>(kGiB)) return fmt::format("{:.2f} MiB", bytes / kMiB);
  if (bytes < 1024.0 * kGiB) return fmt::format("{:.2f} GiB", bytes / kGiB);
  return fmt::format("{:.3g} TiB", bytes / (1024.0 * kGiB));
}

// Refuses a run that needs more memory than the machine has available, before
// allocating: `what` says what needs it ("--model mlp:...: parameters, ...").
inline void require_memory(const std::string& what, double bytes_needed) {
  const auto available = available_memory_bytes();
  if (available && bytes_needed > static_cast<double>(*available))
    throw std::invalid_argument(fmt::format("{} need {} ({:.4g} bytes), this machine has {} available", what,
                                            bytes_text(bytes_needed), bytes_needed,
                                            bytes_text(static_cast<double>(*available))));
}

template <typename Int>
void require_int_in(const std::string& flag, Int value, Int lo, Int hi, const std::string& why = "") {
  if (value < lo || value > hi)
    throw std::invalid_argument(fmt::format("{} {}: must be in {}..{}{}", flag, value, lo, hi,
                                            why.empty() ? "" : " (" + why + ")"));
}

// A finite number in [lo, hi]; NaN and infinities are refused by name.
inline void require_finite_in(const std::string& flag, double value, double lo, double hi, const std::string& why = "") {
  if (!std::isfinite(value) || value < lo || value > hi)
    throw std::invalid_argument(fmt::format("{} {}: must be a finite number in {}..{}{}", flag, value, lo, hi,
                                            why.empty() ? "" : " (" + why + ")"));
}

// The first existing ancestor of `p` (p itself included) that is not a directory,
// if any: output folders cannot be created below it.
inline std::optional<std::filesystem::path> file_in_the_way(const std::filesystem::path& p) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::path q = p; !q.empty(); q = q.parent_path()) {
    const auto st = fs::status(q, ec);
    if (ec == std::errc::filename_too_long)
      throw std::invalid_argument(fmt::format("{}: the path is too long", q.string()));
    if (ec == std::errc::too_many_symbolic_link_levels)
      throw std::invalid_argument(fmt::format("{}: a symbolic-link loop", q.string()));
    if (fs::exists(st)) return fs::is_directory(st) ? std::nullopt : std::optional<fs::path>(q);
    if (q == q.parent_path()) break;
  }
  return std::nullopt;
}

// An output directory flag (--report, --trace-dir): it must be a directory or
// creatable as one.
inline void require_output_dir(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  (void)std::filesystem::status(path, ec);
  if (ec == std::errc::too_many_symbolic_link_levels)
    throw std::invalid_argument(fmt::format("{} {}: a symbolic-link loop", flag, path));
  if (const auto f = file_in_the_way(path))
    throw std::invalid_argument(f->string() == path
                                    ? fmt::format("{} {}: not a directory", flag, path)
                                    : fmt::format("{} {}: {} is not a directory", flag, path, f->string()));
}

// An output file flag (-o, --out, --trace): not a directory, and its folder must be
// a directory or creatable as one.
inline void require_output_file(const std::string& flag, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return;
  std::error_code ec;
  (void)fs::status(path, ec);  // a name past NAME_MAX or PATH_MAX would fail only at the write, after the run
  if (ec == std::errc::filename_too_long)
    throw std::invalid_argument(fmt::format("{} {}: the file name is too long for the file system", flag, path));
  if (fs::is_directory(path, ec))
    throw std::invalid_argument(fmt::format("{} {}: is a directory, expected a file name", flag, path));
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return;
  if (const auto f = file_in_the_way(parent))
    throw std::invalid_argument(fmt::format("{} {}: {} is not a directory", flag, path, f->string()));
}

// Whether two paths name one file, either perhaps not there yet: the same file when both
// exist (hard and symbolic links included), else the same absolute path once the symbolic
// links of its existing part are resolved and "." and ".." taken as written ("new/../a"
// is "a" whether or not "new" exists, as a writer that creates "new" finds).
inline bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::equivalent(a, b, ec) && !ec) return true;
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ea), ea), cb = fs::weakly_canonical(fs::absolute(b, eb), eb);
  return !ea && !eb && ca.lexically_normal() == cb.lexically_normal();
}

// A file named by a flag ("--out", "scenario", "--data").
struct FileFlag {
  std::string flag;
  std::string path;
};

// Outputs never replace an input, or each other (exit 2 naming both, before anything
// runs): `predict s.yaml -o s.yaml` would have overwritten the scenario with its report,
// and `predict -o x.json --trace x.json` kept one of the two. Inputs that are no file
// (library names, empty) are skipped; empty outputs are not given.
inline void refuse_shared_files(const std::vector<FileFlag>& outputs, const std::vector<FileFlag>& inputs) {
  namespace fs = std::filesystem;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const FileFlag& out = outputs[i];
    if (out.path.empty()) continue;
    for (const FileFlag& in : inputs) {
      std::error_code ec;
      if (in.path.empty() || !fs::is_regular_file(in.path, ec)) continue;
      if (same_file(out.path, in.path))
        throw std::invalid_argument(fmt::format("{} {}: is the {} it reads ({}); an output never replaces an input, "
                                                "write it elsewhere",
                                                out.flag, out.path, in.flag, in.path));
    }
    for (size_t j = i + 1; j < outputs.size(); ++j)
      if (!outputs[j].path.empty() && same_file(out.path, outputs[j].path))
        throw std::invalid_argument(fmt::format("{} {}: is also {} ({}); give each output its own file", out.flag,
                                                out.path, outputs[j].flag, outputs[j].path));
  }
}

// Whether `path` is folder `dir` or lies inside it, either perhaps not there yet (the
// same spelling rules as same_file).
inline bool inside_dir(const std::string& path, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ep, ed;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ep), ep).lexically_normal();
  const fs::path d = fs::weakly_canonical(fs::absolute(dir, ed), ed).lexically_normal();
  if (ep || ed) return false;
  auto pi = p.begin();
  for (auto di = d.begin(); di != d.end(); ++di, ++pi) {
    if (di->empty()) continue;  // a trailing separator
    if (pi == p.end() || *pi != *di) return false;
  }
  return true;
}

// A report folder is written two ways. `whole` (sweep, report, plan): replaced whole
// (report::ReportStaging), so an input inside it would be swapped out with the old folder
// and another output written there lost. In place (predict, merge, compare): its own files
// (report.html, report.md, points.csv, results.json, scenario.yaml, charts/) are replaced,
// and the rest is kept (`predict ... --report out/ --trace out/trace.json`). Either clash is
// refused before anything runs (exit 2 naming the file and the folder).
inline void refuse_in_report_dir(const std::string& report_dir, const std::vector<FileFlag>& outputs,
                                 const std::vector<FileFlag>& inputs, bool whole) {
  namespace fs = std::filesystem;
  if (report_dir.empty()) return;
  const auto clashes = [&](const std::string& path) {
    if (whole) return inside_dir(path, report_dir);
    for (const char* own : {"report.html", "report.md", "points.csv", "results.json", "scenario.yaml", "charts"})
      if (inside_dir(path, (fs::path(report_dir) / own).string())) return true;
    return false;
  };
  const std::string how = whole ? "which the report replaces whole" : "where the report writes that file";
  for (const FileFlag& out : outputs)
    if (!out.path.empty() && clashes(out.path))
      throw std::invalid_argument(
          fmt::format("{} {}: is inside --report {}, {}; write it elsewhere", out.flag, out.path, report_dir, how));
  for (const FileFlag& in : inputs) {
    std::error_code ec;
    if (in.path.empty() || !fs::exists(in.path, ec)) continue;
    if (clashes(in.path))
      throw std::invalid_argument(fmt::format("--report {}: holds the {} it reads ({}), {}; give the report another "
                                              "folder",
                                              report_dir, in.flag, in.path, how));
  }
}

}  // namespace dpt::cli::limits
