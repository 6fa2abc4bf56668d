#include "scenarios/report/report_chart.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/io/atomic_file.hpp"
#include "sim/twin/sim_process.hpp"

namespace dpt::report {
namespace {

// Colour-blind-safe palette (Okabe and Ito 2008), in gnuplot's "#rrggbb" form.
constexpr const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#000000", "#F0E442"};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

// gnuplot strings are double-quoted; a name with a quote or backslash would end them.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\'';
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out + "\"";
}

std::string number(double v) { return std::isfinite(v) ? fmt::format("{:.9g}", v) : std::string("NaN"); }

std::string data_text(const Chart& c) {
  std::string out;
  if (c.kind == ChartKind::lines) {
    // One gnuplot data block per series, separated by two blank lines ("index n").
    for (size_t s = 0; s < c.series.size(); ++s) {
      if (s) out += "\n\n";
      out += fmt::format("# {}\n", c.series[s].name);
      for (auto [x, y] : c.series[s].points) out += number(x) + " " + number(y) + "\n";
    }
    return out;
  }
  // Bars: a row per category, its label quoted, then one column per series.
  for (size_t i = 0; i < c.categories.size(); ++i) {
    out += quoted(c.categories[i]);
    for (const auto& s : c.series) {
      out += ' ';
      out += number(i < s.values.size() ? s.values[i] : NAN);
    }
    out += "\n";
  }
  return out;
}

std::string colour_of(const Chart& c, size_t s) {
  const int i = c.series[s].colour >= 0 ? c.series[s].colour : static_cast<int>(s);
  return kPalette[i % kPaletteSize];
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '&') out += "&amp;";
    else if (ch == '<') out += "&lt;";
    else if (ch == '>') out += "&gt;";
    else if (ch == '"') out += "&quot;";
    else out += ch;
  }
  return out;
}

double max_value(const Chart& c) {
  double m = 0;
  for (const auto& s : c.series) {
    for (auto [x, y] : s.points)
      if (std::isfinite(y)) m = std::max(m, y);
    if (c.kind == ChartKind::stacked_bars) continue;
    for (double v : s.values)
      if (std::isfinite(v)) m = std::max(m, v);
  }
  if (c.kind == ChartKind::stacked_bars)
    for (size_t i = 0; i < c.categories.size(); ++i) {
      double sum = 0;
      for (const auto& s : c.series)
        if (i < s.values.size() && std::isfinite(s.values[i])) sum += s.values[i];
      m = std::max(m, sum);
    }
  return m;
}

// From zero; up to the reference lines too, so a capacity far above the data is drawn
// (3 GiB of 80 GiB must look like 3 of 80).
void write_y_range_and_lines(std::ostringstream& g, const Chart& c) {
  double top = 0;
  for (const auto& l : c.y_lines) top = std::max(top, l.y);
  if (top > 0) g << "set yrange [0:" << number(std::max(top, max_value(c)) * 1.08) << "]\n";
  else g << "set yrange [0:*]\n";
  for (size_t i = 0; i < c.y_lines.size(); ++i) {
    const auto& l = c.y_lines[i];
    g << "set arrow " << (i + 1) << " from graph 0, first " << number(l.y) << " to graph 1, first " << number(l.y)
      << " nohead dt 2 lw 1.5 lc rgb \"#000000\" front\n";
    g << "set label " << (i + 1) << " " << quoted(l.label) << " at graph 1.01, first " << number(l.y)
      << " left font \"sans,10\"\n";
  }
}

}  // namespace

std::string gnuplot_script(const Chart& c, const std::string& data_path, const std::string& svg_path) {
  std::ostringstream g;
  // Many or long category labels stand vertical below the bars (slanted ones ran past the
  // right edge and were clipped); the chart grows by their length.
  size_t label_chars = 0, longest = 0;
  for (const auto& cat : c.categories) {
    label_chars += cat.size() + 2;
    longest = std::max(longest, cat.size());
  }
  const bool rotate = c.kind != ChartKind::lines && (c.categories.size() > 6 || label_chars > 70);
  constexpr int kPixelsPerChar = 7;  // sans 12 in gnuplot's SVG
  const size_t height = 420 + (rotate ? kPixelsPerChar * longest : 0);
  g << "set terminal svg size 760," << height << " dynamic noenhanced font \"sans,12\" background rgb \"white\"\n";
  g << "set output " << quoted(svg_path) << "\n";
  g << "set title " << quoted(c.title) << "\n";
  g << "set xlabel " << quoted(c.x_label) << "\nset ylabel " << quoted(c.y_label) << "\n";
  g << "set grid ytics lc rgb \"#dddddd\"\nset border 3\nset tics nomirror\n";
  g << "set key below maxrows 4 width 2\nset xlabel offset 0,0.5\n";
  // Room at the right for reference-line labels.
  if (!c.y_lines.empty()) g << "set rmargin 16\n";
  write_y_range_and_lines(g, c);
  if (c.kind == ChartKind::lines) {
    if (c.log2_x) g << "set logscale x 2\n";
    if (c.log10_x) g << "set logscale x 10\n";
    if (!c.x_tics.empty()) {
      g << "set xtics (";
      for (size_t i = 0; i < c.x_tics.size(); ++i) g << (i ? ", " : "") << number(c.x_tics[i]);
      g << ")\n";
      // A little room either side so the first and last points are not on the border.
      const auto [lo, hi] = std::minmax_element(c.x_tics.begin(), c.x_tics.end());
      if (*lo < *hi) {
        const bool log = c.log2_x || c.log10_x;
        const double pad = log ? 1.15 : 0.05 * (*hi - *lo);
        g << "set xrange [" << number(log ? *lo / pad : *lo - pad) << ":" << number(log ? *hi * pad : *hi + pad) << "]\n";
      }
    }
    g << "plot ";
    for (size_t s = 0; s < c.series.size(); ++s) {
      const auto& series = c.series[s];
      g << (s ? ", \\\n     " : "") << quoted(data_path) << " index " << s << " using 1:2 with "
        << (series.dashed ? "lines dt 2 lw 1.5" : "linespoints pt 7 ps 0.7 lw 2") << " lc rgb "
        << quoted(colour_of(c, s)) << " title " << quoted(series.name);
    }
    g << "\n";
    return g.str();
  }
  g << "set style data histogram\n";
  g << (c.kind == ChartKind::stacked_bars ? "set style histogram rowstacked\n"
                                           : "set style histogram clustered gap 1\n");
  g << "set style fill solid 0.85 border -1\nset boxwidth 0.75\n";
  // Vertical labels need their length (a line is about two characters wide) plus the key below.
  if (rotate) g << "set xtics rotate by 90 right\nset bmargin " << (longest + 1) / 2 + 5 << "\n";
  g << "plot ";
  for (size_t s = 0; s < c.series.size(); ++s) {
    g << (s ? ", \\\n     " : "") << quoted(data_path) << " using " << (s + 2) << (s == 0 ? ":xtic(1)" : "")
      << " lc rgb " << quoted(colour_of(c, s)) << " title " << quoted(c.series[s].name);
  }
  g << "\n";
  return g.str();
}

