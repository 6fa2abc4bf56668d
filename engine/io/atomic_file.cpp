// The one output writer: see atomic_file.hpp.
#include "engine/io/atomic_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace dpt {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTempTag = ".dptwin-tmp.";
constexpr int kMaxLinkHops = 40;  // as the kernel's ELOOP limit

enum class Kind { absent, regular, stream, directory, block_device };

// Paths the kernel resolves to an already open descriptor: always streams, never
// renamed over (a shell's `> file` would otherwise lose its file).
bool is_descriptor_path(const std::string& path) {
  for (const char* p : {"/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/fd/"})
    if (path.rfind(p, 0) == 0) return true;
  return false;
}

Kind kind_of(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return Kind::regular;
  if (S_ISDIR(st.st_mode)) return Kind::directory;
  if (S_ISBLK(st.st_mode)) return Kind::block_device;
  return Kind::stream;  // FIFO, character device, socket
}

struct Resolved {
  std::string path;  // the file to write: the last link's target
  Kind kind = Kind::absent;
  mode_t mode = 0644;  // kept when a regular file is replaced
};

// Follows symbolic links one hop at a time, so a dangling link names the file to create.
Resolved resolve(const std::string& path, const std::string& flag) {
  Resolved r;
  r.path = path;
  if (is_descriptor_path(path)) {
    r.kind = Kind::stream;
    return r;
  }
  fs::path p(path);
  for (int hop = 0;; ++hop) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      const int err = errno;
      // The path's own fault, known before any run: a name past NAME_MAX or PATH_MAX, a
      // file where a folder must be, a link loop among the folders above.
      if (err == ENAMETOOLONG)
        throw std::invalid_argument(fmt::format("{} {}: the file name is too long for the file system", flag, path));
      if (err == ENOTDIR) {
        fs::path q = p.parent_path();
        std::error_code ec;
        while (!q.empty() && q != q.parent_path() && !fs::is_regular_file(q, ec) && !fs::exists(fs::symlink_status(q, ec)))
          q = q.parent_path();
        throw std::invalid_argument(fmt::format("{} {}: {} is not a directory", flag, path, q.string()));
      }
      if (err == ELOOP)
        throw std::invalid_argument(fmt::format("{} {}: a symbolic-link loop in the folders above the file", flag, path));
      r.path = p.string();
      return r;  // absent (or unreadable: the write reports why)
    }
    if (!S_ISLNK(st.st_mode)) {
      r.path = p.string();
      r.kind = kind_of(st);
      r.mode = st.st_mode & 07777;
      return r;
    }
    if (hop == kMaxLinkHops)
      throw std::invalid_argument(fmt::format("{} {}: more than {} symbolic links in a row", flag, path, kMaxLinkHops));
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) throw std::runtime_error(fmt::format("{}: cannot read symbolic link {}: {}", path, p.string(), ec.message()));
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
}

void refuse(const Resolved& r, OutputKind kind, const std::string& path, const std::string& flag) {
  const std::string via = r.path == path ? "" : fmt::format(" (a link to {})", r.path);
  if (r.kind == Kind::directory)
    throw std::invalid_argument(fmt::format("{} {}{}: is a directory; give a file name", flag, path, via));
  if (r.kind == Kind::block_device)
    throw std::invalid_argument(fmt::format("{} {}{}: is a block device; refusing to write to it", flag, path, via));
  if (r.kind == Kind::stream && kind == OutputKind::replaceable)
    throw std::invalid_argument(fmt::format(
        "{} {}{}: is a FIFO, device or pipe; this output is read back later and must be a regular file", flag, path,
        via));
}

std::runtime_error io_error(const std::string& path, const std::string& what, int err) {
  return std::runtime_error(fmt::format("{}: {}: {}", path, what, std::strerror(err)));
}

// A file-size limit (RLIMIT_FSIZE) would otherwise kill the process with SIGXFSZ in the
// middle of a write; ignored, the write fails with EFBIG and is reported like a full disk.
void ignore_file_size_signal() {
  static const bool ignored = [] {
    ::signal(SIGXFSZ, SIG_IGN);
    return true;
  }();
  (void)ignored;
}

void write_all(int fd, std::string_view bytes, const std::string& path, const char* what) {
  ignore_file_size_signal();
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw io_error(path, what, errno);
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
}

// Straight through to a FIFO, device or pipe. O_NONBLOCK on open makes a FIFO without
// a reader fail with ENXIO instead of blocking forever; the write itself then blocks.
void write_stream(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENXIO) throw std::runtime_error(fmt::format("{}: a FIFO with no reader; start the reader first", path));
    throw io_error(path, "cannot open for writing", errno);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) (void)::ftruncate(fd, 0);  // /dev/stdout onto a file
  try {
    write_all(fd, bytes, path, "write failed");
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw io_error(path, "close failed", errno);
}

