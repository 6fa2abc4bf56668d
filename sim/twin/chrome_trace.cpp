#include "sim/twin/chrome_trace.hpp"

#include <nlohmann/json.hpp>

#include "engine/core/device.hpp"
#include "engine/core/fault_injection.hpp"
#include "sim/twin/step_report.hpp"

namespace dpt {

const char* trace_category(OpKind kind) {
  switch (kind) {
    case OpKind::compute: return "compute";
    case OpKind::memory: return "memory";
    case OpKind::copy: return "copy";
    case OpKind::collective: return "collective";
    case OpKind::host: return "host";
  }
  return "?";
}

void ChromeTrace::name_process(int pid, const std::string& name) { processes_.push_back({pid, 0, name}); }
void ChromeTrace::name_thread(int pid, int tid, const std::string& name) { threads_.push_back({pid, tid, name}); }
std::size_t ChromeTrace::add(TraceEvent e) {
  events_.push_back(std::move(e));
  return events_.size() - 1;
}
void ChromeTrace::add_flow(TraceFlow f) { flows_.push_back(std::move(f)); }

void ChromeTrace::keep_window(Seconds t0, Seconds t1) {
  std::vector<TraceEvent> kept;
  for (auto& e : events_)
    if (e.start_s >= t0 && e.start_s <= t1) {
      e.start_s -= t0;
      kept.push_back(std::move(e));
    }
  events_ = std::move(kept);
  std::vector<TraceFlow> flows;
  for (auto& f : flows_)
    if (f.from_s >= t0 && f.from_s <= t1 && f.to_s >= t0 && f.to_s <= t1) {
      f.from_s -= t0;
      f.to_s -= t0;
      flows.push_back(std::move(f));
    }
  flows_ = std::move(flows);
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
  for (const auto& e : events_) {
    json args = json::object();
    for (const auto& [k, v] : e.args) args[k] = v;
    for (const auto& [k, v] : e.number_args) args[k] = v;
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"pid", e.pid},
                      {"tid", e.tid},
                      {"ts", e.start_s * kMicrosecondsPerSecond},
                      {"dur", e.duration_s * kMicrosecondsPerSecond},
                      {"args", args}});
  }
  // Flow events: "s" binds to the slice enclosing its timestamp, "f" with "bp": "e"
  // to the slice enclosing its own (the Trace Event Format's binding rules).
  for (const auto& f : flows_) {
    events.push_back({{"name", f.name}, {"cat", f.category}, {"ph", "s"}, {"id", f.id}, {"pid", f.from_pid},
                      {"tid", f.from_tid}, {"ts", f.from_s * kMicrosecondsPerSecond}});
    const std::uint64_t finish_id = fault_active(Fault::trace_flow_unmatched) ? f.id + 1'000'000 : f.id;
    events.push_back({{"name", f.name}, {"cat", f.category}, {"ph", "f"}, {"bp", "e"}, {"id", finish_id}, {"pid", f.to_pid},
                      {"tid", f.to_tid}, {"ts", f.to_s * kMicrosecondsPerSecond}});
  }
  return json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

void ChromeTrace::write(const std::string& path) const { write_file_atomic(path, to_json_text(), {.create_parent_dirs = true}); }

}  // namespace dpt
