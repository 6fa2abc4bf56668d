// "did you mean" for a mistyped command, flag or file key: the known name at the smallest
// optimal-string-alignment distance (edits, with adjacent transpositions counted
// once, so "predcit" is 1 from "predict"), when that distance is small enough to
// be a typo rather than another word.
#pragma once
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace dpt {

inline std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The closest name within max(1, |word| / 3) edits, or none; a name that differs from the
// word in letter case alone first (NCCL_P2P_DISABLE for the file key nccl_p2p_disable).
inline std::optional<std::string> closest_name(const std::string& word, const std::vector<std::string>& names) {
  const auto lower = [](std::string v) {
    for (char& c : v) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    return v;
  };
  for (const auto& n : names)
    if (n != word && lower(n) == lower(word)) return n;
  std::optional<std::string> best;
  std::size_t best_d = std::max<std::size_t>(1, word.size() / 3) + 1;
  for (const auto& n : names) {
    const std::size_t dist = edit_distance(word, n);
    if (dist < best_d) best_d = dist, best = n;
  }
  return best;
}

}  // namespace dpt
