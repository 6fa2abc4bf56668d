// SimDevice: one modelled GPU of the twin. It implements Device, so the strategies
// run on it unchanged: in numeric mode its kernels are the host kernels (the same
// Thrust and OpenBLAS code as the host backend, so gradients are bitwise equal);
// in shape-only mode it allocates nothing and runs nothing, and tensors carry only
// their shapes. Either way every submitted op costs simulated time on the device's
// compute stream:
//
//   time = max(flops / (peak[compute type] x compute_efficiency),
//              bytes / (memory_bandwidth x memory_efficiency)) + launch_latency
//
// The compute type is the dtype's (f32, f64) unless a precision is set: then each op
// class (matmul, conv, other) runs in the type the precision gives it on this GPU
// (precision_compute_type; a GPU has TF32 when its file states a tf32 peak).
//
// Streams are timelines, not actors: a kernel starts when both the host has
// dispatched it and the stream is free, so a step of a 1,024-rank model costs
// arithmetic, not SimGrid context switches. Copies and collectives are SimGrid
// activities on the platform's links; a stream that must wait for one holds it
// as pending and resolves it (waits for it) when the next op needs the stream.
#pragma once
#include <array>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/core/dtype.hpp"

namespace simgrid::s4u {
class Host;
}

namespace dpt {

struct TraceEvent;

// A kernel's layer, op class and pass as the trace shows them (copied from OpScope).
struct KernelLabel {
  std::string layer, op_class, pass;
};

class SimBackend;

// What a kernel is, for its efficiency: compute-bound classes reach a fraction of their
// compute type's peak, memory-bound ones a fraction of the memory bandwidth.
// sdpa: fused attention kernels (scaled_dot_product_attention's flash or memory-efficient
// kernels), compute-bound; attention: eager attention's batched matmuls.
enum class SimOpClass { gemm, conv, attention, norm, elementwise, embedding, loss, optimizer, sdpa };
inline constexpr int kSimOpClassCount = 9;
const char* sim_op_class_name(SimOpClass c);
bool sim_op_class_memory_bound(SimOpClass c);

// The rates of one modelled GPU, read from the hardware file.
struct SimGpuRates {
  std::string model;                          // e.g. "H100-SXM5-80GB"
  std::map<DType, FlopsPerSecond> peak_flops;  // datasheet peak per dtype (dense)
  // Datasheet dense peaks per compute type (tf32, bf16, f16 where the GPU has them;
  // f32 and f64 default to peak_flops' entries).
  std::map<ComputeType, FlopsPerSecond> compute_peak_flops;
  double compute_efficiency = 1.0;            // fraction of peak a GEMM reaches
  BytesPerSecond memory_bandwidth = 0;        // datasheet HBM bandwidth
  double memory_efficiency = 1.0;             // fraction of it a streaming kernel reaches
  // A compute-bound kernel's time (c^p + m^p)^(1/p) of its compute and memory times
  // (efficiency.ridge_exponent); infinity (the default here): max(c, m), the plain roofline.
  double ridge_exponent = std::numeric_limits<double>::infinity();
  Seconds launch_latency_s = 0;               // per kernel
  std::optional<Bytes> capacity_bytes;        // device memory; none: unbounded
  // Per op class (SimOpClass order): its fraction of the peak (compute-bound) or of the
  // bandwidth (memory-bound); unset: compute_efficiency or memory_efficiency.
  std::array<std::optional<double>, kSimOpClassCount> op_efficiency{};
  // Per compute type (the file's per-type maps): taken before op_efficiency when the op
  // runs in that type.
  std::map<ComputeType, std::array<std::optional<double>, kSimOpClassCount>> op_efficiency_by_type;
  int sm_count = 0;       // streaming multiprocessors; 0: unknown (NCCL takes no SMs from compute)
  int nccl_channels = 0;  // channels (one block each) of this device's collectives; 0: none
  // A host worker whose collectives are CPU work on its own core (gloo over loopback TCP):
  // the share s of the core a collective takes from overlapping compute; 0: none. The
  // collective keeps its pace, so compute overlapping it for o seconds takes o x s longer.
  double collective_core_share = 0.0;
};

// The class of an op: the optimizer's and the loss's kernels by name, the others by
// their name's prefix (conv_, gemm_, attention_, norm_/layernorm, embedding_: how cost
// layers and the engine's kernels name them), then by the precision's op class; the
// rest (copies, scales, activations) elementwise.
SimOpClass sim_op_class(const OpCost& cost);
// The fraction of its rate an op class reaches on this GPU: in compute type `t` when the
// file states one for it, else the class's fraction, else the GEMM or streaming default.
double sim_op_efficiency(const SimGpuRates& rates, SimOpClass c);
double sim_op_efficiency(const SimGpuRates& rates, SimOpClass c, ComputeType t);
// A compute-bound kernel's time from its compute and memory times near its ridge:
// (c^p + m^p)^(1/p), p >= 1 (1: their sum; infinity: max, the plain roofline). Throws on
// p < 1 or NaN.
Seconds sim_ridge_time_s(Seconds compute_s, Seconds memory_s, double p);
// Whether the file states a convolution figure of its own for compute type `t`
// (op_efficiency.conv, one figure or per type): timed on convolution layers, it holds what
// their ridge costs, so such convolutions keep max(c, m).
bool sim_conv_figure_stated(const SimGpuRates& rates, SimOpClass c, ComputeType t);

// Wave quantization (NVIDIA's "Matrix Multiplication Background User's Guide"): a GEMM
// computes its [m, n] output in tiles, one thread block each, spread over the SMs in
// waves; the last, partial wave takes a full wave's time, and a tile past the matrix's
// edge is computed whole (tile quantization). The tile is cuBLAS's large-tile kernel's:
// 256 x 128 on Tensor Cores (ampere_tf32_s1688gemm_tf32_256x128_*, the guide's A100
// example), 128 x 128 for SIMT f32/f64 (volta_sgemm_128x128_*), as profilers name them.
struct SimGemmTile {
  std::int64_t rows = 0, cols = 0;
};
SimGemmTile sim_gemm_tile(ComputeType t);
// The fraction of its SMs' tile slots a GEMM fills: m n / (waves x sm_count x tile area).
double sim_gemm_wave_efficiency(const GemmShape& g, int sm_count, ComputeType t);
// The op's GEMM class fraction is the microbenchmark's, at an 8192^3 product; its own
// GEMMs (cost.gemms) reach their wave efficiency relative to that one's, the rest of
// its FLOPs 1. Returns the FLOP-weighted harmonic mean (the fraction times it is capped
// at 1 by the roofline); 1 without an SM count or listed GEMMs.
double sim_gemm_shape_factor(const OpCost& cost, int sm_count, ComputeType t);

// Tensor Core convolutions read and write NHWC; on PyTorch's default NCHW tensors cuDNN
// transposes every tensor a convolution reads and writes before and after it (NVIDIA's
// Convolutional Layers User's Guide, "Tensor Layouts In Memory: NCHW vs NHWC"). Whether a
// conv kernel in compute type `t` pays that: the Tensor Core types tf32, bf16 and f16.
bool sim_conv_transposes_layout(ComputeType t);

// A compute kernel and a collective as the interference model sees them.
struct SimKernelSpan {
  Seconds start = 0, end = 0;
  bool memory_bound = false;
};
struct SimCollectiveSpan {
  Seconds start = 0, end = 0;
  Bytes hbm_bytes = 0;  // what the NCCL kernel reads and writes in this GPU's memory
};
// Interference: while an NCCL kernel runs it holds nccl_channels of sm_count SMs and
// hbm_bytes / duration of the memory bandwidth, so a compute kernel that overlaps it for
// o seconds loses the share s it cannot use (SMs if compute-bound, bandwidth if
// memory-bound; at most 0.9): it takes o x s / (1 - s) longer. On a host worker
// (collective_core_share s > 0) the collective keeps its pace and the kernel gets 1 - s of
// the core while they overlap: o x s longer. Returns the total extra
// time; 0 when nothing overlaps. First order: the stretch does not move later overlaps.
Seconds sim_interference_s(const std::vector<SimKernelSpan>& kernels, const std::vector<SimCollectiveSpan>& collectives,
                           const SimGpuRates& rates);

// The cost model above, as a pure function (tests check it directly). Throws
// std::invalid_argument when the rates have no peak for `dtype`.
Seconds sim_kernel_time_s(const OpCost& cost, const SimGpuRates& rates, DType dtype);
// The same under a training precision: the op's compute type is
// precision_compute_type(p, cost.op_class, the GPU has tf32). Throws
// std::invalid_argument naming the GPU, the precision and the missing peak.
Seconds sim_kernel_time_s(const OpCost& cost, const SimGpuRates& rates, Precision p);
// The dense peak of `t` on the GPU; 0 when the file states none.
FlopsPerSecond sim_peak_flops(const SimGpuRates& rates, ComputeType t);

// Whether an op belongs to the optimizer (reported separately in the breakdown).
bool sim_op_is_optimizer(const OpCost& cost);

enum class SimStream { compute = 0, copy = 1, communication = 2 };
inline constexpr int kSimStreamCount = 3;
const char* sim_stream_name(SimStream s);

// Something a stream must wait for: a copy or collective whose end time is known
// only once SimGrid has simulated it.
class SimPending {
 public:
  virtual ~SimPending() = default;
  // Blocks the calling actor until the activity finished; returns its end time.
  virtual Seconds wait_end() = 0;
};

// One stream's timeline.
struct SimStreamState {
  Seconds free_at = 0;                                 // when its last known work ends
  std::vector<std::shared_ptr<SimPending>> pending;    // activities it waits for
};

// Per-device accounting over a measured window (see SimDevice::begin_window).
struct SimDeviceAccount {
  Seconds compute_busy_s = 0;    // non-optimizer kernels
  Seconds optimizer_busy_s = 0;  // optimizer kernels
  Seconds exposed_comm_s = 0;    // compute stream idle while a copy or collective of this device ran
  Seconds exposed_host_copy_s = 0;  // the part of exposed_comm_s when only host<->device copies ran
  Seconds idle_other_s = 0;      // compute stream idle otherwise (waiting for the host)
  Seconds interference_s = 0;    // extra compute time from NCCL kernels' SMs and bandwidth (sim_interference_s)
  std::int64_t kernels = 0;
  // Kernel time by op class (SimOpClass order), optimizer kernels included: the parts of
  // compute_busy_s + optimizer_busy_s.
  std::array<Seconds, kSimOpClassCount> kernel_s_by_class{};
};

class SimDevice : public Device {
 public:
  // index >= 0: GPU `index` on `host`; index -1: the host memory of the node whose
  // CPU is `host` (copies to and from it use that node's links).
  SimDevice(SimBackend& backend, int index, std::string name, SimGpuRates rates, simgrid::s4u::Host* host,
            DType compute_dtype, bool numeric, std::optional<Precision> precision = std::nullopt);
  int index() const override { return index_; }
  DeviceKind kind() const override { return index_ < 0 ? DeviceKind::cpu_host : DeviceKind::sim; }
  std::string name() const override { return name_; }
  bool computes() const override { return numeric_; }
  void submit(const OpCost& cost, const std::function<void()>& fn) override;
  void synchronize() override;
  Kernels& kernels() override;
  std::optional<Bytes> capacity_bytes() const override { return index_ < 0 ? std::nullopt : rates_.capacity_bytes; }

