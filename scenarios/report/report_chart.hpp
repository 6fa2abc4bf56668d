// Charts for the reports, rendered by gnuplot (gnuplot-nox) to SVG. The SVG is
// embedded inline in the HTML (so the page is self-contained) and written beside
// the Markdown. A chart is data plus a few style choices; the gnuplot script is
// generated here and nowhere else.
#pragma once
#include <string>
#include <vector>

namespace dpt::report {

struct ChartSeries {
  std::string name;                                 // legend entry
  std::vector<std::pair<double, double>> points;    // (x, y), for line charts
  std::vector<double> values;                       // one per category, for bar charts
  bool dashed = false;                              // reference lines (ideal scaling)
  int colour = -1;                                  // palette index; -1: next colour
};

enum class ChartKind {
  lines,          // x-y lines with points (throughput, efficiency against GPU count)
  stacked_bars,   // one bar per category, series stacked (step-time breakdown)
  clustered_bars, // one cluster per category, a bar per series (per-GPU memory)
};

// A horizontal reference line across the plot (a GPU's memory capacity, a target).
struct ReferenceLine {
  double y = 0;
  std::string label;  // drawn at the line's right end
};

struct Chart {
  std::string id;     // file stem and HTML id: "throughput"
  std::string title;
  std::string x_label, y_label;
  ChartKind kind = ChartKind::lines;
  bool log2_x = false;                 // GPU counts 1, 2, 4, ... 64
  std::vector<std::string> categories; // bar charts: the x labels
  std::vector<ChartSeries> series;
  std::string caption;                 // one sentence under the chart
  std::vector<double> x_tics;          // line charts: tics at exactly these x values (the swept values)
  bool log10_x = false;                // line charts: a swept field spanning decades (bucket size 1-100 MiB)
  std::vector<ReferenceLine> y_lines;  // the y range always reaches them
};

// The gnuplot script that draws `chart` as SVG into `svg_path` (exposed for tests).
std::string gnuplot_script(const Chart& chart, const std::string& data_path, const std::string& svg_path);
// Runs gnuplot and returns the SVG document. Throws std::runtime_error when
// gnuplot is missing or fails (its stderr in the message).
std::string render_chart_svg(const Chart& chart);
// gnuplot's generic tooltips ("Gnuplot", "gnuplot_plot_3") replaced by the chart's
// title and each series' name (exposed for tests).
std::string name_svg_tooltips(const Chart& chart, std::string svg);
// The SVG without its XML declaration and DOCTYPE, for inline use in HTML.
std::string svg_for_inline_html(const std::string& svg);

}  // namespace dpt::report
