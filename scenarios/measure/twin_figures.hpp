// The twin's side of measurement: the measurement code (measure.hpp) run on the
// SimBackend of a hardware file, with its faults applied, so what the twin
// predicts is measured exactly as the machine is:
//   - as the prediction: the nominal hardware file, no faults;
//   - as the machine under test (`verify --backend sim --as-measured DEGRADED`):
//     the degraded file with its faults.
// Each simulation runs in a forked child (one SimGrid Engine per process): one for
// the micro figures, single-device steps and DDP (a process per rank), one for
// DataParallel (workers are threads of one process).
#pragma once
#include "scenarios/measure/faults.hpp"
#include "scenarios/measure/measure.hpp"
#include "sim/net/hardware.hpp"

namespace dpt::verify {

// Figures of the first config.devices GPUs of `hw` as the twin simulates them
// (shape-only: costs without data). Throws std::invalid_argument when the
// hardware has fewer GPUs than asked.
Figures simulate_figures(const sim::HardwareSpec& hw, const Faults& faults, const MeasureConfig& config,
                         const MeasureParts& parts = {});

}  // namespace dpt::verify