  const SimGpuRates& rates() const { return rates_; }
  simgrid::s4u::Host* host() const { return host_; }

  // When `stream` can start new work: waits for its pending activities (blocking
  // the calling actor if they are still running).
  Seconds stream_ready(SimStream stream);
  // Marks `stream` busy until `end` (work of known duration) or until `p` ends.
  // Returns the trace event's index when a trace is recorded (its args may be added).
  std::optional<std::size_t> stream_occupy(SimStream stream, Seconds start, Seconds end, const char* name,
                                           const char* category);
  void stream_add_pending(SimStream stream, std::shared_ptr<SimPending> p);
  // A kernel's trace args: its layer, op class, pass, FLOPs and bytes.
  void annotate_kernel(TraceEvent& e, const OpCost& cost, const KernelLabel& label) const;
  // `stream` may not start new work before t (an event it waits on).
  void stream_wait_until(SimStream stream, Seconds t);
  // Records [start, end] as communication involving this device (for the breakdown);
  // nccl_hbm_bytes > 0: an NCCL kernel that moved that much through this GPU's memory
  // (it interferes with the compute it overlaps); 0: a copy-engine copy.
  void note_communication(Seconds start, Seconds end, Bytes nccl_hbm_bytes = 0);
  // Records [start, end] as a copy between this GPU and host memory (the batch's
  // x.to(device), a .cpu()): communication the breakdown names apart from the collectives.
  void note_host_copy(Seconds start, Seconds end);
  // Time when every stream is done (waiting for pending activities).
  Seconds all_streams_ready();

