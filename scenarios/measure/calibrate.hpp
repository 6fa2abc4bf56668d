// Hardware files from measurements: `dptwin verify --calibrate-out FILE` writes
// the measured figures into a hardware file (the efficiency fields the twin
// multiplies datasheet rates by, each marked in a comment with the date, the
// device and the figure it came from), and verify on the host builds a host twin
// from microbenchmarks when no hardware file is given.
#pragma once
#include <map>
#include <string>

#include "scenarios/measure/measure.hpp"
#include "sim/net/hardware.hpp"

namespace dpt::verify {

// A twin of the host backend's `devices` workers from measured microbenchmarks:
// each worker is a "GPU" whose f32 and f64 peak is the measured GEMM rate and whose
// memory bandwidth is the measured copy bandwidth (efficiencies 1), joined by PCIe
// links whose efficiency reproduces the measured peer copy bandwidth; a dispatch
// cost of 1 us per op (the engine's own overhead, no Python).
sim::HardwareSpec host_spec_from_figures(const Figures& measured, int devices, const std::string& cpu_name);

// Comments attached to keys of the emitted YAML, by dotted key path
// ("efficiency.gemm"), written after the value.
using YamlComments = std::map<std::string, std::string>;

// The spec as a hardware file in sim/hardware.hpp's schema (quantities with
// units), loadable by sim::load_hardware_file.
std::string hardware_yaml(const sim::HardwareSpec& hw, const YamlComments& comments = {},
                          const std::string& header_comment = "");

struct CalibrationResult {
  sim::HardwareSpec spec;   // the base spec with measured efficiency fields
  YamlComments comments;    // "measured <date> on <device>: <figure>" per field
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

}  // namespace dpt::verify
