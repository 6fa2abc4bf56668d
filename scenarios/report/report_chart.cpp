#include "scenarios/report/report_chart.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

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

}  // namespace

std::string gnuplot_script(const Chart& c, const std::string& data_path, const std::string& svg_path) {
  std::ostringstream g;
  g << "set terminal svg size 760,420 dynamic noenhanced font \"sans,12\" background rgb \"white\"\n";
  g << "set output " << quoted(svg_path) << "\n";
  g << "set title " << quoted(c.title) << "\n";
  g << "set xlabel " << quoted(c.x_label) << "\nset ylabel " << quoted(c.y_label) << "\n";
  g << "set grid ytics lc rgb \"#dddddd\"\nset border 3\nset tics nomirror\n";
  g << "set key below maxrows 4 width 2\nset xlabel offset 0,0.5\nset yrange [0:*]\n";
  if (c.kind == ChartKind::lines) {
    if (c.log2_x) g << "set logscale x 2\n";
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
  if (c.categories.size() > 6) g << "set xtics rotate by -35\n";
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
  std::string tmpl = (fs::temp_directory_path() / "dptwin-chart-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error(fmt::format("cannot create a temporary directory: {}",
                                                                     std::strerror(errno)));
  const fs::path dir = tmpl;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  const fs::path data = dir / "data.txt", script = dir / "chart.gp", svg = dir / "chart.svg", err = dir / "err.txt";
  {
    std::ofstream(data) << data_text(chart);
    std::ofstream(script) << gnuplot_script(chart, data.string(), svg.string());
  }
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("cannot start gnuplot: {}", std::strerror(errno)));
  if (pid == 0) {
    // Child: gnuplot's chatter goes to a file that the error message quotes.
    if (!std::freopen(err.c_str(), "w", stderr) || !std::freopen("/dev/null", "w", stdout)) ::_exit(126);
    ::execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::stringstream errors;
  errors << std::ifstream(err).rdbuf();
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 127)
    throw std::runtime_error("cannot run gnuplot: install gnuplot-nox (ci/install-deps does)");
  if (WEXITSTATUS(status) != 0 || !fs::exists(svg))
    throw std::runtime_error(fmt::format("gnuplot failed drawing chart '{}': {}", chart.id, errors.str()));
  std::stringstream out;
  out << std::ifstream(svg).rdbuf();
  return out.str();
}

std::string svg_for_inline_html(const std::string& svg) {
  const auto start = svg.find("<svg");
  if (start == std::string::npos) throw std::runtime_error("gnuplot output holds no <svg> element");
  return svg.substr(start);
}

}  // namespace dpt::report
