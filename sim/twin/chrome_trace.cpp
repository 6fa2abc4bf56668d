#include "sim/twin/chrome_trace.hpp"

#include <nlohmann/json.hpp>

#include "sim/twin/step_report.hpp"

namespace dpt {

void ChromeTrace::name_process(int pid, const std::string& name) { processes_.push_back({pid, 0, name}); }
void ChromeTrace::name_thread(int pid, int tid, const std::string& name) { threads_.push_back({pid, tid, name}); }
void ChromeTrace::add(TraceEvent e) { events_.push_back(std::move(e)); }

void ChromeTrace::keep_window(Seconds t0, Seconds t1) {
  std::vector<TraceEvent> kept;
  for (auto& e : events_)
    if (e.start_s >= t0 && e.start_s <= t1) {
      e.start_s -= t0;
      kept.push_back(std::move(e));
    }
  events_ = std::move(kept);
}

std::string ChromeTrace::to_json_text() const {
  using json = nlohmann::json;
  json events = json::array();
  // Metadata events name the rows and fix their order in the viewer.
  for (const auto& p : processes_) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", p.pid}, {"tid", 0}, {"args", {{"name", p.name}}}});
    events.push_back(
        {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", p.pid}, {"tid", 0}, {"args", {{"sort_index", p.pid}}}});
  }
  for (const auto& t : threads_) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", t.pid}, {"tid", t.tid}, {"args", {{"name", t.name}}}});
    events.push_back(
        {{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", t.pid}, {"tid", t.tid}, {"args", {{"sort_index", t.tid}}}});
  }
  constexpr double kMicrosecondsPerSecond = 1e6;
  for (const auto& e : events_)
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"pid", e.pid},
                      {"tid", e.tid},
                      {"ts", e.start_s * kMicrosecondsPerSecond},
                      {"dur", e.duration_s * kMicrosecondsPerSecond}});
  return json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

void ChromeTrace::write(const std::string& path) const { write_file_atomic(path, to_json_text(), {.create_parent_dirs = true}); }

}  // namespace dpt
