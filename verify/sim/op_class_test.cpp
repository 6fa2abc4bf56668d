// The twin's compute model per op class, its interference model and DDP's per-step
// costs: properties, each shown to fail on a planted bug (a named Fault).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include <rapidcheck/detail/Configuration.h>

#include "engine/core/fault_injection.hpp"
#include "engine/nn/model.hpp"
#include "sim/net/hardware.hpp"
#include "sim/twin/predict.hpp"
#include "verify/support/rc_property.hpp"
#include "sim/twin/sim_device.hpp"

namespace dpt {
namespace {

using test::expect_property_holds;
using test::property_fails;

const SimOpClass kClasses[] = {SimOpClass::gemm, SimOpClass::conv,      SimOpClass::attention,
                               SimOpClass::norm, SimOpClass::elementwise, SimOpClass::embedding,
                               SimOpClass::loss, SimOpClass::optimizer, SimOpClass::sdpa};

// An op of class `c` as the engine names it.
OpCost op_of_class(SimOpClass c, double flops, Bytes read, Bytes written) {
  const char* names[] = {"gemm_fwd", "conv_fwd", "attention_fwd", "norm_fwd", "elementwise_fwd", "embedding_fwd",
                         "cross_entropy", "adamw_step", "sdpa_fwd"};
  return OpCost{names[static_cast<int>(c)], OpKind::compute, flops, read, written};
}

// Random rates: every efficiency in (0, 1], as the hardware file's bounds allow.
rc::Gen<SimGpuRates> gen_rates() {
  return rc::gen::exec([] {
    SimGpuRates r;
    r.model = "test-gpu";
    r.peak_flops[DType::f32] = *rc::gen::inRange(1, 1000) * 1e12;
    r.memory_bandwidth = *rc::gen::inRange(100, 10000) * 1e9;
    r.compute_efficiency = *rc::gen::inRange(1, 101) / 100.0;
    r.memory_efficiency = *rc::gen::inRange(1, 101) / 100.0;
    for (auto& e : r.op_efficiency)
      if (*rc::gen::arbitrary<bool>()) e = *rc::gen::inRange(1, 101) / 100.0;
    r.launch_latency_s = *rc::gen::inRange(0, 10) * 1e-6;
    return r;
  });
}

// Invariant: no kernel beats its datasheet roofline, max(flops / peak, bytes / bandwidth):
// every class's efficiency is at most 1, and a memory-bound class never moves its bytes
// faster than the memory allows.
auto roofline_property() {
  return [] {
    const SimGpuRates r = *gen_rates();
    const SimOpClass c = *rc::gen::elementOf(std::vector<SimOpClass>(std::begin(kClasses), std::end(kClasses)));
    const double flops = *rc::gen::inRange(0, 1000000) * 1e6;
    const Bytes read = *rc::gen::inRange<Bytes>(0, 1000000) * 4096, written = *rc::gen::inRange<Bytes>(0, 1000000) * 4096;
    const OpCost op = op_of_class(c, flops, read, written);
    RC_ASSERT(sim_op_class(op) == c);
    const Seconds t = sim_kernel_time_s(op, r, DType::f32);
    const Seconds bound = std::max(flops / r.peak_flops.at(DType::f32),
                                   static_cast<double>(read + written) / r.memory_bandwidth);
    RC_ASSERT(t >= bound * (1 - 1e-12));
  };
}

TEST(OpClass, NoKernelBeatsItsDatasheetRoofline) { expect_property_holds(roofline_property(), 300); }

TEST(OpClass, PlantedBugMemoryBoundOpsIgnoringBytesIsCaught) {
  ScopedFault f(Fault::opclass_ignores_bytes);
  EXPECT_TRUE(property_fails(roofline_property(), 300));
}

// A memory-bound op class costs exactly bytes / (bandwidth x its fraction) when its FLOPs
// are negligible: the efficiency field is what the time follows.
TEST(OpClass, MemoryBoundTimeIsBytesOverAchievedBandwidth) {
  SimGpuRates r;
  r.model = "test-gpu";
  r.peak_flops[DType::f32] = 10e12;
  r.memory_bandwidth = 1000e9;
  r.op_efficiency[static_cast<size_t>(SimOpClass::norm)] = 0.5;
  const OpCost norm = op_of_class(SimOpClass::norm, 0, 500'000'000, 500'000'000);  // 1 GB moved
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(norm, r, DType::f32), 1e9 / (1000e9 * 0.5));  // 2 ms
  r.op_efficiency[static_cast<size_t>(SimOpClass::conv)] = 0.25;
  const OpCost conv = op_of_class(SimOpClass::conv, 10e12, 0, 0);
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(conv, r, DType::f32), 10e12 / (10e12 * 0.25));  // 4 s
}

