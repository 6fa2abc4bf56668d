// Chrome trace (the Trace Event Format's JSON object form, which Perfetto and
// chrome://tracing open): one process per device, one thread per stream, complete
// events ("ph": "X") with timestamps and durations in microseconds and, as in
// PyTorch's profiler, args on each event (the layer and op class of a kernel; bytes
// and algorithm of a collective); the host's dispatch threads and the GIL; flow
// events ("s"/"f") from a gradient's ready point to its bucket's all-reduce. The
// twin records simulated time; real backends record measured time the same way.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/units.hpp"

namespace dpt {

enum class OpKind;  // engine/core/device.hpp

// The trace category of a kernel's kind: "compute", "memory", "copy", "collective", "host".
const char* trace_category(OpKind kind);

struct TraceEvent {
  std::string name;      // the op: "gemm_fwd", "all_reduce", "copy h2d", a layer's name
  std::string category;  // "compute", "memory", "copy", "collective", "host"
  int pid = 0;           // process: a device (or the host)
  int tid = 0;           // thread: a stream of that device
  Seconds start_s = 0;
  Seconds duration_s = 0;
  std::vector<std::pair<std::string, std::string>> args;      // text args: "layer", "op_class", "algorithm"
  std::vector<std::pair<std::string, double>> number_args;    // numeric args: "bytes", "flops", "channels"
};

// An arrow from a point in one slice to a point in another (same id at both ends).
struct TraceFlow {
  std::uint64_t id = 0;
  std::string name;      // "gradient ready"
  std::string category;  // "flow"
  int from_pid = 0, from_tid = 0;
  Seconds from_s = 0;    // inside the slice it starts from
  int to_pid = 0, to_tid = 0;
  Seconds to_s = 0;      // inside the slice it ends in
};

class ChromeTrace {
 public:
  // Names shown by the viewer; sort order follows the ids.
  void name_process(int pid, const std::string& name);
  void name_thread(int pid, int tid, const std::string& name);
  // Returns the event's index (events() stays in insertion order until keep_window).
  std::size_t add(TraceEvent e);
  TraceEvent& event(std::size_t index) { return events_.at(index); }
  void add_flow(TraceFlow f);
  std::uint64_t next_flow_id() { return ++last_flow_id_; }
  const std::vector<TraceEvent>& events() const { return events_; }
  const std::vector<TraceFlow>& flows() const { return flows_; }
  bool empty() const { return events_.empty(); }
  // Keeps the events (and flows) that start in [t0, t1] and shifts them so t0 is time
  // zero (the measured step of a longer simulation). A flow is kept when both ends are.
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
  std::vector<TraceFlow> flows_;
  std::uint64_t last_flow_id_ = 0;
};

}  // namespace dpt
