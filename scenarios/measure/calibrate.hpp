// Hardware files from measurements: one calibrator with several inputs. Each input
// sets the efficiency fields the twin multiplies datasheet rates by, each marked in
// a comment with the date, the device or log and the figure it came from:
//   - `dptwin verify --calibrate-out FILE`: verify's figures, measured against the
//     twin's (calibrate_from_figures, here);
//   - `dptwin calibrate --from BENCH.json`: `dptwin bench` microbenchmarks against
//     datasheet rates (calibrate_bench.hpp);
//   - `dptwin calibrate --from LOG`: nccl-tests logs, fitted by the twin
//     (calibrate_nccl.hpp).
// calibrate_hardware is the one entry point of `dptwin calibrate`. Verify on the host
// also builds a host twin from microbenchmarks when no hardware file is given.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "scenarios/measure/measure.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/hardware_yaml.hpp"

namespace dpt::verify {

// A twin of the host backend's `devices` workers from measured microbenchmarks:
// each worker is a "GPU" whose f32 and f64 peak is the measured GEMM rate and whose
// memory bandwidth is the measured copy bandwidth (efficiencies 1), joined by PCIe
// links whose efficiency reproduces the measured peer copy bandwidth; a dispatch
// cost of 1 us per op (the engine's own overhead, no Python).
sim::HardwareSpec host_spec_from_figures(const Figures& measured, int devices, const std::string& cpu_name);

struct CalibrationResult {
  sim::HardwareSpec spec;   // the base spec with measured efficiency fields
  sim::YamlComments comments;  // "measured <date> on <device>: <figure>" per field
  std::string yaml;         // the file's text
};

// The base spec with efficiency.gemm, efficiency.memory_bandwidth and the peer link
// efficiency (p2p with NVLink/NVSwitch, else pcie) replaced by what the
// measurements show: each field scaled by the mean measured/predicted ratio of
// its figures (predicted with the base spec), capped at 1. `device` names what was
// measured ("cuda:0 NVIDIA H200"), `date` when (ISO 8601).
CalibrationResult calibrate_from_figures(const sim::HardwareSpec& base, const Figures& measured,
                                         const Figures& predicted, const std::string& device,
                                         const std::string& date);

// The opening comment of a calibrated file: `what` (how `base` was calibrated, on what,
// when), then which fields carry `marker`, from `source`, and that the others keep the
// base file's values.
std::string calibration_header(const sim::HardwareSpec& base, const std::string& what, const std::string& marker,
                               const std::string& source);

}  // namespace dpt::verify

namespace dpt {

// What `dptwin calibrate --from FILE...` was given: each file is either `dptwin bench`
// JSON (schema dptwin.bench/1) or an nccl-tests log, told apart by their content.
struct CalibrationInputs {
  std::vector<std::string> files;
  std::optional<std::string> op;  // nccl-tests logs that do not name their collective
  std::string date;               // ISO 8601, for the marks
};

struct CalibratedHardware {
  sim::HardwareSpec spec;
  std::string yaml;                  // the calibrated file's text
  std::vector<std::string> read;     // one line per input file: what it holds
  std::vector<std::string> changes;  // one line per calibrated field: before -> after and why
};

// Calibrates `base` (its file's text `base_yaml`, kept where an input edits only the
// efficiency block) from `inputs`: one bench file, or nccl-tests logs. Throws
// std::invalid_argument naming the file for an unreadable input, or a bench file mixed
// with logs or with another bench file.
CalibratedHardware calibrate_hardware(const sim::HardwareSpec& base, const std::string& base_yaml,
                                      const CalibrationInputs& inputs);

}  // namespace dpt
