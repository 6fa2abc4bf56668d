// The correctness properties of `dptwin verify` run on the twin's SimBackend in
// numeric mode (host kernels, the twin's communicators and copies).
#pragma once
#include <vector>

#include "scenarios/measure/twin_figures.hpp"
#include "scenarios/verify/verify_check.hpp"
#include "scenarios/verify/verify_properties.hpp"
#include "sim/net/hardware.hpp"

namespace dpt::verify {

// One forked simulation; the observer sees each check as it finishes (it runs in
// the child).
std::vector<CheckResult> run_correctness_in_twin(const sim::HardwareSpec& hw, const CorrectnessOptions& options,
                                                 const CheckObserver& observer);

}  // namespace dpt::verify