std::string render_chart_svg(const Chart& chart) {
  namespace fs = std::filesystem;
  const fs::path dir = make_run_temp_dir("dptwin-chart");
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  const fs::path data = dir / "data.txt", script = dir / "chart.gp", svg = dir / "chart.svg", err = dir / "err.txt";
  // Checked writes: a full disk (or a file-size limit) is an error naming the file,
  // not a truncated input that gnuplot would draw wrongly.
  write_file_atomic(data.string(), data_text(chart));
  write_file_atomic(script.string(), gnuplot_script(chart, data.string(), svg.string()));
  // gnuplot runs inside a stop-signal scope: SIGINT/SIGTERM/SIGHUP are forwarded to it,
  // it is reaped, and Interrupted unwinds through `cleanup`, so neither the child nor
  // the temporary folder outlives the command (default dispositions would end this
  // process at once and leave both behind).
  sim::ChildProcessScope scope;
  const pid_t pid = scope.fork_child();
  if (pid == 0) {
    // Child: gnuplot's chatter goes to a file that the error message quotes.
    if (!std::freopen(err.c_str(), "w", stderr) || !std::freopen("/dev/null", "w", stdout)) ::_exit(126);
    ::execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, 0) == pid) {
      scope.reaped(pid);
      break;
    }
    if (errno != EINTR) {
      const int e = errno;
      scope.reaped(pid);
      throw std::runtime_error(fmt::format("waiting for gnuplot: {}", std::strerror(e)));
    }
    if (sim::ChildProcessScope::stop_signal() != 0) break;  // throw_if_stopped ends and reaps it
  }
  scope.throw_if_stopped();
  std::stringstream errors;
  errors << std::ifstream(err).rdbuf();
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    throw std::runtime_error(fmt::format("gnuplot died of signal {} ({}) drawing chart '{}'{}", sig, strsignal(sig),
                                         chart.id, sig == SIGXFSZ ? ": the disk is full or a file-size limit is set" : ""));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 127)
    throw std::runtime_error("cannot run gnuplot: install gnuplot-nox (ci/install-deps does)");
  if (WEXITSTATUS(status) != 0 || !fs::exists(svg))
    throw std::runtime_error(fmt::format("gnuplot failed drawing chart '{}': {}", chart.id, errors.str()));
  std::stringstream out;
  out << std::ifstream(svg).rdbuf();
  return name_svg_tooltips(chart, out.str());
}

std::string name_svg_tooltips(const Chart& chart, std::string svg) {
  // gnuplot titles the document "Gnuplot" and each plot "gnuplot_plot_N" (1-based, in
  // plot order); browsers show these as tooltips. Name them after the chart and series.
  auto replace = [&svg](const std::string& from, const std::string& to) {
    const auto at = svg.find(from);
    if (at != std::string::npos) svg.replace(at, from.size(), to);
  };
  replace("<title>Gnuplot</title>", "<title>" + xml_escape(chart.title) + "</title>");
  for (size_t s = 0; s < chart.series.size(); ++s)
    replace(fmt::format("<title>gnuplot_plot_{}</title>", s + 1), "<title>" + xml_escape(chart.series[s].name) + "</title>");
  // Ids unique in a page holding several charts: "gnuplot_plot_3" -> "chart-memory-plot_3".
  for (const std::string from : {"id=\"gnuplot_", "url(#gnuplot_", "href=\"#gnuplot_"}) {
    const std::string to = from.substr(0, from.size() - 8) + "chart-" + chart.id + "-";
    for (auto at = svg.find(from); at != std::string::npos; at = svg.find(from, at + to.size())) svg.replace(at, from.size(), to);
  }
  return svg;
}

std::string svg_for_inline_html(const std::string& svg) {
  const auto start = svg.find("<svg");
  if (start == std::string::npos) throw std::runtime_error("gnuplot output holds no <svg> element");
  return svg.substr(start);
}

}  // namespace dpt::report
