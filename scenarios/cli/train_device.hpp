// `dptwin train --backend host|cuda [--report R.json --trace T.json]`: the train
// command's backend choice and, on CUDA, the measured step report and Chrome trace
// of the last step (CUDA events around every op), in the twin's formats.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/core/backend.hpp"
#include "engine/core/timed_interval.hpp"
#include "engine/parallel/trainer.hpp"

namespace dpt::cli {

struct TrainDeviceFlags {
  std::string backend = "host";          // --backend host|cuda
  std::optional<std::string> report;     // -o/--out FILE (cuda): measured step report
  std::optional<std::string> report_deprecated;  // --report FILE: the old spelling of -o (--report is a directory elsewhere)
  std::optional<std::string> trace;      // --trace FILE (cuda): Chrome trace of the last step
  bool tf32 = false;                     // --tf32 (cuda)
};

void add_train_device_flags(CLI::App* cmd, TrainDeviceFlags& flags);


// Owns the backend of a training run and measures its last step when asked.
class TrainDevice {
 public:
  TrainDevice(const TrainDeviceFlags& flags, int devices);
  Backend& backend() { return *backend_; }
  // Call after every step: measurement restarts so that the last step's remains.
  void after_step(const StepLog& s, int total_steps);
  // Writes --report and --trace (if given) for the run just finished.
  void finish(const TrainConfig& c, const std::string& model, const std::string& strategy, int devices,
              const std::vector<std::int64_t>& per_device, DType dtype);

 private:
  TrainDeviceFlags flags_;
  std::unique_ptr<Backend> backend_;
  std::optional<MeasuredStep> last_;
};

}  // namespace dpt::cli
