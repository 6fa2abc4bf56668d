// Chrome trace (the chrome://tracing JSON object format, which Perfetto opens):
// one process per device, one thread per stream, complete events ("ph": "X") with
// timestamps and durations in microseconds. The twin records simulated time; real
// backends record measured time in the same format.
#pragma once
#include <string>
#include <vector>

#include "engine/core/units.hpp"

namespace dpt {

struct TraceEvent {
  std::string name;      // the op: "gemm_fwd", "all_reduce", "copy h2d"
  std::string category;  // "compute", "memory", "copy", "collective", "host"
  int pid = 0;           // process: a device (or the host)
  int tid = 0;           // thread: a stream of that device
  Seconds start_s = 0;
  Seconds duration_s = 0;
};

class ChromeTrace {
 public:
  // Names shown by the viewer; sort order follows the ids.
  void name_process(int pid, const std::string& name);
  void name_thread(int pid, int tid, const std::string& name);
  void add(TraceEvent e);
  const std::vector<TraceEvent>& events() const { return events_; }
  bool empty() const { return events_.empty(); }
  // Keeps the events that start in [t0, t1] and shifts them so t0 is time zero
  // (the measured step of a longer simulation).
  void keep_window(Seconds t0, Seconds t1);
  // The whole trace as chrome://tracing JSON text.
  std::string to_json_text() const;
  // Written atomically (temporary file, fsync, rename).
  void write(const std::string& path) const;

 private:
  struct Name {
    int pid, tid;
    std::string name;
  };
  std::vector<Name> processes_, threads_;
  std::vector<TraceEvent> events_;
};

}  // namespace dpt
