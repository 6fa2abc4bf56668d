// The one writer of every output file (checkpoints, reports, JSON, traces, tables).
//
// A regular file (or a new one) is replaced atomically: the bytes go to a temporary file
// beside it, named `.NAME.dptwin-tmp.<pid>`, which is fsynced and renamed over NAME,
// then the directory is fsynced. A reader sees the old file or the new one, never a
// part. On failure the temporary file is removed and the old file is left untouched.
// Temporary files that a killed writer left behind (their pid is no longer running) are
// removed by the next write of the same file.
//
// Paths that are not plain files:
// - a symbolic link is followed (chains too, and a dangling link creates its target):
//   the temporary file goes beside the TARGET and is renamed over the target, so the
//   link stays a link;
// - a FIFO, a character device, a socket or a pipe (/dev/stdout, /dev/fd/N,
//   /proc/self/fd/N) is a stream: OutputKind::stream writes straight through (no
//   temporary file, no rename; a FIFO without a reader is an error, not a hang), and
//   OutputKind::replaceable refuses it;
// - a directory or a block device is always refused (writing a disk is never meant).
// SIGXFSZ is ignored from the first write on, so a file-size limit is an error like a
// full disk (EFBIG), not a killed process.
// Refusals are std::invalid_argument (bad input: check_output_path says so before a
// run); I/O failures are std::runtime_error naming the file and the system's reason.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dpt {

enum class OutputKind {
  // Reports, traces, JSON and tables: readers want the bytes, so a stream gets them.
  stream,
  // Checkpoints and data files: they are loaded back and must be replaced whole, so
  // only a regular file (or a link to one, or a new file) is accepted.
  replaceable,
};

struct WriteOptions {
  OutputKind kind = OutputKind::stream;
  // Create missing directories above the file (reports, traces and JSON outputs, as
  // `--report DIR` does). Checkpoints leave it off, as torch.save does, so a mistyped
  // directory is an error.
  bool create_parent_dirs = false;
};

// Throws std::invalid_argument "FLAG PATH: why" when `path` could never be written as
// `kind` (a directory, a block device, a stream for a replaceable output, a link loop),
// so commands refuse it before they run. A missing file is not refused here; a missing
// folder is for `replaceable` (its writes never create one), not for `stream` outputs
// (create_parent_dirs may create it; otherwise the write reports it).
void check_output_path(const std::string& path, OutputKind kind, const std::string& flag);

void write_file_atomic(const std::string& path, std::string_view bytes, const WriteOptions& options = {});
void write_file_atomic(const std::string& path, const std::vector<std::byte>& bytes, const WriteOptions& options = {});

// Removes the entries of `dir` (files or whole folders) named PREFIX<pid>, or
// PREFIX<pid><sep>... when `sep` is not '\0', whose process <pid> no longer runs: what
// a killed writer left behind. Entries of live processes (and of this one) are kept.
void remove_dead_writers_leftovers(const std::string& dir, const std::string& prefix, char sep);

// Creates a private folder `PREFIX-<pid>-XXXXXX` in the temporary folder (TMPDIR or
// /tmp) and first removes the `PREFIX-<pid>-*` folders of runs that were killed
// before they could remove their own. Returns its path.
std::string make_run_temp_dir(const std::string& prefix);

// The temporary file name the writer uses for `target` in this process
// (`.NAME.dptwin-tmp.<pid>` beside it), for tests of stale-file removal.
std::string atomic_temp_path(const std::string& target, long pid);

}  // namespace dpt
