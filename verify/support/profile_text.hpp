// A measured profile as dptwin_profile writes it, the base that model-file and predict
// tests extend (a key added to the measured block, times added to the last layer).
#pragma once
#include <string>

namespace dpt::test {

// A two-layer profile as dptwin_profile writes it: times for the batch of 4.
inline std::string profile_yaml(const std::string& measured_extra, const std::string& layer_extra) {
  return R"(schema_version: 1
name: "Net"
sample: "one sample"
input_features: 8
sources: ["dptwin_profile"]
totals: {parameters: 36, forward_flops_per_sample: 72, activation_elements_per_sample: 12}
measured:
  device: "NVIDIA H100 80GB HBM3"
  device_kind: cuda
  torch: "2.3.0"
  dtype: f32
  batch: 4
  optimizer: adamw
  steps: 10
  warmup_steps: 3
  step_s: 0.01
  forward_s: 0.004
  backward_s: 0.005
  optimizer_step_s: 0.001
)" + measured_extra + R"(layers:
  - name: "0"
    type: Linear
    forward_flops_per_sample: 72
    activation_elements_per_sample: 8
    output_features: 4
    forward_s: 0.002
    backward_s: 0.003
    parameters:
      - {name: weight, shape: [4, 8], requires_grad: false}
      - {name: bias, shape: [4]}
  - name: "1"
    type: ReLU
    forward_flops_per_sample: 0
    activation_elements_per_sample: 4
    output_features: 4
    parameters: []
)" + layer_extra;
}

}  // namespace dpt::test