// A one-GPU hardware file with `gpu_extra` (indented lines) at the end of its gpu section
// and `tail` (top-level keys) after its host.
std::string hardware_text(const std::string& gpu_extra, const std::string& tail) {
  return R"(nodes: 1
gpus_per_node: 1
gpu:
  name: test
  peak_flops: {f32: 10 TFLOPS, f64: 5 TFLOPS}
  memory: 16 GiB
  memory_bandwidth: 900 GB/s
  kernel_launch_latency: 4 us
)" + gpu_extra + R"(pcie: {generation: 3, lanes: 16, latency: 1 us, peer_to_peer: true}
host: {cpu: x, sockets: 1, cores: 8, memory_bandwidth: 50 GB/s, inter_socket_bandwidth: 10 GB/s, dispatch_cost: 10 us, gil: true}
)" + tail;
}

// The hardware file refuses an efficiency above 1, naming the key.
TEST(OpClass, HardwareFileRejectsEfficiencyAboveOne) {
  const std::string text = hardware_text("  op_efficiency: {conv: 1.2}\n", "");
  try {
    (void)sim::parse_hardware_yaml(text, "test.yaml");
    FAIL() << "accepted conv efficiency 1.2";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpu.op_efficiency.conv"), std::string::npos) << e.what();
  }
}

// ---- compute and memory overlap at the ridge ------------------------------------------

// A GEMM-class op of `flops` FLOPs moving `bytes` bytes on a GPU of 100 TFLOPS and 1 TB/s at
// efficiency 1: 1 ms per 100 GFLOP and per GB.
SimGpuRates ridge_rates(double p) {
  SimGpuRates r;
  r.model = "test-gpu";
  r.peak_flops[DType::f32] = 100e12;
  r.memory_bandwidth = 1000e9;
  r.ridge_exponent = p;
  return r;
}

// Hand-computed: at the ridge (1 ms of compute, 1 ms of memory) a GEMM takes 2^(2/3) =
// 1.5874010520 ms at p = 1.5, not max = 1 ms; compute-bound 10:1 it takes 10 (1 + 0.1^1.5)^(2/3)
// = 10.2097227336 ms. A memory-bound class, a convolution with the file's own conv figure,
// and p = infinity keep the plain roofline's max.
TEST(RidgeOverlap, HandComputedTimes) {
  const SimGpuRates r = ridge_rates(1.5);
  const OpCost ridge = op_of_class(SimOpClass::gemm, 100e9, 500'000'000, 500'000'000);
  EXPECT_NEAR(sim_kernel_time_s(ridge, r, DType::f32), 1.5874010520e-3, 1e-12);
  const OpCost compute_bound = op_of_class(SimOpClass::gemm, 1e12, 500'000'000, 500'000'000);
  EXPECT_NEAR(sim_kernel_time_s(compute_bound, r, DType::f32), 10.2097227336e-3, 1e-12);
  const OpCost attention = op_of_class(SimOpClass::attention, 100e9, 500'000'000, 500'000'000);
  EXPECT_NEAR(sim_kernel_time_s(attention, r, DType::f32), 1.5874010520e-3, 1e-12);
  const OpCost conv = op_of_class(SimOpClass::conv, 100e9, 500'000'000, 500'000'000);
  EXPECT_NEAR(sim_kernel_time_s(conv, r, DType::f32), 1.5874010520e-3, 1e-12);  // takes the GEMM figure
  const OpCost norm = op_of_class(SimOpClass::norm, 100e9, 500'000'000, 500'000'000);
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(norm, r, DType::f32), 1e-3);
  SimGpuRates stated = r;  // a convolution figure timed on convolution layers holds its ridge
  stated.op_efficiency_by_type[ComputeType::f32][static_cast<size_t>(SimOpClass::conv)] = 1.0;
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(conv, stated, DType::f32), 1e-3);
  EXPECT_NEAR(sim_kernel_time_s(ridge, stated, DType::f32), 1.5874010520e-3, 1e-12);  // GEMMs still overlap in part
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(ridge, ridge_rates(std::numeric_limits<double>::infinity()), DType::f32), 1e-3);
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(ridge, ridge_rates(1.0), DType::f32), 2e-3);  // p = 1: the sum
  EXPECT_THROW((void)sim_ridge_time_s(1e-3, 1e-3, 0.5), std::invalid_argument);
}

