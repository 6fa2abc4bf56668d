// The twin's compute model per compute type: op-class fractions stated per compute type,
// and the layout transposes of Tensor Core convolutions on NCHW (not channels_last) tensors. Properties, each
// shown to fail on a planted bug (a named Fault).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>

#include "engine/core/fault_injection.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/hardware_yaml.hpp"
#include "sim/twin/predict.hpp"
#include "sim/twin/sim_device.hpp"
#include "verify/support/rc_property.hpp"

namespace dpt {
namespace {

using test::expect_property_holds;
using test::property_fails;

// A GPU with f32 and tf32 peaks and random fractions: the conv class's one fraction, and
// a different one per compute type (f32 below 0.5, tf32 above, the class's in between).
struct TypedRates {
  SimGpuRates rates;
  double conv_class = 0, conv_f32 = 0, conv_tf32 = 0;
};
rc::Gen<TypedRates> gen_typed_rates() {
  return rc::gen::exec([] {
    TypedRates t;
    SimGpuRates& r = t.rates;
    r.model = "test-gpu";
    r.peak_flops[DType::f32] = *rc::gen::inRange(1, 100) * 1e12;
    r.compute_peak_flops[ComputeType::f32] = r.peak_flops[DType::f32];
    r.compute_peak_flops[ComputeType::tf32] = *rc::gen::inRange(100, 1000) * 1e12;
    r.memory_bandwidth = *rc::gen::inRange(100, 5000) * 1e9;
    r.compute_efficiency = *rc::gen::inRange(1, 101) / 100.0;
    r.memory_efficiency = *rc::gen::inRange(1, 101) / 100.0;
    t.conv_f32 = *rc::gen::inRange(1, 40) / 100.0;
    t.conv_class = *rc::gen::inRange(41, 60) / 100.0;
    t.conv_tf32 = *rc::gen::inRange(61, 101) / 100.0;
    const auto conv = static_cast<size_t>(SimOpClass::conv);
    r.op_efficiency[conv] = t.conv_class;
    r.op_efficiency_by_type[ComputeType::f32][conv] = t.conv_f32;
    r.op_efficiency_by_type[ComputeType::tf32][conv] = t.conv_tf32;
    r.launch_latency_s = *rc::gen::inRange(0, 10) * 1e-6;
    return t;
  });
}

OpCost conv_op(double flops, Bytes read, Bytes written) {
  return OpCost{"conv_fwd", OpKind::compute, flops, read, written, OpClass::conv};
}

// Invariant: a compute type's own fraction is what its ops' time follows: a convolution of
// F FLOPs (no bytes) costs F / (peak[t] x fraction[t]) + launch in the type t it runs in
// (f32 by dtype, tf32 under precision tf32); neither takes the class's single fraction.
auto typed_fraction_property() {
  return [] {
    const TypedRates t = *gen_typed_rates();
    const double flops = *rc::gen::inRange(1, 1000000) * 1e6;
    const OpCost op = conv_op(flops, 0, 0);
    const SimGpuRates& r = t.rates;
    const Seconds f32 = sim_kernel_time_s(op, r, DType::f32);
    const Seconds tf32 = sim_kernel_time_s(op, r, Precision::tf32);
    RC_ASSERT(std::abs(f32 - (flops / (r.compute_peak_flops.at(ComputeType::f32) * t.conv_f32) + r.launch_latency_s)) <=
              1e-9 * f32);
    RC_ASSERT(std::abs(tf32 - (flops / (r.compute_peak_flops.at(ComputeType::tf32) * t.conv_tf32) +
                               r.launch_latency_s)) <= 1e-9 * tf32);
  };
}

TEST(OpComputeType, EachTypeFollowsItsOwnFraction) { expect_property_holds(typed_fraction_property(), 300); }

TEST(OpComputeType, PlantedBugIgnoringTheComputeTypeIsCaught) {
  ScopedFault f(Fault::op_efficiency_ignores_compute_type);
  EXPECT_TRUE(property_fails(typed_fraction_property(), 300));
}

// Invariant: a Tensor Core convolution on NCHW tensors is its roofline plus cuDNN's
// transposes, serial: every byte it reads and writes read and written once more at the
// elementwise fraction of the bandwidth; in f32 (CUDA cores read NCHW) it is its roofline.
// Under TF32 cuDNN may also run its FP32 kernels (allow_tf32 permits TF32, it does not force
// it) and runs the faster: the TF32 time is the lesser of the two.
auto transpose_property() {
  return [] {
    const TypedRates t = *gen_typed_rates();
    const SimGpuRates& r = t.rates;
    const double flops = *rc::gen::inRange(0, 1000000) * 1e6;
    const Bytes read = *rc::gen::inRange<Bytes>(1, 1000000) * 4096, written = *rc::gen::inRange<Bytes>(0, 1000000) * 4096;
    const OpCost op = conv_op(flops, read, written);
    const double bytes = static_cast<double>(read + written);
    const double bandwidth = r.memory_bandwidth * r.memory_efficiency;
    const Seconds roof_f32 =
        std::max(flops / (r.compute_peak_flops.at(ComputeType::f32) * t.conv_f32), bytes / bandwidth) + r.launch_latency_s;
    const Seconds roof_tf32 =
        std::max(flops / (r.compute_peak_flops.at(ComputeType::tf32) * t.conv_tf32), bytes / bandwidth) +
        r.launch_latency_s;
    const Seconds transposes = 2 * bytes / bandwidth;  // elementwise takes the streaming fraction here
    const Seconds f32 = sim_kernel_time_s(op, r, DType::f32);
    const Seconds tf32 = sim_kernel_time_s(op, r, Precision::tf32);
    RC_ASSERT(std::abs(f32 - roof_f32) <= 1e-9 * f32);
    RC_ASSERT(std::abs(tf32 - std::min(roof_tf32 + transposes, roof_f32)) <= 1e-9 * tf32);
  };
}

// Invariant: a fused attention kernel (sdpa) in f32 runs at its f32 figure under
// --precision tf32 as under f32 (the memory-efficient kernel's f32 path ignores allow_tf32),
// while a GEMM under tf32 takes TF32's peak. Planted: sdpa-tf32-allowed.
auto sdpa_f32_property() {
  return [] {
    TypedRates t = *gen_typed_rates();
    SimGpuRates& r = t.rates;
    r.op_efficiency_by_type[ComputeType::f32][static_cast<size_t>(SimOpClass::sdpa)] = *rc::gen::inRange(1, 101) / 100.0;
    r.op_efficiency_by_type[ComputeType::tf32][static_cast<size_t>(SimOpClass::sdpa)] = 1.0;
    const double flops = *rc::gen::inRange(1, 1000000) * 1e6;
    const OpCost sdpa{"sdpa_fwd", OpKind::compute, flops, 0, 0, OpClass::matmul};
    const OpCost gemm{"gemm_fwd", OpKind::compute, flops, 0, 0, OpClass::matmul};
    RC_ASSERT(sim_kernel_time_s(sdpa, r, Precision::tf32) == sim_kernel_time_s(sdpa, r, Precision::f32));
    RC_ASSERT(sim_kernel_time_s(gemm, r, Precision::tf32) < sim_kernel_time_s(gemm, r, Precision::f32));
  };
}

TEST(OpComputeType, FusedAttentionInF32IgnoresTf32) { expect_property_holds(sdpa_f32_property(), 200); }

TEST(OpComputeType, PlantedBugSdpaOnTf32IsCaught) {
  ScopedFault f(Fault::sdpa_tf32_allowed);
  EXPECT_TRUE(property_fails(sdpa_f32_property(), 200));
}

TEST(OpComputeType, TensorCoreConvsPayTheLayoutTransposes) { expect_property_holds(transpose_property(), 300); }

TEST(OpComputeType, PlantedBugFreeTransposesIsCaught) {
  ScopedFault f(Fault::conv_nchw_transposes_free);
  EXPECT_TRUE(property_fails(transpose_property(), 300));
}

// Invariant: on channels_last tensors (model.to(memory_format=torch.channels_last)) a
// Tensor Core convolution is its roofline alone: cuDNN reads and writes NHWC, so no
// transpose is charged; the same op on NCHW tensors costs exactly the transposes more, and in
// f32 the layout changes nothing.
auto channels_last_property() {
  return [] {
    const TypedRates t = *gen_typed_rates();
    const SimGpuRates& r = t.rates;
    const double flops = *rc::gen::inRange(0, 1000000) * 1e6;
    const Bytes read = *rc::gen::inRange<Bytes>(1, 1000000) * 4096, written = *rc::gen::inRange<Bytes>(0, 1000000) * 4096;
    OpCost nhwc = conv_op(flops, read, written);
    nhwc.channels_last = true;
    const OpCost nchw = conv_op(flops, read, written);
    const double bytes = static_cast<double>(read + written);
    const double bandwidth = r.memory_bandwidth * r.memory_efficiency;
    const Seconds roof_tf32 =
        std::max(flops / (r.compute_peak_flops.at(ComputeType::tf32) * t.conv_tf32), bytes / bandwidth) +
        r.launch_latency_s;
    const Seconds tf32 = sim_kernel_time_s(nhwc, r, Precision::tf32);
    RC_ASSERT(std::abs(tf32 - roof_tf32) <= 1e-9 * tf32);
    const Seconds f32 = sim_kernel_time_s(nhwc, r, DType::f32);
    RC_ASSERT(std::abs(f32 - sim_kernel_time_s(nchw, r, DType::f32)) <= 1e-12 * f32);
    // NCHW: the transposes more, unless cuDNN's FP32 kernels are faster still.
    RC_ASSERT(std::abs(sim_kernel_time_s(nchw, r, Precision::tf32) - std::min(tf32 + 2 * bytes / bandwidth, f32)) <=
              1e-9 * tf32);
  };
}

TEST(OpComputeType, ChannelsLastConvsPayNoTransposes) { expect_property_holds(channels_last_property(), 300); }

// Invariant: an op made of several kernels (a layer's convolutions, OpCost::parts) costs the
// sum of each kernel's own roofline, max(FLOPs / (peak x fraction), bytes / bandwidth), plus
// one launch: a memory-bound 1x1 convolution is not hidden under the FLOPs of a compute-bound
// 3x3 beside it. So it is never below the roofline of the summed FLOPs and bytes, and equals
// it when every part has the same FLOPs per byte. (f32: no layout transposes.)
auto per_kernel_roofline_property() {
  return [] {
    const TypedRates t = *gen_typed_rates();
    const SimGpuRates& r = t.rates;
    const int n = *rc::gen::inRange(2, 6);
    OpCost op = conv_op(0, 0, 0);
    double bytes = 0;
    Seconds expected = r.launch_latency_s;
    const double peak = r.compute_peak_flops.at(ComputeType::f32) * t.conv_f32;
    const double bandwidth = r.memory_bandwidth * r.memory_efficiency;
    for (int i = 0; i < n; ++i) {
      const double f = *rc::gen::inRange(0, 1000000) * 1e6, b = *rc::gen::inRange(1, 1000000) * 4096.0;
      op.parts.push_back({f, b});
      op.flops += f;
      bytes += b;
      expected += std::max(f / peak, b / bandwidth);
    }
    op.bytes_read = static_cast<Bytes>(bytes);
    const Seconds got = sim_kernel_time_s(op, r, DType::f32);
    RC_ASSERT(std::abs(got - expected) <= 1e-9 * got);
    RC_ASSERT(got >= std::max(op.flops / peak, bytes / bandwidth) + r.launch_latency_s - 1e-12 * got);
    // The same parts scaled to one FLOPs-per-byte ratio: exactly the aggregate roofline.
    OpCost uniform = op;
    for (auto& p : uniform.parts) p.flops = op.flops * p.bytes / bytes;
    const Seconds flat = sim_kernel_time_s(uniform, r, DType::f32);
    RC_ASSERT(std::abs(flat - (std::max(op.flops / peak, bytes / bandwidth) + r.launch_latency_s)) <= 1e-9 * flat);
  };
}

TEST(OpComputeType, EachConvolutionTakesItsOwnRoofline) { expect_property_holds(per_kernel_roofline_property(), 300); }

TEST(OpComputeType, PlantedBugOneRooflineForAllConvolutionsIsCaught) {
  ScopedFault f(Fault::conv_roofline_aggregated);
  EXPECT_TRUE(property_fails(per_kernel_roofline_property(), 300));
}

// Invariant: cuDNN runs the fastest kernel PyTorch allows it. Under TF32 (allow_tf32) an
// NCHW convolution never costs more than the same convolution in f32 on CUDA cores, nor
// more than TF32 with the layout transposes. Hand-computed (ridge at max, efficiency 1,
// 1 TFLOP and 1 GB, 1 TB/s): on a GPU whose TF32 rate is its FP32 rate (80 TFLOPS, as on
// GeForce Ampere and Ada) TF32 costs 12.5 + 1 -> 12.5 ms of compute plus 2 ms of transposes
// = 14.5 ms, FP32 12.5 ms: 12.5 ms; on an A100 (19.5 / 156 TFLOPS) TF32 6.41 + 2 = 8.41 ms,
// FP32 51.3 ms: 8.41 ms.
auto fastest_allowed_property() {
  return [] {
    const TypedRates t = *gen_typed_rates();
    SimGpuRates r = t.rates;
    // TF32 from equal to FP32's rate to 8x it, as GPUs have them.
    r.compute_peak_flops[ComputeType::tf32] = r.compute_peak_flops.at(ComputeType::f32) * *rc::gen::inRange(10, 81) / 10.0;
    const double flops = *rc::gen::inRange(0, 1000000) * 1e6;
    const Bytes read = *rc::gen::inRange<Bytes>(1, 1000000) * 4096, written = *rc::gen::inRange<Bytes>(0, 1000000) * 4096;
    const OpCost op = conv_op(flops, read, written);
    const Seconds tf32 = sim_kernel_time_s(op, r, Precision::tf32), f32 = sim_kernel_time_s(op, r, DType::f32);
    RC_ASSERT(tf32 <= f32 * (1 + 1e-12));
    OpCost nhwc = op;
    nhwc.channels_last = true;
    const double bandwidth = r.memory_bandwidth * r.memory_efficiency;
    RC_ASSERT(tf32 <= (sim_kernel_time_s(nhwc, r, Precision::tf32) + 2.0 * static_cast<double>(read + written) / bandwidth) *
                          (1 + 1e-12));
  };
}

TEST(OpComputeType, CudnnRunsTheFastestKernelItIsAllowed) {
  expect_property_holds(fastest_allowed_property(), 300);
  SimGpuRates r;
  r.model = "test-gpu";
  r.memory_bandwidth = 1e12;
  const OpCost op = conv_op(1e12, 500'000'000, 500'000'000);
  r.peak_flops[DType::f32] = r.compute_peak_flops[ComputeType::f32] = r.compute_peak_flops[ComputeType::tf32] = 80e12;
  EXPECT_NEAR(sim_kernel_time_s(op, r, Precision::tf32), 12.5e-3, 1e-12);
  r.peak_flops[DType::f32] = r.compute_peak_flops[ComputeType::f32] = 19.5e12;
  r.compute_peak_flops[ComputeType::tf32] = 156e12;
  EXPECT_NEAR(sim_kernel_time_s(op, r, Precision::tf32), 1e12 / 156e12 + 2e-3, 1e-12);
}

TEST(OpComputeType, PlantedBugTf32ForcedIsCaught) {
  ScopedFault f(Fault::tf32_convs_forced);
  EXPECT_TRUE(property_fails(fastest_allowed_property(), 300));
}

TEST(OpComputeType, PlantedBugTransposesOnChannelsLastIsCaught) {
  ScopedFault f(Fault::channels_last_transposes_charged);
  EXPECT_TRUE(property_fails(channels_last_property(), 300));
}

const char* kGpuFile = R"(nodes: 1
gpus_per_node: 1
gpu:
  name: test
  peak_flops: {f32: 19.5 TFLOPS, tf32: 156 TFLOPS, f64: 9.7 TFLOPS}
  memory: 16 GiB
  memory_bandwidth: 900 GB/s
  kernel_launch_latency: 4 us
  op_efficiency: {conv: {f32: 0.7, tf32: 0.4}, norm: 0.6}
pcie: {generation: 3, lanes: 16, latency: 1 us, peer_to_peer: true}
host: {cpu: x, sockets: 1, cores: 8, memory_bandwidth: 50 GB/s, inter_socket_bandwidth: 10 GB/s, dispatch_cost: 10 us, gil: true}
)";

// A class's fraction may be a map of compute types; the twin's rates carry each, and
// writing the file back keeps them.
TEST(OpComputeType, HardwareFileReadsAndWritesPerTypeFractions) {
  const sim::HardwareSpec hw = sim::parse_hardware_yaml(kGpuFile, "test.yaml");
  const auto conv = static_cast<size_t>(SimOpClass::conv);
  EXPECT_FALSE(hw.gpu.op_efficiency.conv.has_value());
  EXPECT_EQ(hw.gpu.op_efficiency.by_type[conv].at(ComputeType::f32), 0.7);
  EXPECT_EQ(hw.gpu.op_efficiency.by_type[conv].at(ComputeType::tf32), 0.4);
  EXPECT_EQ(hw.gpu.op_efficiency.norm, 0.6);
  const SimGpuRates rates = sim_gpu_rates(hw);
  EXPECT_EQ(sim_op_efficiency(rates, SimOpClass::conv, ComputeType::tf32), 0.4);
  EXPECT_EQ(sim_op_efficiency(rates, SimOpClass::conv, ComputeType::f32), 0.7);
  // bf16 is not listed: the class's default (efficiency.gemm, 0.74 unless the file says).
  EXPECT_EQ(sim_op_efficiency(rates, SimOpClass::conv, ComputeType::bf16), rates.compute_efficiency);
  const sim::HardwareSpec back = sim::parse_hardware_yaml(sim::hardware_yaml(hw), "back.yaml");
  EXPECT_EQ(back.gpu.op_efficiency.by_type[conv], hw.gpu.op_efficiency.by_type[conv]);
}

// An unknown compute type in the map is an error naming the key.
TEST(OpComputeType, HardwareFileRejectsAnUnknownComputeType) {
  std::string text = kGpuFile;
  text.replace(text.find("tf32: 0.4"), 9, "fp8: 0.4");
  try {
    (void)sim::parse_hardware_yaml(text, "test.yaml");
    FAIL() << "accepted compute type fp8";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fp8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dpt
