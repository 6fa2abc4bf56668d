// A profiled model's measured layer times on another GPU: used as measured on the GPU
// kind they came from, scaled by op class to another library GPU, kept (with a warning)
// when no library GPU is the profiled device.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <unistd.h>

#include "engine/core/fault_injection.hpp"
#include "engine/core/gpu_names.hpp"
#include "scenarios/report/report_assumptions.hpp"
#include "scenarios/scenario/measured_scaling.hpp"
#include "scenarios/scenario/model_library_yaml.hpp"
#include "scenarios/scenario/scenario.hpp"

namespace dpt::scenario {
namespace {

namespace fs = std::filesystem;
const fs::path kHardware = fs::path(DPT_SOURCE_DIR) / "scenarios" / "hardware";

// Datasheet figures as the two hardware files state them (their comments name the
// datasheets): FP32 peak and HBM bandwidth of the A100-SXM4-80GB and the H100-SXM5-80GB;
// and the fraction of it a streaming kernel reaches, each file's efficiency.memory_bandwidth
// (Azure/AI-benchmarking-guide's BabelStream runs on those parts: 0.81 and 0.88); and the
// fraction of the FP32 peak an f32 GEMM reaches: the A100 file states none for f32 (the
// default efficiency.gemm, 0.74 since 2026-12-07), the H100 file a public 8192^2 matmul run's
// 0.774.
constexpr double kA100F32Flops = 19.5e12, kH100F32Flops = 66.9e12;
constexpr double kA100GemmFraction = 0.74, kH100GemmFraction = 0.774;
constexpr double kA100BytesPerS = 2039e9, kH100BytesPerS = 3.35e12;
constexpr double kA100StreamFraction = 0.81, kH100StreamFraction = 0.88;
constexpr double kBatch = 8192;
constexpr double kForwardS = 0.001, kBackwardS = 0.002;  // per layer, for the batch

// A 8192x8192 Linear (compute-bound on both GPUs: 1.1 TFLOP against 1.07 GB, about 1,000
// FLOPs a byte) and a ReLU (memory-bound: 67 MFLOP against 0.8 GB), measured on `device` at
// batch 8192 in f32.
fs::path write_profile(const fs::path& dir, const std::string& device, const std::string& kind) {
  fs::create_directories(dir);
  const fs::path file = dir / "profiled.yaml";
  std::ofstream(file) << R"(schema_version: 1
name: profiled
sample: one 8192-feature vector
input_features: 8192
sources: [test]
totals: {parameters: 67117056, forward_flops_per_sample: 134234112, activation_elements_per_sample: 16384}
measured:
  device: ")" << device << R"("
  device_kind: ")" << kind << R"("
  torch: "2.3.0"
  dtype: f32
  batch: 8192
  optimizer: sgd
  steps: 10
  warmup_steps: 3
  step_s: 0.007
  forward_s: 0.002
  backward_s: 0.004
  optimizer_step_s: 0.001
layers:
  - name: "0"
    type: Linear
    forward_flops_per_sample: 134225920
    activation_elements_per_sample: 8192
    output_features: 8192
    forward_s: 0.001
    backward_s: 0.002
    parameters:
      - {name: weight, shape: [8192, 8192]}
      - {name: bias, shape: [8192]}
  - name: "1"
    type: ReLU
    forward_flops_per_sample: 8192
    activation_elements_per_sample: 8192
    output_features: 8192
    forward_s: 0.001
    backward_s: 0.002
    parameters: []
)";
  return file;
}

struct Resolved {
  ModelDescription model;
  std::string note;
};

Resolved resolve_on(const std::string& device, const std::string& hardware, const std::string& kind = "cuda") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("dpt-measured-scaling-{}", ::getpid());
  Resolved r{load_model_file(write_profile(dir, device, kind)), ""};
  fs::remove_all(dir);
  r.note = resolve_measured_costs(r.model, sim::load_hardware(hardware, kHardware), Precision::f32, kHardware);
  return r;
}

bool near(double got, double want, double rel = 1e-9) { return std::abs(got - want) <= rel * std::abs(want); }