std::string temp_name_prefix(const fs::path& target) {
  // Kept within NAME_MAX (255) for any target name, with room for the pid.
  std::string name = target.filename().string().substr(0, 200);
  std::string out(".");
  out += name;
  out += kTempTag;
  return out;
}

// Removes `.NAME.dptwin-tmp.<pid>` files beside `target` whose writer is gone.
void remove_stale_temps(const fs::path& dir, const fs::path& target) {
  const std::string prefix = temp_name_prefix(target);
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const long pid = std::stol(digits);
    if (pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) (void)::unlinkat(::dirfd(d), name.c_str(), 0);
  }
  ::closedir(d);
}

void write_replacing(const Resolved& r, std::string_view bytes, const std::string& shown) {
  const fs::path target(r.path);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  remove_stale_temps(dir, target);
  const std::string tmp = atomic_temp_path(r.path, static_cast<long>(::getpid()));
  // Our own name: a leftover of this pid (a reused pid, or an earlier failure) goes first.
  (void)::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw std::runtime_error(fmt::format("{}: cannot create a temporary file in {}: {}", shown, dir.string(),
                                         std::strerror(errno)));
  auto fail = [&](const char* step) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return std::runtime_error(
        fmt::format("{}: {} failed: {} (previous file left unchanged)", shown, step, std::strerror(err)));
  };
  // A new file is an ordinary 0644 file; a replaced one keeps its mode.
  if (::fchmod(fd, r.kind == Kind::regular ? r.mode : 0644) != 0) throw fail("fchmod");
  try {
    write_all(fd, bytes, shown, "write");
  } catch (const std::runtime_error&) {
    throw fail("write");
  }
  if (::fsync(fd) != 0) throw fail("fsync");
  const int rc = ::close(fd);
  fd = -1;
  if (rc != 0) throw fail("close");
  if (::rename(tmp.c_str(), r.path.c_str()) != 0) throw fail("rename");
  // Make the rename itself durable. The new file is already in place, so a failure
  // here cannot be reported as "not written"; it only weakens crash durability.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

// True when no process `pid` exists (not this one; a process of another user is alive).
bool process_gone(long pid) {
  if (pid <= 0 || pid == static_cast<long>(::getpid())) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

void remove_dead_writers_leftovers(const std::string& dir, const std::string& prefix, char sep) {
  std::vector<std::string> dead;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const auto end = sep == '\0' ? std::string::npos : rest.find(sep);
    if (sep != '\0' && end == std::string::npos) continue;
    const std::string digits = rest.substr(0, end);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    if (process_gone(std::stol(digits))) dead.push_back(name);
  }
  ::closedir(d);
  for (const auto& name : dead) {
    std::error_code ec;
    fs::remove_all(fs::path(dir) / name, ec);  // best effort: a leftover never fails a run
  }
}

std::string make_run_temp_dir(const std::string& prefix) {
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  if (ec) throw std::runtime_error(fmt::format("no temporary folder: {}", ec.message()));
  remove_dead_writers_leftovers(base.string(), prefix + "-", '-');
  std::string tmpl = (base / fmt::format("{}-{}-XXXXXX", prefix, ::getpid())).string();
  if (!::mkdtemp(tmpl.data()))
    throw std::runtime_error(fmt::format("cannot create a temporary folder in {}: {}", base.string(), std::strerror(errno)));
  return tmpl;
}

std::string atomic_temp_path(const std::string& target, long pid) {
  const fs::path t(target);
  return (t.parent_path() / (temp_name_prefix(t) + std::to_string(pid))).string();
}

void check_output_path(const std::string& path, OutputKind kind, const std::string& flag) {
  if (path.empty()) throw std::invalid_argument(fmt::format("{}: empty file name", flag));
  const Resolved r = resolve(path, flag);
  refuse(r, kind, path, flag);
  // A replaceable output's folder is never created (WriteOptions), so a missing one fails
  // now, before a run whose result it would lose.
  if (kind == OutputKind::replaceable && r.kind != Kind::stream) {
    const fs::path parent = fs::path(r.path).parent_path();
    std::error_code ec;
    if (!parent.empty() && !fs::is_directory(parent, ec))
      throw std::invalid_argument(fmt::format("{} {}: folder {} does not exist (it is not created, as torch.save "
                                              "does not create it)",
                                              flag, path, parent.string()));
  }
}

void write_file_atomic(const std::string& path, std::string_view bytes, const WriteOptions& options) {
  if (path.empty()) throw std::invalid_argument("output file name is empty");
  const Resolved r = resolve(path, "output");
  refuse(r, options.kind, path, "output");
  if (r.kind == Kind::stream) return write_stream(r.path, bytes);
  const fs::path parent = fs::path(r.path).parent_path();
  if (options.create_parent_dirs && !parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw std::runtime_error(fmt::format("{}: cannot create directory {}: {}", path, parent.string(), ec.message()));
  }
  write_replacing(r, bytes, path);
}

void write_file_atomic(const std::string& path, const std::vector<std::byte>& bytes, const WriteOptions& options) {
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), options);
}

}  // namespace dpt
