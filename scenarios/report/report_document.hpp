// A report as data: the question, the one-sentence answer, sections of prose,
// tables, charts and links, and the files that go with it (the CSV of every
// point, the raw results). Builders (report_sweep, report_plan) fill one;
// write_report renders it as Markdown and self-contained HTML.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "scenarios/report/report_chart.hpp"

namespace dpt::report {

struct ReportTable {
  std::string caption;
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right_aligned;  // per column; numbers read best right-aligned
};

struct ReportLink {
  std::string text;
  std::string href;  // relative to the report directory
};

struct ReportSection {
  std::string heading;
  std::vector<std::string> paragraphs;  // plain text (escaped for HTML, verbatim in Markdown)
  std::vector<Chart> charts;
  std::vector<ReportTable> tables;
  std::vector<ReportLink> links;
};

struct ReportDocument {
  std::string title;
  std::string question;
  std::string answer;  // one sentence
  std::vector<ReportSection> sections;
  std::string csv;                              // written as points.csv when not empty
  std::map<std::string, std::string> files;     // more files to write: relative path -> content
  std::string generated_by;                     // the command that produced it
};

// The rendered page texts, given each chart's SVG by chart id.
std::string render_markdown(const ReportDocument& doc);
std::string render_html(const ReportDocument& doc, const std::map<std::string, std::string>& svg_by_chart);

// What write_report produced: paths relative to the directory.
struct WrittenReport {
  std::string dir;
  std::vector<std::string> files;
};

// A report directory written whole. Files go into a staging directory beside DIR
// (DIR.partial-PID); commit() puts it in DIR's place with one renameat2
// RENAME_EXCHANGE (a plain rename when DIR is missing) and removes the previous
// report. A reader sees the old report or the new one, never a mix, and nothing of
// the old one (stale traces) survives. Without commit the staging directory is removed.
// "." and ".." cannot be swapped: they are written in place.
class ReportStaging {
 public:
  explicit ReportStaging(const std::string& dir);
  ReportStaging(const ReportStaging&) = delete;
  ReportStaging& operator=(const ReportStaging&) = delete;
  ~ReportStaging();
  const std::string& path() const { return staging_; }  // where to write
  const std::string& dir() const { return dir_; }       // where it goes
  void commit();

 private:
  std::string dir_, staging_;
  bool committed_ = false;
};

// Renders the charts with gnuplot and writes DIR/report.md, DIR/report.html,
// DIR/charts/<id>.svg, DIR/points.csv and doc.files, each atomically. Creates DIR.
WrittenReport write_report(const ReportDocument& doc, const std::string& dir);
// write_report through a ReportStaging: DIR holds exactly this report afterwards.
WrittenReport write_report_whole(const ReportDocument& doc, const std::string& dir);

}  // namespace dpt::report
