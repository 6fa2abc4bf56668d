#include "scenarios/scenario/measured_scaling.hpp"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "engine/nn/cost_layer.hpp"
#include "sim/twin/predict.hpp"

namespace dpt::scenario {

Seconds layer_roofline_s(const LayerDescription& l, std::int64_t input_features, std::int64_t batch, bool backward,
                         const SimGpuRates& rates, Precision precision) {
  const OpClass op_class = layer_op_class(l);
  const Bytes elt = dtype_size_bytes(precision_activation_dtype(precision, op_class));
  Bytes param_bytes = 0;
  for (const auto& p : l.parameters) param_bytes += shape_numel(p.shape) * elt;
  const Bytes in = input_features * batch * elt, out = l.output_features * batch * elt;
  const Bytes saved = l.activation_elements_per_sample * batch * elt;
  const auto [fwd_name, bwd_name] = cost_layer_kernel_names(l);
  const double flops = l.forward_flops_per_sample * static_cast<double>(batch);
  // As CostLayer charges it: forward reads input and parameters, writes output and saved
  // activations; backward reads output gradient, saved activations and parameters, writes
  // the input and parameter gradients.
  const OpCost cost = backward ? OpCost{bwd_name, OpKind::compute, 2.0 * flops, out + saved + param_bytes,
                                        in + param_bytes, op_class}
                               : OpCost{fwd_name, OpKind::compute, flops, in + param_bytes, out + saved, op_class};
  SimGpuRates no_launch = rates;
  no_launch.launch_latency_s = 0;
  return sim_kernel_time_s(cost, no_launch, precision);
}

namespace {

// The first hardware file whose GPU is the kind the profile was measured on: the library's,
// then the fidelity table's machines (single A10s, RTX cards, PCIe A100s and H100s).
std::optional<sim::HardwareSpec> find_source_gpu(const MeasuredProfile& p, const std::filesystem::path& hardware_dir) {
  auto names = sim::list_hardware(hardware_dir);
  const auto measured = sim::list_measured_hardware(hardware_dir);
  names.insert(names.end(), measured.begin(), measured.end());
  for (const auto& name : names) {
    sim::HardwareSpec hw = sim::load_hardware(name, hardware_dir);
    if (measured_on_gpu_kind(p, hw.gpu.name)) return hw;
  }
  return std::nullopt;
}

// Multiplies each layer's measured times by its roofline ratio target / source; returns
// the smallest and largest ratio applied.
std::pair<double, double> scale_layers(ModelDescription& m, const SimGpuRates& source, const SimGpuRates& target,
                                       Precision precision) {
  const std::int64_t batch = m.measured->batch;
  double lo = 0, hi = 0;
  std::int64_t in = m.input_features;
  for (auto& l : m.layers) {
    for (bool backward : {false, true}) {
      const Seconds src = layer_roofline_s(l, in, batch, backward, source, precision);
      const Seconds dst = layer_roofline_s(l, in, batch, backward, target, precision);
      const double ratio = src > 0 ? dst / src : 1.0;  // a layer with no FLOPs and no bytes keeps its time
      lo = lo == 0 ? ratio : std::min(lo, ratio);
      hi = std::max(hi, ratio);
      auto& t = backward ? l.measured_backward_s_per_sample : l.measured_forward_s_per_sample;
      // Planted fault: the ratio is computed and reported but not applied.
      if (t && !fault_active(Fault::profile_scale_ignored)) *t *= ratio;
    }
    in = l.output_features;
  }
  return {lo, hi};
}

}  // namespace

std::string resolve_measured_costs(ModelDescription& m, const sim::HardwareSpec& target, Precision precision,
                                   const std::filesystem::path& hardware_dir) {
  if (!m.measured) return "";
  const MeasuredProfile& p = *m.measured;
  const std::string dtype(dtype_name(precision_parameter_dtype(precision)));
  const std::string gpu = target.gpu.name;
  // A CPU profile not tied to a hardware file's GPU says nothing about a GPU's kernels:
  // apply_measured_costs drops it, and the layers cost their FLOPs and bytes.
  const bool cpu_unnamed = p.device_kind == "cpu" && !p.gpu_model;
  if (measured_on_gpu_kind(p, gpu) || p.dtype != dtype || cpu_unnamed)
    return std::string(kMeasuredCostsNote) + apply_measured_costs(m, gpu, dtype);
  const auto source = find_source_gpu(p, hardware_dir);
  if (!source)
    return fmt::format("{}model {}: measured on {}, which no GPU of the hardware library ({}) is: its per-layer "
                       "times are used unchanged on {}, not scaled",
                       kMeasuredCostsNote, m.name, p.device, hardware_dir.string(), gpu);
  const auto [lo, hi] = scale_layers(m, sim_gpu_rates(*source), sim_gpu_rates(target), precision);
  return fmt::format("{}model {}: measured on {} ({} in the library), scaled by op class to {}: each layer's time "
                     "times its roofline time on {} over that on {} (x{:.3g} to x{:.3g})",
                     kMeasuredCostsNote, m.name, p.device, source->gpu.name, gpu, gpu, source->gpu.name, lo, hi);
}

}  // namespace dpt::scenario
