// Number and text formatting shared by the reports and the CLI tables: figures
// rounded to what the twin can claim (three significant digits), thousands
// separated, units spelled out (GiB, never "G").
#pragma once
#include <string>

#include "engine/core/units.hpp"

namespace dpt::report {

// Three significant digits with thousands separators: 12437.2 -> "12,400",
// 512.3 -> "512", 12.34 -> "12.3", 0.01234 -> "0.0123"; from 10^15 and below 10^-6 in scientific
// notation (1.23e+20); "n/a" when not finite.
std::string format_figure(double v);
// A count the user gave (a target, samples to train, tokens per sample) as given: whole
// numbers exactly with thousands separators (19,531,250; 8,192), others to 6 significant
// digits (1.5); past 10^15 as format_figure.
std::string format_count(double v);
// A fraction as a whole percentage with a space: 0.943 -> "94 %".
std::string format_percent(double fraction);
// Bytes in GiB with two decimals: "12.34 GiB".
std::string format_gib(Bytes b);
// Seconds in the unit that reads best: "850 us", "12.3 ms", "1.23 s".
std::string format_duration(Seconds s);

std::string html_escape(const std::string& s);
// Quotes a CSV field when it holds a comma, quote or newline (RFC 4180).
std::string csv_field(const std::string& s);

}  // namespace dpt::report
