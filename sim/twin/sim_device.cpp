#include "sim/twin/sim_device.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "engine/core/op_scope.hpp"
#include "sim/twin/chrome_trace.hpp"
#include "engine/core/fault_injection.hpp"
#include "engine/core/kernels.hpp"
#include "sim/twin/sim_backend.hpp"

namespace dpt {

const char* sim_op_class_name(SimOpClass c) {
  switch (c) {
    case SimOpClass::gemm: return "gemm";
    case SimOpClass::conv: return "conv";
    case SimOpClass::attention: return "attention";
    case SimOpClass::norm: return "norm";
    case SimOpClass::elementwise: return "elementwise";
    case SimOpClass::embedding: return "embedding";
    case SimOpClass::loss: return "loss";
    case SimOpClass::optimizer: return "optimizer";
    case SimOpClass::sdpa: return "sdpa";
  }
  return "?";
}

bool sim_op_class_memory_bound(SimOpClass c) {
  return c != SimOpClass::gemm && c != SimOpClass::conv && c != SimOpClass::attention && c != SimOpClass::sdpa;
}

SimOpClass sim_op_class(const OpCost& cost) {
  const std::string_view name(cost.name ? cost.name : "");
  if (sim_op_is_optimizer(cost)) return SimOpClass::optimizer;
  if (name == "mse" || name == "cross_entropy" || name.starts_with("loss")) return SimOpClass::loss;
  if (name.starts_with("conv")) return SimOpClass::conv;
  if (name.starts_with("gemm")) return SimOpClass::gemm;
  if (name.starts_with("attention")) return SimOpClass::attention;
  if (name.starts_with("sdpa")) return SimOpClass::sdpa;
  if (name.starts_with("norm") || name.starts_with("layernorm")) return SimOpClass::norm;
  if (name.starts_with("embedding")) return SimOpClass::embedding;
  if (cost.op_class == OpClass::conv) return SimOpClass::conv;
  if (cost.op_class == OpClass::matmul) return SimOpClass::gemm;
  return SimOpClass::elementwise;  // copies, scales, fills, activations, bias adds
}

double sim_op_efficiency(const SimGpuRates& rates, SimOpClass c) {
  if (const auto& e = rates.op_efficiency[static_cast<size_t>(c)]) return *e;
  return sim_op_class_memory_bound(c) ? rates.memory_efficiency : rates.compute_efficiency;
}

double sim_op_efficiency(const SimGpuRates& rates, SimOpClass c, ComputeType t) {
  // Planted fault: the per-compute-type figures ignored (every type at the class's one).
  if (auto it = rates.op_efficiency_by_type.find(t);
      it != rates.op_efficiency_by_type.end() && !fault_active(Fault::op_efficiency_ignores_compute_type))
    if (const auto& e = it->second[static_cast<size_t>(c)]) return *e;
  return sim_op_efficiency(rates, c);
}

SimGemmTile sim_gemm_tile(ComputeType t) {
  if (t == ComputeType::tf32 || t == ComputeType::bf16 || t == ComputeType::f16) return {256, 128};
  return {128, 128};
}

double sim_gemm_wave_efficiency(const GemmShape& g, int sm_count, ComputeType t) {
  if (sm_count < 1 || g.m < 1 || g.n < 1)
    throw std::invalid_argument(fmt::format("GEMM wave efficiency of [{}, {}] on {} SMs: needs positive sizes", g.m,
                                            g.n, sm_count));
  const SimGemmTile tile = sim_gemm_tile(t);
  const std::int64_t tiles = ((g.m + tile.rows - 1) / tile.rows) * ((g.n + tile.cols - 1) / tile.cols);
  const std::int64_t waves = (tiles + sm_count - 1) / sm_count;
  return static_cast<double>(g.m) * static_cast<double>(g.n) /
         (static_cast<double>(waves) * sm_count * static_cast<double>(tile.rows * tile.cols));
}

double sim_gemm_shape_factor(const OpCost& cost, int sm_count, ComputeType t) {
  // Planted fault: every GEMM as efficient as the microbenchmark's, whatever its shape.
  if (sm_count < 1 || cost.gemms.empty() || !(cost.flops > 0) || fault_active(Fault::gemm_wave_quantization_ignored))
    return 1.0;
  constexpr std::int64_t kReference = 8192;  // the microbenchmark's square product
  const double reference = sim_gemm_wave_efficiency({kReference, kReference, kReference}, sm_count, t);
  double listed_flops = 0, time_units = 0;
  for (const auto& g : cost.gemms) {
    const double flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
    listed_flops += flops;
    time_units += flops / (sim_gemm_wave_efficiency(g, sm_count, t) / reference);
  }
  time_units += std::max(0.0, cost.flops - listed_flops);
  return std::max(cost.flops, listed_flops) / time_units;
}

bool sim_conv_transposes_layout(ComputeType t) {
  return t == ComputeType::tf32 || t == ComputeType::bf16 || t == ComputeType::f16;
}

Seconds sim_ridge_time_s(Seconds compute_s, Seconds memory_s, double p) {
  if (!(p >= 1.0)) throw std::invalid_argument(fmt::format("ridge exponent must be at least 1, got {}", p));
  const Seconds hi = std::max(compute_s, memory_s), lo = std::min(compute_s, memory_s);
  if (!std::isfinite(p) || !(hi > 0)) return hi;
  // hi (1 + (lo / hi)^p)^(1/p): the p-norm without overflowing on large p.
  return hi * std::pow(1.0 + std::pow(lo / hi, p), 1.0 / p);
}

bool sim_conv_figure_stated(const SimGpuRates& rates, SimOpClass c, ComputeType t) {
  if (c != SimOpClass::conv) return false;
  const auto i = static_cast<size_t>(c);
  if (rates.op_efficiency[i]) return true;
  const auto it = rates.op_efficiency_by_type.find(t);
  return it != rates.op_efficiency_by_type.end() && it->second[i].has_value();
}

namespace {
// The roofline of the op's class: max(flops / (peak x compute fraction), bytes /
// (bandwidth x memory fraction)) + launch latency. A compute-bound class (gemm, conv,
// attention) reaches its own fraction of the peak and the streaming fraction of the
// bandwidth; a memory-bound class (norm, elementwise, embedding, loss, optimizer) its
// own fraction of the bandwidth and the GEMM fraction of the peak. `peak` is asked for
// only when the op has flops (it throws when the GPU lacks it).
// A compute-bound kernel near its ridge overlaps its compute and memory time only in part:
// it takes (c^p + m^p)^(1/p) of them (rates.ridge_exponent, the hardware file's
// efficiency.ridge_exponent; infinity: max). A convolution whose fraction is a convolution
// figure of the file's (op_efficiency.conv: timed on convolution layers) keeps max(c, m):
// that figure already holds what their ridge costs.
// `type` is the compute type the op's FLOPs run in. A convolution in a Tensor Core type
// also pays cuDNN's NCHW<->NHWC transposes of what it reads and writes (each byte read and
// written once more, before or after it, at the elementwise fraction of the bandwidth),
// unless its tensors are channels_last (OpCost::channels_last).
template <typename Peak>
Seconds kernel_time_s(const OpCost& cost, const SimGpuRates& rates, ComputeType type, Peak&& peak) {
  if (cost.kind == OpKind::host) return 0;  // host-side work: charged as dispatch, not on the device
  if (cost.measured_s) return *cost.measured_s;  // measured on this GPU kind: launches included
  const SimOpClass c = sim_op_class(cost);
  const bool memory_bound = sim_op_class_memory_bound(c);
  double compute_fraction = memory_bound ? rates.compute_efficiency : sim_op_efficiency(rates, c, type);
  // A GEMM's fraction scales with its shape's wave efficiency; never past the peak.
  if (c == SimOpClass::gemm)
    compute_fraction = std::min(1.0, compute_fraction * sim_gemm_shape_factor(cost, rates.sm_count, type));
  const double memory_fraction = memory_bound ? sim_op_efficiency(rates, c, type) : rates.memory_efficiency;
  Seconds t_bytes = 0;
  const Bytes bytes = cost.bytes_read + cost.bytes_written;
  // Planted fault: memory-bound classes charged their FLOPs only, as if bandwidth were free.
  if (bytes > 0 && !(memory_bound && fault_active(Fault::opclass_ignores_bytes))) {
    if (!(rates.memory_bandwidth > 0))
      throw std::invalid_argument(fmt::format("GPU model '{}' has no memory bandwidth", rates.model));
    t_bytes = static_cast<double>(bytes) / (rates.memory_bandwidth * memory_fraction);
  }
  // Planted fault: every kernel at max(c, m), as if compute and memory overlapped fully.
  const double ridge_p = memory_bound || sim_conv_figure_stated(rates, c, type) ||
                                 fault_active(Fault::roofline_max_at_ridge)
                             ? std::numeric_limits<double>::infinity()
                             : rates.ridge_exponent;
  if (c != SimOpClass::conv) {
    const Seconds t_flops = cost.flops > 0 ? cost.flops / (peak() * compute_fraction) : 0.0;
    return sim_ridge_time_s(t_flops, t_bytes, ridge_p) + rates.launch_latency_s * cost.launches;
  }
  // Planted faults: Tensor Core convolutions on NCHW tensors charged no layout transposes;
  // on channels_last (NHWC) tensors, which need none, charged them all the same.
  const bool nchw = !cost.channels_last || fault_active(Fault::channels_last_transposes_charged);
  const bool transposes =
      bytes > 0 && nchw && sim_conv_transposes_layout(type) && !fault_active(Fault::conv_nchw_transposes_free);
  const BytesPerSecond transpose_rate =
      rates.memory_bandwidth * sim_op_efficiency(rates, SimOpClass::elementwise, type);
  // PyTorch's allow_tf32 lets cuDNN run an f32 convolution on TF32 Tensor Cores; it does not
  // force it, and cuDNN runs the fastest kernel it is allowed. So a TF32 convolution costs
  // the cheaper of TF32 with the NCHW transposes and FP32 on CUDA cores without them: on a
  // GPU whose dense TF32 rate is its FP32 rate or twice it (GeForce and workstation Ampere
  // and Ada) FP32's NCHW kernels can win; on A100 and H100 (8x) TF32 does. Planted fault:
  // TF32 forced.
  const FlopsPerSecond f32_peak = type == ComputeType::tf32 && transposes && !fault_active(Fault::tf32_convs_forced)
                                      ? sim_peak_flops(rates, ComputeType::f32)
                                      : 0;
  const double f32_fraction = f32_peak > 0 ? sim_op_efficiency(rates, c, ComputeType::f32) : 0;
  const double f32_p = sim_conv_figure_stated(rates, c, ComputeType::f32) || fault_active(Fault::roofline_max_at_ridge)
                           ? std::numeric_limits<double>::infinity()
                           : rates.ridge_exponent;
  auto conv_kernel = [&](double flops, double kernel_bytes) {
    const Seconds memory = kernel_bytes > 0 ? kernel_bytes / (rates.memory_bandwidth * memory_fraction) : 0.0;
    Seconds t = sim_ridge_time_s(flops > 0 ? flops / (peak() * compute_fraction) : 0.0, memory, ridge_p);
    if (transposes) t += 2.0 * kernel_bytes / transpose_rate;  // each byte read and written once more
    if (f32_peak > 0 && f32_fraction > 0)
      t = std::min(t, sim_ridge_time_s(flops > 0 ? flops / (f32_peak * f32_fraction) : 0.0, memory, f32_p));
    return t;
  };
  // Several kernels (a layer's convolutions): each its own roofline, so a memory-bound one
  // is not hidden under a compute-bound neighbour's FLOPs. Planted fault: one roofline over
  // their sums.
  Seconds t_kernels = 0;
  if (!cost.parts.empty() && !fault_active(Fault::conv_roofline_aggregated)) {
    for (const auto& p : cost.parts) t_kernels += conv_kernel(p.flops, static_cast<double>(p.bytes));
  } else {
    t_kernels = conv_kernel(cost.flops, static_cast<double>(bytes));
  }
  return t_kernels + rates.launch_latency_s * cost.launches;
}
}  // namespace

Seconds sim_kernel_time_s(const OpCost& cost, const SimGpuRates& rates, DType dtype) {
  const ComputeType type = dtype == DType::f64 ? ComputeType::f64 : ComputeType::f32;
  return kernel_time_s(cost, rates, type, [&] {
    auto it = rates.peak_flops.find(dtype);
    if (it == rates.peak_flops.end() || !(it->second > 0))
      throw std::invalid_argument(fmt::format("GPU model '{}' has no peak flops for dtype {}", rates.model,
                                              dtype_name(dtype)));
    return it->second;
  });
}

FlopsPerSecond sim_peak_flops(const SimGpuRates& rates, ComputeType t) {
  if (auto it = rates.compute_peak_flops.find(t); it != rates.compute_peak_flops.end() && it->second > 0)
    return it->second;
  if (t == ComputeType::f32 || t == ComputeType::f64) {
    auto it = rates.peak_flops.find(t == ComputeType::f32 ? DType::f32 : DType::f64);
    if (it != rates.peak_flops.end() && it->second > 0) return it->second;
  }
  return 0;
}

Seconds sim_kernel_time_s(const OpCost& cost, const SimGpuRates& rates, Precision p) {
  const bool has_tf32 = sim_peak_flops(rates, ComputeType::tf32) > 0;
  ComputeType t = precision_compute_type(p, cost.op_class, has_tf32);
  // Fused attention in f32 is the memory-efficient kernel, whose f32 path on sm80 and later
  // is CUTLASS's OpMultiplyAddFastF32 whatever matmul.allow_tf32 says (FlashAttention has no
  // f32 kernel): it runs at its f32 figure under --precision tf32 too.
  if (t == ComputeType::tf32 && sim_op_class(cost) == SimOpClass::sdpa && !fault_active(Fault::sdpa_tf32_allowed))
    t = ComputeType::f32;
  return kernel_time_s(cost, rates, t, [&] {
    const FlopsPerSecond peak = sim_peak_flops(rates, t);
    if (!(peak > 0))
      throw std::invalid_argument(fmt::format("GPU model '{}' has no {} peak flops, which precision {} needs",
                                              rates.model, compute_type_label(t), precision_name(p)));
    return peak;
  });
}

bool sim_op_is_optimizer(const OpCost& cost) {
  const std::string_view name(cost.name ? cost.name : "");
  return name.ends_with("_step");  // sgd_step, adamw_step: the optimizer's update kernels
}

const char* sim_stream_name(SimStream s) {
  switch (s) {
    case SimStream::compute: return "compute";
    case SimStream::copy: return "copy";
    case SimStream::communication: return "communication";
  }
  return "?";
}

SimDevice::SimDevice(SimBackend& backend, int index, std::string name, SimGpuRates rates, simgrid::s4u::Host* host,
                     DType compute_dtype, bool numeric, std::optional<Precision> precision)
    : backend_(backend), index_(index), name_(std::move(name)), rates_(std::move(rates)), host_(host),
      dtype_(compute_dtype), numeric_(numeric), precision_(precision) {
  if (index_ >= 0) {
    if (!(rates_.memory_bandwidth > 0) || !(rates_.compute_efficiency > 0) || !(rates_.memory_efficiency > 0))
      throw std::invalid_argument(fmt::format("{}: GPU model '{}' needs a positive memory bandwidth and efficiencies",
                                              name_, rates_.model));
    if (precision_) {
      // Fail at construction, not mid-step: every op class's compute type needs a peak.
      const bool has_tf32 = sim_peak_flops(rates_, ComputeType::tf32) > 0;
      for (OpClass c : {OpClass::other, OpClass::matmul, OpClass::conv}) {
        const ComputeType t = precision_compute_type(*precision_, c, has_tf32);
        if (!(sim_peak_flops(rates_, t) > 0))
          throw std::invalid_argument(fmt::format("{}: GPU model '{}' has no {} peak flops, which precision {} needs",
                                                  name_, rates_.model, compute_type_label(t),
                                                  precision_name(*precision_)));
      }
    } else if (!rates_.peak_flops.count(compute_dtype))
      throw std::invalid_argument(fmt::format("{}: GPU model '{}' has no peak flops for dtype {}", name_,
                                              rates_.model, dtype_name(compute_dtype)));
  }
}

Kernels& SimDevice::kernels() { return host_kernels(); }

void* SimDevice::raw_allocate(Bytes n) {
  if (!numeric_ || n == 0) return nullptr;
  const auto rounded = static_cast<size_t>((n + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}

void SimDevice::raw_free(void* p, Bytes) { std::free(p); }

void SimDevice::submit(const OpCost& cost, const std::function<void()>& fn) {
  // The layer the kernel belongs to, taken (and cleared, so no other actor's kernel
  // inherits it) before dispatch can yield to another actor; copied, since the layer
  // (a DataParallel replica) may be gone by the time the kernel is recorded.
  const OpScope taken = std::exchange(current_op_scope(), OpScope{});
  const KernelLabel label = backend_.trace() ? KernelLabel{taken.layer ? taken.layer : "",
                                                           taken.op_class ? taken.op_class : "", taken.pass ? taken.pass : ""}
                                             : KernelLabel{};
  backend_.host_dispatch(cost.launches);
  if (index_ >= 0) {
    const Seconds duration =
        precision_ ? sim_kernel_time_s(cost, rates_, *precision_) : sim_kernel_time_s(cost, rates_, dtype_);
    if (duration > 0) {
      const Seconds ready = stream_ready(SimStream::compute);
      const Seconds start = std::max(backend_.host_time(), ready);
      const bool optimizer = sim_op_is_optimizer(cost);
      const auto event = stream_occupy(SimStream::compute, start, start + duration, cost.name, trace_category(cost.kind));
      if (event) annotate_kernel(backend_.trace()->event(*event), cost, label);
      if (window_open_) window_kernels_.push_back({start, start + duration, sim_op_class_memory_bound(sim_op_class(cost))});
      (optimizer ? account_.optimizer_busy_s : account_.compute_busy_s) += duration;
      // Planted fault: memory-bound kernels left out of the op-class breakdown.
      const SimOpClass op_class = sim_op_class(cost);
      if (!(sim_op_class_memory_bound(op_class) && fault_active(Fault::op_class_breakdown_drops_memory_bound)))
        account_.kernel_s_by_class[static_cast<size_t>(op_class)] += duration;
      account_.kernels += cost.launches;
      if (backend_.options().synchronous) backend_.host_advance_to(start + duration);
    }
  }
  if (numeric_) fn();
}

// A kernel's trace event as PyTorch's profiler shows it: named after its layer when
// one is known, with the op, the layer's type and pass, FLOPs and bytes in its args.
void SimDevice::annotate_kernel(TraceEvent& e, const OpCost& cost, const KernelLabel& label) const {
  e.args.emplace_back("op", cost.name ? cost.name : "");
  e.args.emplace_back("op_class", !label.op_class.empty() ? label.op_class : trace_category(cost.kind));
  if (!label.layer.empty()) {
    e.args.emplace_back("layer", label.layer);
    e.name = label.layer;
  }
  if (!label.pass.empty()) e.args.emplace_back("pass", label.pass);
  e.number_args.emplace_back("flops", cost.flops);
  e.number_args.emplace_back("bytes_read", static_cast<double>(cost.bytes_read));
  e.number_args.emplace_back("bytes_written", static_cast<double>(cost.bytes_written));
  if (cost.measured_s) e.args.emplace_back("time", "measured (profiled layer)");
}

Seconds SimDevice::stream_ready(SimStream stream) {
  SimStreamState& s = streams_[static_cast<int>(stream)];
  if (!s.pending.empty()) {
    // Waiting blocks this actor: it must first have spent the dispatch it owes.
    backend_.host_flush();
    // A copy: wait_end() blocks this actor, and while it waits other actors (the
    // replicas of a parallel_for) may add to this stream's list and reallocate it.
    const std::vector<std::shared_ptr<SimPending>> waiting = s.pending;
    for (const auto& p : waiting) s.free_at = std::max(s.free_at, p->wait_end());
    s.pending.clear();
  }
  return s.free_at;
}

std::optional<std::size_t> SimDevice::stream_occupy(SimStream stream, Seconds start, Seconds end, const char* name,
                                                    const char* category) {
  SimStreamState& s = streams_[static_cast<int>(stream)];
  if (stream == SimStream::compute) {
    attribute_gap(compute_last_end_, start);
    compute_last_end_ = std::max(compute_last_end_, end);
  }
  s.free_at = std::max(s.free_at, end);
  if (ChromeTrace* trace = backend_.trace())
    return trace->add({name ? name : "", category, backend_.trace_pid(index_), static_cast<int>(stream), start,
                       end - start, {}, {}});
  return std::nullopt;
}

void SimDevice::stream_add_pending(SimStream stream, std::shared_ptr<SimPending> p) {
  streams_[static_cast<int>(stream)].pending.push_back(std::move(p));
}

void SimDevice::stream_wait_until(SimStream stream, Seconds t) {
  SimStreamState& s = streams_[static_cast<int>(stream)];
  s.free_at = std::max(s.free_at, t);
}

void SimDevice::note_communication(Seconds start, Seconds end, Bytes nccl_hbm_bytes) {
  if (end > start) comm_intervals_.push_back({start, end, false});
  if (end > start && nccl_hbm_bytes > 0) window_collectives_.push_back({start, end, nccl_hbm_bytes});
}

void SimDevice::note_host_copy(Seconds start, Seconds end) {
  // Planted fault: host copies recorded as collectives are (the breakdown cannot tell them apart).
  if (end > start) comm_intervals_.push_back({start, end, !fault_active(Fault::host_copy_counted_as_collective)});
}

Seconds sim_interference_s(const std::vector<SimKernelSpan>& kernels, const std::vector<SimCollectiveSpan>& collectives,
                           const SimGpuRates& rates) {
  // Share of the SMs the collective's kernel holds: one block per channel.
  const double sm_share =
      rates.sm_count > 0 && rates.nccl_channels > 0 ? static_cast<double>(rates.nccl_channels) / rates.sm_count : 0.0;
  const BytesPerSecond bandwidth = rates.memory_bandwidth * rates.memory_efficiency;
  Seconds extra = 0;
  for (const SimCollectiveSpan& c : collectives) {
    // Share of the HBM bandwidth the collective's reads and writes take while it runs.
    const double hbm_share = bandwidth > 0 ? static_cast<double>(c.hbm_bytes) / (c.end - c.start) / bandwidth : 0.0;
    for (const SimKernelSpan& k : kernels) {
      const Seconds overlap = std::min(k.end, c.end) - std::max(k.start, c.start);
      if (!(overlap > 0)) continue;
      // On a host worker the collective is CPU work on the kernel's own core and keeps its
      // pace: the kernel loses the collective's share of the core while they overlap.
      const double core_share =
          fault_active(Fault::gloo_core_contention_omitted) ? 0.0 : rates.collective_core_share;
      if (core_share > 0) {
        extra += overlap * core_share;
        continue;
      }
      // What the kernel loses is the share it cannot use while the collective runs beside
      // it; at most 90 % (NCCL never takes it all). The rest of its work runs at full rate
      // once the collective has ended, so it loses overlap x share, never more than the
      // overlap itself: a collective under compute never costs the step more than the
      // same collective exposed, and slower links never shorten the step through it.
      // (share / (1 - share), the loss were the collective to outlast the slowed kernel,
      // charged a 25 GB/s NVSwitch more than a 10 GB/s one on GPT-2 1.5B, DGX H100.)
      const double share = std::min(0.9, k.memory_bound ? hbm_share : sm_share);
      extra += fault_active(Fault::interference_share_compounded) ? overlap * share / (1.0 - share)
                                                                   : overlap * share;
    }
  }
  // Planted fault: the overlap credited to the step instead of charged.
  return fault_active(Fault::interference_speeds_compute) ? -extra : extra;
}

Seconds SimDevice::all_streams_ready() {
  Seconds t = 0;
  for (int s = 0; s < kSimStreamCount; ++s) t = std::max(t, stream_ready(static_cast<SimStream>(s)));
  return t;
}

void SimDevice::synchronize() { backend_.host_advance_to(all_streams_ready()); }

// Splits the compute stream's idle time [from, to) into time some copy or
// collective of this device was running (exposed communication) and the rest
// (the stream waited for the host to dispatch).
void SimDevice::attribute_gap(Seconds from, Seconds to) {
  from = std::max(from, window_start_);
  if (!(to > from)) return;
  // The length of the union of the intervals (all, or only those not host copies) in [from, to).
  auto covered_by = [&](bool with_host_copies) {
    std::vector<std::pair<Seconds, Seconds>> parts;
    for (const auto& iv : comm_intervals_) {
      if (iv.host_copy && !with_host_copies) continue;
      const Seconds lo = std::max(iv.start, from), hi = std::min(iv.end, to);
      if (hi > lo) parts.emplace_back(lo, hi);
    }
    std::sort(parts.begin(), parts.end());
    Seconds covered = 0, reach = from;
    for (const auto& [b, e] : parts) {
      const Seconds lo = std::max(b, reach);
      if (e > lo) {
        covered += e - lo;
        reach = e;
      }
    }
    return covered;
  };
  const Seconds covered = covered_by(true);
  account_.exposed_comm_s += covered;
  // What host copies alone covered: a collective running beside a copy counts as the
  // collective's. The second union only where a host copy is among the intervals, and never
  // below zero (the two unions round apart).
  if (std::any_of(comm_intervals_.begin(), comm_intervals_.end(), [](const auto& iv) { return iv.host_copy; }))
    account_.exposed_host_copy_s += std::max(0.0, covered - covered_by(false));
  // Never below zero: the union of a gap wholly covered can round a hair past it, and a
  // report read back refuses a negative part of a step.
  account_.idle_other_s += std::max(0.0, (to - from) - covered);
  // Later gaps start at or after `to`: intervals that ended before it are done with.
  std::erase_if(comm_intervals_, [&](const auto& iv) { return iv.end <= to; });
}

void SimDevice::begin_window(Seconds t0) {
  account_ = {};
  window_start_ = t0;
  comm_intervals_.clear();
  window_kernels_.clear();
  window_collectives_.clear();
  window_open_ = true;
  memory().reset_peak();
}

SimDeviceAccount SimDevice::end_window(Seconds t1) {
  attribute_gap(compute_last_end_, t1);
  compute_last_end_ = std::max(compute_last_end_, t1);
  if (index_ >= 0) account_.interference_s = sim_interference_s(window_kernels_, window_collectives_, rates_);
  window_open_ = false;
  window_kernels_.clear();
  window_collectives_.clear();
  return account_;
}

}  // namespace dpt