// Invariant: a compute-bound kernel with compute time c and memory time m costs at least the
// roofline's max(c, m) and at most their sum, the less the larger p; at its ridge (c = m)
// it costs 2^(1/p) max(c, m), at least 2^(1/16) = 1.044 times the roofline in the file's
// range of p.
auto ridge_property() {
  return [] {
    const double p = *rc::gen::inRange(100, 1601) / 100.0;  // the file's range, 1 .. 16
    const double flops = *rc::gen::inRange(1, 100000) * 1e6;
    const Bytes bytes = *rc::gen::inRange<Bytes>(1, 100000) * 4096;
    const SimOpClass c = *rc::gen::elementOf(std::vector<SimOpClass>{SimOpClass::gemm, SimOpClass::conv, SimOpClass::attention});
    const OpCost op = op_of_class(c, flops, bytes, 0);
    const Seconds compute = flops / 100e12, memory = static_cast<double>(bytes) / 1000e9;
    const Seconds t = sim_kernel_time_s(op, ridge_rates(p), DType::f32);
    RC_ASSERT(t >= std::max(compute, memory) * (1 - 1e-12));
    RC_ASSERT(t <= (compute + memory) * (1 + 1e-12));
    RC_ASSERT(sim_kernel_time_s(op, ridge_rates(std::min(16.0, p + 1.0)), DType::f32) <= t * (1 + 1e-12));
    const OpCost ridge = op_of_class(c, static_cast<double>(bytes) * 100.0, bytes, 0);  // 100 FLOPs a byte
    RC_ASSERT(sim_kernel_time_s(ridge, ridge_rates(p), DType::f32) >= 1.044 * memory);
  };
}

TEST(RidgeOverlap, BetweenTheRooflineAndTheSum) { expect_property_holds(ridge_property(), 300); }

TEST(RidgeOverlap, PlantedBugFullOverlapIsCaught) {
  ScopedFault f(Fault::roofline_max_at_ridge);
  EXPECT_TRUE(property_fails(ridge_property(), 300));
}