// Invariant: the Linear's times scale by the FP32 peak ratio and the ReLU's by the ratio of
// the bandwidths a streaming kernel reaches (each class by its own bound), per sample.
// The Linear's compute and memory overlap in part (efficiency.ridge_exponent): at about 1/109
// (A100) and 1/57 (H100) memory to compute time that adds 0.06 % and 0.16 %, so its ratio is
// the peak ratio within 0.2 %; the ReLU, memory-bound, takes the bandwidth ratio exactly.
bool scaled_by_datasheet(const ModelDescription& m) {
  const double gemm = (kA100F32Flops * kA100GemmFraction) / (kH100F32Flops * kH100GemmFraction);
  const double stream = (kA100BytesPerS * kA100StreamFraction) / (kH100BytesPerS * kH100StreamFraction);
  return near(*m.layers[0].measured_forward_s_per_sample, kForwardS / kBatch * gemm, 2e-3) &&
         near(*m.layers[0].measured_backward_s_per_sample, kBackwardS / kBatch * gemm, 2e-3) &&
         near(*m.layers[1].measured_forward_s_per_sample, kForwardS / kBatch * stream) &&
         near(*m.layers[1].measured_backward_s_per_sample, kBackwardS / kBatch * stream);
}

bool unchanged(const ModelDescription& m) {
  for (const auto& l : m.layers)
    if (!l.measured_forward_s_per_sample || !near(*l.measured_forward_s_per_sample, kForwardS / kBatch) ||
        !l.measured_backward_s_per_sample || !near(*l.measured_backward_s_per_sample, kBackwardS / kBatch))
      return false;
  return true;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(MeasuredScaling, A100ProfileOnH100ScalesEachLayerByItsOpClass) {
  const auto r = resolve_on("NVIDIA A100-SXM4-80GB", "dgx-h100");
  EXPECT_TRUE(scaled_by_datasheet(r.model));
  EXPECT_TRUE(contains(r.note, "measured on NVIDIA A100-SXM4-80GB")) << r.note;
  EXPECT_TRUE(contains(r.note, "scaled by op class to H100-SXM5-80GB")) << r.note;
  EXPECT_EQ(r.note.rfind(kMeasuredCostsNote, 0), 0u) << r.note;
}

TEST(MeasuredScaling, SameGpuKindKeepsTheMeasuredTimes) {
  const auto r = resolve_on("NVIDIA A100-SXM4-80GB", "dgx-a100");
  EXPECT_TRUE(unchanged(r.model));
  EXPECT_TRUE(contains(r.note, "used as measured on A100-SXM4-80GB")) << r.note;
}

TEST(MeasuredScaling, UnknownDeviceKeepsTheTimesAndSaysSo) {
  const auto r = resolve_on("NVIDIA Z9000 Prototype", "dgx-h100");
  EXPECT_TRUE(unchanged(r.model));
  EXPECT_TRUE(contains(r.note, "measured on NVIDIA Z9000 Prototype")) << r.note;
  EXPECT_TRUE(contains(r.note, "not scaled")) << r.note;
}

TEST(MeasuredScaling, CpuProfileOnAGpuFallsBackToFlopsAndBytes) {
  const auto r = resolve_on("cpu: AMD EPYC 7742", "dgx-h100", "cpu");
  for (const auto& l : r.model.layers) EXPECT_FALSE(l.measured_forward_s_per_sample.has_value()) << l.name;
  EXPECT_TRUE(contains(r.note, "do not apply")) << r.note;
}

TEST(MeasuredScaling, PlantedFaultLeavesTheTimesUnscaled) {
  const ScopedFault fault(Fault::profile_scale_ignored);
  const auto r = resolve_on("NVIDIA A100-SXM4-80GB", "dgx-h100");
  EXPECT_FALSE(scaled_by_datasheet(r.model));  // the property above catches it
}

TEST(MeasuredScaling, ReportAssumptionsStateTheScaling) {
  const auto r = resolve_on("NVIDIA A100-SXM4-80GB", "dgx-h100");
  SweepResult sweep;
  PointResult p;
  p.report = StepReport{};
  p.report->warnings = {"an unrelated warning", r.note};
  sweep.points.push_back(p);
  const auto section = report::assumptions_section(sweep, report::AssumptionsInput{});
  bool found = false;
  for (const auto& row : section.tables.at(0).rows)
    if (row.at(0) == "measured layer costs") {
      found = true;
      EXPECT_TRUE(contains(row.at(1), "scaled by op class to H100-SXM5-80GB")) << row.at(1);
      EXPECT_FALSE(contains(row.at(1), "unrelated")) << row.at(1);
    }
  EXPECT_TRUE(found);
}

// A profile measured on an RTX 3090 has no GPU of its own in the library, and an RTX 4090 is
// not its kind: on rtx4090-1x-pcie4 it is scaled by op class from the 3090's file (the
// fidelity table's machine), not used as measured (the first word of the name, "RTX", had
// matched every RTX card: a code review).
TEST(MeasuredScaling, AnRtx3090ProfileIsScaledToAnRtx4090) {
  const auto r = resolve_on("NVIDIA GeForce RTX 3090", "rtx4090-1x-pcie4");
  EXPECT_FALSE(unchanged(r.model)) << r.note;
  EXPECT_TRUE(contains(r.note, "scaled by op class to RTX-4090-24GB")) << r.note;
  EXPECT_TRUE(contains(r.note, "measured on NVIDIA GeForce RTX 3090")) << r.note;
}

// Invariant: a CUDA device name is a hardware file's GPU when the model's words appear whole
// in it, the board (PCIe or not) agrees, and a memory size both give agrees. Each negative
// below is a mix-up a looser rule made or would make (a substring "A10" in "A100", the first
// word "RTX", the H100 PCIe against the SXM5's "80GB HBM3" name, the A100's 40 and 80 GB).
TEST(GpuNames, DeviceNamesAreTheFilesGpusAndNoOthers) {
  struct Case {
    const char* device;
    const char* gpu;
    bool same;
  };
  const Case cases[] = {
      {"NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB", true},
      {"NVIDIA A100 80GB PCIe", "A100-PCIe-80GB", true},
      {"NVIDIA A100-PCIE-40GB", "A100-PCIe-40GB", true},
      {"NVIDIA H100 80GB HBM3", "H100-SXM5-80GB", true},
      {"NVIDIA H100 PCIe", "H100-PCIe-80GB", true},
      {"NVIDIA A10", "A10-24GB", true},
      {"NVIDIA GeForce RTX 3090", "RTX-3090-24GB", true},
      {"NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada-48GB", true},
      {"Quadro RTX 8000", "Quadro-RTX-8000-48GB", true},
      {"NVIDIA TITAN RTX", "TITAN-RTX-24GB", true},
      {"NVIDIA GeForce RTX 2080 Ti", "RTX-2080Ti-11GB", true},
      {"Tesla V100-SXM2-16GB", "V100-SXM2-16GB", true},
      {"NVIDIA H200", "H200-SXM-141GB", true},
      {"NVIDIA RTX A6000", "RTX-A6000-48GB", true},
      {"NVIDIA A100-SXM4-80GB", "A10-24GB", false},
      {"NVIDIA A10G", "A10-24GB", false},
      {"NVIDIA GeForce RTX 3090", "RTX-4090-24GB", false},
      {"NVIDIA GeForce RTX 4090", "RTX-6000-Ada-48GB", false},
      {"NVIDIA H100 PCIe", "H100-SXM5-80GB", false},
      {"NVIDIA H100 80GB HBM3", "H100-PCIe-80GB", false},
      {"NVIDIA A100-PCIE-40GB", "A100-PCIe-80GB", false},
      {"NVIDIA A100-SXM4-40GB", "A100-SXM4-80GB", false},
      {"Quadro RTX 6000", "Quadro-RTX-8000-48GB", false},
      {"NVIDIA TITAN RTX", "RTX-A6000-48GB", false},
      {"NVIDIA A100-SXM4-80GB", "", false},
  };
  for (const Case& c : cases) EXPECT_EQ(same_gpu_kind(c.device, c.gpu), c.same) << c.device << " / " << c.gpu;
  // The model alone: another board of the same model is the same model.
  EXPECT_TRUE(same_gpu_model("NVIDIA H100 PCIe", "H100-SXM5-80GB"));
  EXPECT_FALSE(same_gpu_model("NVIDIA A100-SXM4-80GB", "A10-24GB"));
}

}  // namespace
}  // namespace dpt::scenario
