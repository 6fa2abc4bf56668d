// Measured layer costs on another GPU kind. A dptwin_profile model file holds per-layer
// forward and backward times measured on one device. On that GPU kind the twin charges
// them as they are; on another GPU it scales each by its op class: the ratio of the
// layer's roofline time on the target GPU to that on the GPU it was measured on (the
// library hardware file whose GPU matches the profile's device), from the layer's FLOPs
// and bytes. Without a matching library GPU the times are kept and a warning says so.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "engine/core/precision.hpp"
#include "engine/nn/model_library.hpp"
#include "sim/net/hardware.hpp"
#include "sim/twin/sim_device.hpp"

namespace dpt::scenario {

// The start of every note resolve_measured_costs returns, so a report can find it among
// a prediction's warnings.
inline constexpr std::string_view kMeasuredCostsNote = "measured layer costs: ";

// The roofline time of a layer's forward (backward: twice its FLOPs) for `batch` samples
// on a GPU, without launch latency (a measured time includes its own launches): its
// kernel's op class, FLOPs and bytes (input, output, parameters, saved activations)
// through sim_kernel_time_s. `input_features` is the layer's per-sample input size.
Seconds layer_roofline_s(const LayerDescription& l, std::int64_t input_features, std::int64_t batch, bool backward,
                         const SimGpuRates& rates, Precision precision);

// Makes a profiled model's measured times fit a prediction on `target` in `precision`:
// same GPU kind and dtype: unchanged; another dtype, or a CPU profile with no gpu_model:
// dropped (apply_measured_costs);
// another GPU kind found in `hardware_dir`: scaled per layer by layer_roofline_s's ratio;
// a device no library GPU matches: unchanged. Returns the note that says which
// (kMeasuredCostsNote first), empty for a model without a profile.
std::string resolve_measured_costs(ModelDescription& m, const sim::HardwareSpec& target, Precision precision,
                                   const std::filesystem::path& hardware_dir);

}  // namespace dpt::scenario