// The default exponent reproduces the microbenchmark it comes from (Azure/AI-benchmarking-
// guide, Azure_Results/): cuBLASLt on an 802,816 x 192 x 768 GEMM (236,760,072,192 FLOPs; A
// and B read, D written, beta 0), timed against the same page's own 8192^3 GEMM rate and
// STREAM copy bandwidth. ND A100 v4, FP16 in and out: 157.8 TFLOPS measured (1.50038 ms), 253.7
// TFLOPS and 1.61 TB/s (0.93323 ms compute, 0.95758 ms memory for 1.5417 GB: the plain roofline
// says 0.958 ms, 36 % fast). ND H200 v5, FP8 in and FP16 out (superbench's cublaslt_gemm):
// 717.5 TFLOPS (0.32998 ms), 1300.6 TFLOPS and 4.01 TB/s (0.92499 GB). (ND H100 v5 on the
// same terms: 663.8 measured, 586 from p = 1.5, 14 % slow; 1.5 fits it exactly if its output
// was FP8; the page does not say.)
TEST(RidgeOverlap, DefaultExponentReproducesItsSourceMicrobenchmark) {
  const double flops = 236'760'072'192.0;
  auto time = [&](double peak, double bandwidth, Bytes read, Bytes written) {
    SimGpuRates r = ridge_rates(sim::EfficiencySpec{}.ridge_exponent);
    r.peak_flops[DType::f32] = peak;
    r.memory_bandwidth = bandwidth;
    return sim_kernel_time_s(op_of_class(SimOpClass::gemm, flops, read, written), r, DType::f32);
  };
  const Bytes a_b = 802'816LL * 768 + 768LL * 192, d = 802'816LL * 192;
  EXPECT_NEAR(time(253.7e12, 1.61e12, 2 * a_b, 2 * d), 1.50038e-3, 0.01 * 1.50038e-3);  // A100, FP16
  EXPECT_NEAR(time(1300.6e12, 4.01e12, a_b, 2 * d), 0.32998e-3, 0.01 * 0.32998e-3);     // H200, FP8 -> FP16
}

// The hardware file reads efficiency.ridge_exponent and refuses one below 1, naming the key.
TEST(RidgeOverlap, HardwareFileReadsAndBoundsTheExponent) {
  auto file = [](const std::string& exponent) { return hardware_text("", "efficiency: {ridge_exponent: " + exponent + "}\n"); };
  EXPECT_DOUBLE_EQ(sim::parse_hardware_yaml(file("2.25"), "test.yaml").efficiency.ridge_exponent, 2.25);
  EXPECT_DOUBLE_EQ(sim_gpu_rates(sim::parse_hardware_yaml(file("2.25"), "test.yaml")).ridge_exponent, 2.25);
  for (const char* bad : {"0.5", "17", "-1", "x"}) {
    try {
      (void)sim::parse_hardware_yaml(file(bad), "test.yaml");
      FAIL() << "accepted ridge_exponent " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("efficiency.ridge_exponent"), std::string::npos) << e.what();
    }
  }
}

// ---- interference -------------------------------------------------------------------

rc::Gen<std::vector<SimKernelSpan>> gen_kernels() {
  return rc::gen::exec([] {
    std::vector<SimKernelSpan> ks;
    const int n = *rc::gen::inRange(0, 20);
    for (int i = 0; i < n; ++i) {
      const double start = *rc::gen::inRange(0, 1000) * 1e-4, len = *rc::gen::inRange(1, 100) * 1e-4;
      ks.push_back({start, start + len, *rc::gen::arbitrary<bool>()});
    }
    return ks;
  });
}
rc::Gen<std::vector<SimCollectiveSpan>> gen_collectives() {
  return rc::gen::exec([] {
    std::vector<SimCollectiveSpan> cs;
    const int n = *rc::gen::inRange(0, 5);
    for (int i = 0; i < n; ++i) {
      const double start = *rc::gen::inRange(0, 1000) * 1e-4, len = *rc::gen::inRange(1, 100) * 1e-4;
      cs.push_back({start, start + len, *rc::gen::inRange<Bytes>(1, 1 << 20) * 1024});
    }
    return cs;
  });
}
SimGpuRates interference_rates() {
  SimGpuRates r;
  r.memory_bandwidth = 2000e9;
  r.memory_efficiency = 0.85;
  r.sm_count = 108;
  r.nccl_channels = 8;
  return r;
}

// Invariant: NCCL kernels never speed compute up (the extra time is >= 0), the extra
// time is positive exactly when some kernel overlaps some collective, and it is never
// more than the time they overlap: a collective under compute costs the step at most
// what it would exposed.
auto interference_property() {
  return [] {
    const auto ks = *gen_kernels();
    const auto cs = *gen_collectives();
    Seconds overlapped = 0;
    for (const auto& k : ks)
      for (const auto& c : cs) overlapped += std::max(0.0, std::min(k.end, c.end) - std::max(k.start, c.start));
    const Seconds extra = sim_interference_s(ks, cs, interference_rates());
    RC_ASSERT(extra >= 0.0);
    RC_ASSERT((extra > 0.0) == (overlapped > 0.0));
    RC_ASSERT(extra <= overlapped * (1 + 1e-12));
  };
}

