// The twin's side of `dptwin verify`: verify's own measurement code
// (verify_measure.hpp) run on the SimBackend of a hardware file, with its faults
// applied, so what the twin predicts is measured exactly as the machine is.
//   - as the prediction: the nominal hardware file, no faults;
//   - as the machine under test (`--backend sim --as-measured DEGRADED`): the
//     degraded file with its faults.
// Each simulation runs in a forked child (one SimGrid Engine per process): one for
// the micro figures, single-device steps and DDP (a process per rank), one for
// DataParallel (workers are threads of one process).
#pragma once
#include <vector>

#include "scenarios/lib/verify_check.hpp"
#include "scenarios/lib/verify_faults.hpp"
#include "scenarios/lib/verify_measure.hpp"
#include "scenarios/lib/verify_properties.hpp"
#include "sim/hardware.hpp"

namespace dpt::verify {

// Figures of the first config.devices GPUs of `hw` as the twin simulates them
// (shape-only: costs without data). Throws std::invalid_argument when the
// hardware has fewer GPUs than asked.
Figures simulate_figures(const sim::HardwareSpec& hw, const Faults& faults, const MeasureConfig& config,
                         const MeasureParts& parts = {});

// The correctness properties run on the twin's SimBackend in numeric mode (the host
// kernels, the twin's communicators and copies), in one forked simulation; the
// observer sees each check as it finishes (it runs in the child).
std::vector<CheckResult> run_correctness_in_twin(const sim::HardwareSpec& hw, const CorrectnessOptions& options,
                                                 const CheckObserver& observer);

}  // namespace dpt::verify
