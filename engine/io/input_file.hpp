// Input files must be regular files (or the directories a caller lists itself): a
// FIFO opened for reading waits for a writer forever, and a device or socket may
// never end. Checked before opening, so bad input is an error, never a hang.
#pragma once
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

#include <fmt/format.h>

namespace dpt {

// Throws std::invalid_argument "LABEL: is a FIFO, socket or device, not a regular
// file" when `path` names one (links followed); anything else, a missing path
// included, is left to the caller's open to report.
inline void require_regular_input(const std::filesystem::path& path, const std::string& label) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st) || fs::is_regular_file(st) || fs::is_directory(st)) return;
  throw std::invalid_argument(fmt::format("{}: is a FIFO, socket or device, not a regular file (input files are read "
                                          "whole; write the data to a file first)",
                                          label));
}

}  // namespace dpt