TEST(Interference, NeverSpeedsComputeAndVanishesWithoutOverlap) { expect_property_holds(interference_property(), 300); }

TEST(Interference, PlantedBugCreditingTheOverlapIsCaught) {
  ScopedFault f(Fault::interference_speeds_compute);
  EXPECT_TRUE(property_fails(interference_property(), 300));
}

TEST(Interference, PlantedBugCompoundingTheShareIsCaught) {
  // Caught only where a memory-bound kernel sits under a collective taking over half the
  // bandwidth: 300 random cases missed it in 5 of 30 seeds, 3,000 in none of 100.
  ScopedFault f(Fault::interference_share_compounded);
  EXPECT_TRUE(property_fails(interference_property(), 3000));
}

// One compute-bound kernel fully under a collective that holds 8 of 108 SMs loses 8/108
// of its duration; a memory-bound one under a collective taking half the achieved
// bandwidth for the whole kernel loses half of it (it ends its last half-millisecond of
// work at full rate after the collective).
TEST(Interference, ShareOfSmsAndBandwidth) {
  const SimGpuRates r = interference_rates();
  EXPECT_NEAR(sim_interference_s({{0.0, 1e-3, false}}, {{0.0, 1e-3, 1}}, r), 1e-3 * 8.0 / 108.0, 1e-12);
  const Bytes half = static_cast<Bytes>(0.5 * 2000e9 * 0.85 * 1e-3);
  EXPECT_NEAR(sim_interference_s({{0.0, 1e-3, true}}, {{0.0, 1e-3, half}}, r), 0.5e-3, 1e-9);
}

// ---- DDP's per-step costs -------------------------------------------------------------

sim::HardwareSpec one_gpu_node() {
  sim::HardwareSpec hw;
  hw.name = "test-node";
  hw.gpus_per_node = 1;
  hw.gpu.name = "test-gpu";
  hw.gpu.peak_flops.f32 = 10e12;
  hw.gpu.peak_flops.f64 = 5e12;
  hw.gpu.memory_bytes = 16 * kGiB;
  hw.gpu.memory_bandwidth = 900e9;
  hw.gpu.kernel_launch_latency_s = 4e-6;
  hw.pcie.latency_s = 1e-6;
  hw.host.cpu = "test-cpu";
  hw.host.memory_bandwidth = 50e9;
  hw.host.inter_socket_bandwidth = 10e9;
  hw.host.dispatch_cost_s = 10e-6;
  hw.host.gil = true;
  sim::validate_hardware(hw);
  return hw;
}

// Host operations DDP dispatches in one step beyond the single-device step, on one GPU.
double ddp_extra_ops(const MlpSpec& spec) {
  const sim::HardwareSpec hw = one_gpu_node();
  PredictConfig c;
  c.devices = 1;
  c.batch_per_device = 32;
  c.model_name = "mlp";
  c.input_features = spec.widths.front();
  c.output_features = spec.widths.back();
  c.single_device_baseline = false;
  auto build = [spec](Device& d) { return make_mlp(spec, d, DType::f32, 1234); };
  c.strategy = StrategyKind::single;
  const PredictDetail single = predict_step_detailed(hw, build, c);
  c.strategy = StrategyKind::ddp;
  const PredictDetail ddp = predict_step_detailed(hw, build, c);
  return (ddp.dispatch_total_s - single.dispatch_total_s) / hw.host.dispatch_cost_s;
}

