// Output tests with numeric placeholders, in the manner of google/benchmark's
// output tests: the expected text is literal except for placeholders that match
// one formatted number each, so a test pins the layout and the words while the
// figures the twin predicts may move.
//   %int      123
//   %float    -1.5e-3, 12,400, 0.0123
//   %percent  94 %
//   %duration 850 us, 12.3 ms, 1.23 s
//   %gib      12.34 GiB
//   %any      anything on the rest of the line
// A run of two or more spaces matches any run of one or more, so columns padded
// around a figure of varying width still match.
#pragma once
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace dpt::test {

inline std::string placeholder_regex(const std::string& expected_line) {
  static const std::vector<std::pair<std::string, std::string>> placeholders = {
      {"%int", "[0-9]+"},
      {"%float", "[-+]?[0-9][0-9,]*(\\.[0-9]+)?([eE][-+]?[0-9]+)?"},
      {"%percent", "[0-9]+ %"},
      {"%duration", "[0-9][0-9.,]* (us|ms|s)"},
      {"%gib", "[0-9]+\\.[0-9]{2} GiB"},
      {"%any", ".*"},
  };
  std::string out;
  for (size_t i = 0; i < expected_line.size();) {
    bool matched = false;
    if (expected_line[i] == '%')
      for (const auto& [name, re] : placeholders)
        if (expected_line.compare(i, name.size(), name) == 0) {
          out += re;
          i += name.size();
          matched = true;
          break;
        }
    if (matched) continue;
    if (expected_line.compare(i, 2, "  ") == 0) {
      while (i < expected_line.size() && expected_line[i] == ' ') ++i;
      out += " +";
      continue;
    }
    const char c = expected_line[i++];
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) lines.push_back(line);
  return lines;
}

// Empty when `actual` matches `expected` line by line; otherwise what differs.
inline std::string match_text(const std::string& expected, const std::string& actual) {
  const auto e = split_lines(expected), a = split_lines(actual);
  for (size_t i = 0; i < std::max(e.size(), a.size()); ++i) {
    if (i >= e.size()) return "unexpected extra line " + std::to_string(i + 1) + ": " + a[i];
    if (i >= a.size()) return "missing line " + std::to_string(i + 1) + ": " + e[i];
    if (!std::regex_match(a[i], std::regex(placeholder_regex(e[i]))))
      return "line " + std::to_string(i + 1) + " differs\n  expected: " + e[i] + "\n  actual:   " + a[i];
  }
  return "";
}

}  // namespace dpt::test