  // Starts a measured window at `t0`: accounting restarts (memory peak too).
  void begin_window(Seconds t0);
  // Closes the window at `t1` (after synchronize), attributing the final idle gap.
  SimDeviceAccount end_window(Seconds t1);

 protected:
  void* raw_allocate(Bytes n) override;
  void raw_free(void* p, Bytes n) override;

 private:
  void attribute_gap(Seconds from, Seconds to);

  SimBackend& backend_;
  int index_;
  std::string name_;
  SimGpuRates rates_;
  simgrid::s4u::Host* host_;
  DType dtype_;
  bool numeric_;
  std::optional<Precision> precision_;
  SimStreamState streams_[kSimStreamCount];
  SimDeviceAccount account_;
  Seconds window_start_ = 0;
  Seconds compute_last_end_ = 0;  // end of the last kernel on the compute stream
  // Communication intervals not yet entirely in the past of the compute stream.
  struct CommInterval {
    Seconds start = 0, end = 0;
    bool host_copy = false;  // a copy to or from host memory (note_host_copy)
  };
  std::vector<CommInterval> comm_intervals_;
  // The measured window's compute kernels and NCCL kernels, for the interference model.
  bool window_open_ = false;
  std::vector<SimKernelSpan> window_kernels_;
  std::vector<SimCollectiveSpan> window_collectives_;
};

}  // namespace dpt
