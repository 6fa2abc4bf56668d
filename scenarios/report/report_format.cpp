#include "scenarios/report/report_format.hpp"

#include <cmath>

#include <fmt/format.h>

namespace dpt::report {

std::string format_count(double v) {
  if (!std::isfinite(v) || std::fabs(v) >= 1e15) return format_figure(v);
  if (v != std::floor(v)) return fmt::format("{:.6g}", v);
  const std::string digits = fmt::format("{}", static_cast<long long>(std::fabs(v)));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string format_figure(double v) {
  if (!std::isfinite(v)) return "n/a";
  if (v == 0) return "0";
  const bool negative = v < 0;
  double a = std::fabs(v);
  const int magnitude = static_cast<int>(std::floor(std::log10(a)));
  if (magnitude >= 15 || magnitude < -6) {
    // Past 10^15 the rounded digits no longer fit the integer arithmetic below (10^20
    // overflowed long long), and below 10^-6 the decimals run long (1e-300 would print
    // 302 of them): such figures read better in scientific notation.
    std::string s = fmt::format("{:.2e}", a);
    return negative ? "-" + s : s;
  }
  if (magnitude < 2) {
    // Below 100: three significant digits as decimals (12.3, 1.23, 0.0123).
    const int decimals = 2 - magnitude;
    std::string s = fmt::format("{:.{}f}", a, decimals);
    return negative ? "-" + s : s;
  }
  const double unit = std::pow(10.0, magnitude - 2);
  const auto rounded = static_cast<long long>(std::llround(a / unit) * static_cast<long long>(std::llround(unit)));
  std::string digits = std::to_string(rounded);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return negative ? "-" + out : out;
}

std::string format_percent(double fraction) {
  if (!std::isfinite(fraction)) return "n/a";
  return fmt::format("{:.0f} %", fraction * 100.0);
}

std::string format_gib(Bytes b) { return fmt::format("{:.2f} GiB", static_cast<double>(b) / static_cast<double>(kGiB)); }

std::string format_duration(Seconds s) {
  if (!std::isfinite(s)) return "n/a";
  if (s == 0) return "0 s";  // with its unit, as every other duration ("interference 0" read as unitless)
  if (s < 1e-3) return format_figure(s * 1e6) + " us";
  if (s < 1.0) return format_figure(s * 1e3) + " ms";
  return format_figure(s) + " s";
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace dpt::report
