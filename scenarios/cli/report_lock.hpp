// One writer per report directory. Two commands writing a report into the same
// directory at once would leave a mixed report (the HTML of one, the Markdown of the
// other); the second one is refused instead, before it runs anything. The lock is
// flock(2) on DIR/.dptwin-report.lock, held from before the run (which writes the
// traces into DIR/traces) until the report is written, and released by the kernel
// when the process ends however it ends.
#pragma once
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "scenarios/cli/flag_limits.hpp"

namespace dpt::cli {

class ReportDirLock {
 public:
  ReportDirLock() = default;
  // Takes the lock of `dir` (created if missing); `flag` names the option in errors.
  // An empty dir takes nothing.
  ReportDirLock(const std::string& flag, const std::string& dir) {
    if (dir.empty()) return;
    limits::require_output_dir(flag, dir);
    std::error_code ec;
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
    const std::string lock = (std::filesystem::path(dir) / kLockName).string();
    fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error(fmt::format("{} {}: cannot open {}: {}", flag, dir, lock, std::strerror(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK)
        throw std::invalid_argument(fmt::format("{} {}: another dptwin is writing a report into this directory (it "
                                                "holds {}); wait for it or choose another directory",
                                                flag, dir, lock));
      throw std::runtime_error(fmt::format("{} {}: cannot lock {}: {}", flag, dir, lock, std::strerror(err)));
    }
  }
  ReportDirLock(const ReportDirLock&) = delete;
  ReportDirLock& operator=(const ReportDirLock&) = delete;
  ReportDirLock(ReportDirLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ReportDirLock& operator=(ReportDirLock&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~ReportDirLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  static constexpr const char* kLockName = ".dptwin-report.lock";

 private:
  int fd_ = -1;
};

}  // namespace dpt::cli
