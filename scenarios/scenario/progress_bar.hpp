// A one-line progress bar on stderr for the commands that run many predictions
// (sweep's points, fidelity's entries): "[#####.....] 12/40 points  3.4 s", redrawn in
// place. Disabled (prints nothing) unless the caller asks for it, which the commands
// do only when stderr is a terminal and the output is not JSON.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>

namespace dpt::scenario {

class ProgressBar {
 public:
  // `what`: the plural noun of the items counted ("points", "entries").
  ProgressBar(bool enabled, std::size_t total, std::string what)
      : enabled_(enabled), total_(total), what_(std::move(what)), start_(Clock::now()) {
    draw();
  }
  void advance() {
    ++done_;
    draw();
  }
  void finish() {
    if (enabled_) std::fputc('\n', stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  void draw() const {
    if (!enabled_) return;
    constexpr int kWidth = 30;
    const int filled = total_ ? static_cast<int>(kWidth * done_ / total_) : kWidth;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    std::fprintf(stderr, "\r[%s%s] %zu/%zu %s  %.1f s", std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), done_, total_, what_.c_str(),
                 elapsed);
    std::fflush(stderr);
  }
  bool enabled_;
  std::size_t total_, done_ = 0;
  std::string what_;
  Clock::time_point start_;
};

}  // namespace dpt::scenario