// Invariant: on one GPU, DDP's step is the single-device step plus, per gradient, one
// copy into its bucket with the division fused (mul_out) and one copy back out
// (gradient_as_bucket_view false), plus one all-reduce launch per bucket: 2 P + B ops.
// The MLP's 8 parameters (80 KiB) fit the first 1 MiB bucket: B = 1.
TEST(DdpCosts, OneGpuStepAddsOnlyTheBucketCopies) {
  MlpSpec spec;
  spec.widths = {64, 64, 64, 64, 64};  // 4 Linear layers: 8 parameters
  const double extra = ddp_extra_ops(spec);
  EXPECT_LE(extra, 2 * 8 + 1 + 0.5);
  EXPECT_GE(extra, 2 * 8 - 0.5);
  ScopedFault f(Fault::ddp_unfused_divide);  // a scale kernel per gradient on top of the copies
  EXPECT_GT(ddp_extra_ops(spec), 2 * 8 + 1 + 0.5);
}

// ---- kernel time by op class in the step report ---------------------------------------

// Invariant: every device's kernel time by op class adds up to its busy time (the compute
// and optimizer kernels of the step), each part positive, and names only op classes. An
// MLP of random widths under a random strategy on one GPU (single, DDP) has GEMM, elementwise,
// loss and optimizer kernels.
auto kernel_time_by_class_property() {
  return [] {
    MlpSpec spec;
    const int layers = *rc::gen::inRange(1, 5);
    for (int i = 0; i <= layers; ++i) spec.widths.push_back(*rc::gen::inRange(1, 65) * 16);
    const sim::HardwareSpec hw = one_gpu_node();
    PredictConfig c;
    c.devices = 1;
    c.batch_per_device = *rc::gen::inRange(1, 65);
    c.model_name = "mlp";
    c.input_features = spec.widths.front();
    c.output_features = spec.widths.back();
    c.single_device_baseline = false;
    c.strategy = *rc::gen::element(StrategyKind::single, StrategyKind::ddp);
    auto build = [spec](Device& d) { return make_mlp(spec, d, DType::f32, 1234); };
    const StepReport r = predict_step_detailed(hw, build, c).report;
    RC_ASSERT(!r.devices_detail.empty());
    for (const auto& d : r.devices_detail) {
      Seconds sum = 0;
      for (const auto& [name, s] : d.kernel_time_by_class_s) {
        RC_ASSERT(s > 0);
        bool known = false;
        for (SimOpClass k : kClasses) known = known || name == sim_op_class_name(k);
        RC_ASSERT(known);
        sum += s;
      }
      RC_ASSERT(d.busy_s > 0);
      RC_ASSERT(std::abs(sum - d.busy_s) <= 1e-9 * d.busy_s);
    }
  };
}

TEST(KernelTimeByClass, AddsUpToEachDevicesBusyTime) { expect_property_holds(kernel_time_by_class_property(), 30); }

TEST(KernelTimeByClass, PlantedBugDroppingMemoryBoundKernelsIsCaught) {
  ScopedFault f(Fault::op_class_breakdown_drops_memory_bound);
  EXPECT_TRUE(property_fails(kernel_time_by_class_property(), 30));
}

// Wave quantization, counted by hand: on Tensor Cores a 256 x 128 tile per SM per wave.
// A100 (108 SMs): [4608, 1024] is 18 x 8 = 144 tiles, 2 waves (216 slots): 2/3;
// [4608, 3072] 18 x 24 = 432 tiles, exactly 4 waves: 1; the 8192^2 reference 32 x 64 =
// 2048 tiles, 19 waves: 2048 / 2052. A 300-row output needs 2 row tiles (512 rows) on one
// wave: 300 x 128 / (108 x 256 x 128). SIMT f32 on V100 (80 SMs, 128 x 128): [4608, 1024]
// is 36 x 8 = 288 tiles, 4 waves: 288 / 320.
TEST(GemmWaves, HandCountedWaveEfficiencies) {
  EXPECT_DOUBLE_EQ(sim_gemm_wave_efficiency({4608, 1024, 1024}, 108, ComputeType::tf32), 144.0 / 216.0);
  EXPECT_DOUBLE_EQ(sim_gemm_wave_efficiency({4608, 3072, 1024}, 108, ComputeType::tf32), 1.0);
  EXPECT_DOUBLE_EQ(sim_gemm_wave_efficiency({8192, 8192, 8192}, 108, ComputeType::tf32), 2048.0 / 2052.0);
  EXPECT_DOUBLE_EQ(sim_gemm_wave_efficiency({300, 128, 64}, 108, ComputeType::tf32), 300.0 / (108.0 * 256.0));
  EXPECT_DOUBLE_EQ(sim_gemm_wave_efficiency({4608, 1024, 1024}, 80, ComputeType::f32), 288.0 / 320.0);
  EXPECT_THROW(sim_gemm_wave_efficiency({0, 1024, 1024}, 80, ComputeType::f32), std::invalid_argument);
}

