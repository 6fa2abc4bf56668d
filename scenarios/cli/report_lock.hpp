// One writer per report directory. Two commands writing a report into the same
// directory at once would leave a mixed report (the HTML of one, the Markdown of the
// other); the second one is refused instead, before it runs anything. The lock is
// flock(2) on the directory itself, held from before the run (which writes the traces
// into DIR/traces) until the report is written, and released by the kernel when the
// process ends however it ends; it leaves no file behind (a lock file in DIR stayed after
// an interrupted run, and in the working directory after `--report .`).
//
// sweep, report and plan replace their report directory whole (report_document.hpp), so
// for them a directory that holds anything but a previous report (report.html or
// report.md) is refused before the run: `report --report ~/proj` had deleted the
// project's files.
#pragma once
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "scenarios/cli/flag_limits.hpp"

namespace dpt::cli {

class ReportDirLock {
 public:
  ReportDirLock() = default;
  // Takes the lock of `dir` (created if missing); `flag` names the option in errors.
  // An empty dir takes nothing. `replaces_whole`: the command replaces DIR whole (sweep,
  // report, plan), so a DIR holding anything but a previous report is refused; predict,
  // compare and merge write their files in place and keep the rest.
  ReportDirLock(const std::string& flag, const std::string& dir, bool replaces_whole = false) {
    if (dir.empty()) return;
    limits::require_output_dir(flag, dir);
    if (replaces_whole) refuse_foreign_contents(flag, dir);
    std::error_code ec;
    created_ = !std::filesystem::exists(dir, ec);
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      // A link loop, a name too long or a file in the way is the path's fault (exit 2); the
      // rest (permissions, a full disk) is the run failing (exit 3).
      const std::string what = fmt::format("{} {}: cannot create the directory: {}", flag, dir, ec.message());
      if (ec == std::errc::too_many_symbolic_link_levels || ec == std::errc::filename_too_long ||
          ec == std::errc::not_a_directory)
        throw std::invalid_argument(what);
      throw std::runtime_error(what);
    }
    dir_ = dir;
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error(fmt::format("{} {}: cannot open it: {}", flag, dir, std::strerror(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      created_ = false;  // the other writer's
      if (err == EWOULDBLOCK)
        throw std::invalid_argument(fmt::format("{} {}: another dptwin is writing a report into this directory (it "
                                                "holds the directory's lock); wait for it or choose another directory",
                                                flag, dir));
      throw std::runtime_error(fmt::format("{} {}: cannot lock it: {}", flag, dir, std::strerror(err)));
    }
  }
  ReportDirLock(const ReportDirLock&) = delete;
  ReportDirLock& operator=(const ReportDirLock&) = delete;
  ReportDirLock(ReportDirLock&& o) noexcept : fd_(o.fd_), created_(o.created_), dir_(std::move(o.dir_)) {
    o.fd_ = -1;
    o.created_ = false;
  }
  ReportDirLock& operator=(ReportDirLock&& o) noexcept {
    std::swap(fd_, o.fd_);
    std::swap(created_, o.created_);
    std::swap(dir_, o.dir_);
    return *this;
  }
  ~ReportDirLock() {
    if (fd_ >= 0) ::close(fd_);
    // A directory this lock created and the run left empty (it failed before the report):
    // removed, as if never asked for. rmdir leaves a directory with anything in it.
    if (created_) ::rmdir(dir_.c_str());
  }
  // Files of the lock's earlier versions (a lock file in DIR), not a user's.
  static constexpr const char* kOldLockName = ".dptwin-report.lock";

 private:
  // A report replaces DIR whole: refuse a directory holding anything else than a previous
  // report (report.html or report.md) or the lock file of an earlier dptwin. "." and ".."
  // are written in place (nothing removed) and pass.
  static void refuse_foreign_contents(const std::string& flag, const std::string& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::string name = dir;
    while (name.size() > 1 && name.back() == '/') name.pop_back();
    name = fs::path(name).filename().string();
    if (name == "." || name == ".." || !fs::is_directory(dir, ec)) return;
    std::vector<std::string> others;
    bool report = false;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if (n == "report.html" || n == "report.md") report = true;
      else if (n != kOldLockName) others.push_back(n + (e.is_directory(ec) ? "/" : ""));
    }
    if (report || others.empty()) return;
    std::sort(others.begin(), others.end());
    std::string listed;
    for (size_t i = 0; i < others.size() && i < 3; ++i) listed += (i ? ", " : "") + others[i];
    if (others.size() > 3) listed += fmt::format(" and {} more", others.size() - 3);
    throw std::invalid_argument(fmt::format("{} {}: the directory holds files that are not a dptwin report ({}); a "
                                            "report replaces its directory whole, so give a new or empty directory, "
                                            "or a previous report's",
                                            flag, dir, listed));
  }

  int fd_ = -1;
  bool created_ = false;
  std::string dir_;
};

}  // namespace dpt::cli