// The reference keeps the microbenchmark's figure: a GEMM op at the 8192^3 shape costs what
// it cost before shapes were modelled; V100's [4608, 1024] GEMM costs 4096 / 4160 (the
// reference's 52 waves for 4096 tiles) x 320 / 288 more, and only the GEMM class pays it.
TEST(GemmWaves, KernelTimeRelativeToTheReferenceShape) {
  SimGpuRates r;
  r.model = "v100-like";
  r.peak_flops[DType::f32] = 15.7e12;
  r.memory_bandwidth = 900e9;
  r.compute_efficiency = 0.89;
  r.sm_count = 80;
  auto op = [](const char* name, std::int64_t m, std::int64_t n, std::int64_t k) {
    OpCost c{name, OpKind::compute, 2.0 * static_cast<double>(m * n) * static_cast<double>(k), 0, 0};
    c.gemms.push_back({m, n, k});
    return c;
  };
  auto unshaped = [](OpCost c) {
    c.gemms.clear();
    return c;
  };
  const OpCost reference = op("gemm_fwd", 8192, 8192, 8192), bert = op("gemm_fwd", 4608, 1024, 1024);
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(reference, r, DType::f32), sim_kernel_time_s(unshaped(reference), r, DType::f32));
  EXPECT_NEAR(sim_kernel_time_s(bert, r, DType::f32) / sim_kernel_time_s(unshaped(bert), r, DType::f32),
              (4096.0 / 4160.0) * (320.0 / 288.0), 1e-12);
  const OpCost conv = op("conv_fwd", 4608, 1024, 1024);
  EXPECT_DOUBLE_EQ(sim_kernel_time_s(conv, r, DType::f32), sim_kernel_time_s(unshaped(conv), r, DType::f32));
}

// Invariant (the guide's wave rule): the last, partial wave takes a full wave's time, so a
// GEMM of T full tiles costs what one of ceil(T / SMs) x SMs tiles costs, FLOPs notwithstanding.
auto partial_wave_property() {
  return [] {
    SimGpuRates r;
    r.model = "test-gpu";
    r.peak_flops[DType::f32] = 100e12;
    r.compute_efficiency = 0.5;  // times the shape factor (at most 1 / 0.91 here): below 1
    r.sm_count = *rc::gen::inRange(1, 201);
    const std::int64_t waves = *rc::gen::inRange(1, 6), k = *rc::gen::inRange(1, 64) * 64;
    const std::int64_t full = waves * r.sm_count;
    const std::int64_t tiles = *rc::gen::inRange<std::int64_t>(full - r.sm_count + 1, full + 1);
    auto time = [&](std::int64_t t) {
      const GemmShape g{t * 128, 128, k};  // SIMT f32: t tiles of 128 x 128 in one column
      OpCost c{"gemm_fwd", OpKind::compute, 2.0 * static_cast<double>(g.m * g.n) * static_cast<double>(k), 0, 0};
      c.gemms.push_back(g);
      return sim_kernel_time_s(c, r, DType::f32);
    };
    RC_ASSERT(std::abs(time(tiles) - time(full)) <= 1e-9 * time(full));
  };
}

TEST(GemmWaves, PartialWaveTakesAFullWave) { expect_property_holds(partial_wave_property(), 300); }

TEST(GemmWaves, PlantedBugIgnoringWavesIsCaught) {
  ScopedFault f(Fault::gemm_wave_quantization_ignored);
  EXPECT_TRUE(property_fails(partial_wave_property(), 300));
}

}  // namespace
}  // namespace dpt
