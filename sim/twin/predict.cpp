#include "sim/twin/predict.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <simgrid/s4u.hpp>

#include "sim/twin/chrome_trace.hpp"
#include "engine/core/fault_injection.hpp"
#include "engine/optim/optim.hpp"
#include "engine/parallel/ddp/accumulate.hpp"
#include "engine/parallel/split.hpp"
#include "sim/collectives/collectives.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_process.hpp"

namespace dpt {

namespace s4u = simgrid::s4u;

std::pair<std::int64_t, std::int64_t> predict_batches(const PredictConfig& c) {
  if (c.batch_global.has_value() == c.batch_per_device.has_value())
    throw std::invalid_argument("predict: give exactly one of batch (global) and batch_per_device");
  if (c.devices < 1) throw std::invalid_argument(fmt::format("predict: devices must be at least 1, got {}", c.devices));
  if (c.batch_global) {
    if (*c.batch_global < 1) throw std::invalid_argument(fmt::format("predict: batch must be at least 1, got {}", *c.batch_global));
    return {*c.batch_global, (*c.batch_global + c.devices - 1) / c.devices};
  }
  if (*c.batch_per_device < 1)
    throw std::invalid_argument(fmt::format("predict: batch_per_device must be at least 1, got {}", *c.batch_per_device));
  return {*c.batch_per_device * c.devices, *c.batch_per_device};
}

std::vector<int> predict_gpu_indices(const sim::HardwareSpec& hw, int devices, int nodes) {
  if (nodes < 1 || devices < 1 || devices % nodes != 0)
    throw std::invalid_argument(
        fmt::format("predict: {} devices cannot be spread evenly over {} nodes", devices, nodes));
  const int per_node = devices / nodes;
  if (per_node > hw.gpus_per_node)
    throw std::invalid_argument(fmt::format("predict: {} GPUs per node asked, hardware '{}' has {}", per_node,
                                            hw.name, hw.gpus_per_node));
  std::vector<int> out;
  for (int k = 0; k < nodes; ++k)
    for (int g = 0; g < per_node; ++g) out.push_back(k * hw.gpus_per_node + g);
  return out;
}

namespace {

// The platform's collective algorithms behind the backend's timer interface.
class PlatformCollectives : public SimCollectiveGroup {
 public:
  // timed: read at each call (see CollectiveGroup::set_timed); null: always timed.
  PlatformCollectives(sim::Platform& p, std::vector<int> gpus, int participants = 0,
                      std::shared_ptr<const bool> timed = nullptr)
      : group_(p, std::move(gpus), {}, participants), timed_(std::move(timed)) {}
  void run(int rank, const CollectiveCall& call) override {
    if (timed_) group_.set_timed(*timed_);
    group_.run(rank, call);
  }
  SimCollectiveChoice choice(const CollectiveCall& call) const override {
    const auto plan = sim::plan_collective(group_.platform(), group_.rank_gpus(), call, group_.settings());
    return {sim::collective_algorithm_name(plan.algorithm), sim::nccl_protocol_name(plan.protocol), plan.channels};
  }

 private:
  sim::CollectiveGroup group_;
  std::shared_ptr<const bool> timed_;
};

// Planted fault (Fault::predict_half_wire_as_f64): 2-byte elements sent as 8.
class HalfAsF64Collectives : public SimCollectiveGroup {
 public:
  explicit HalfAsF64Collectives(std::shared_ptr<SimCollectiveGroup> inner) : inner_(std::move(inner)) {}
  void run(int rank, const CollectiveCall& c) override {
    CollectiveCall wrong = c;
    if (wrong.element_bytes == 2) wrong.element_bytes = 8;
    inner_->run(rank, wrong);
  }
  SimCollectiveChoice choice(const CollectiveCall& c) const override { return inner_->choice(c); }

 private:
  std::shared_ptr<SimCollectiveGroup> inner_;
};

}  // namespace

SimGpuRates sim_gpu_rates(const sim::HardwareSpec& hw) {
  SimGpuRates rates;
  rates.model = hw.gpu.name;
  rates.peak_flops = {{DType::f32, hw.gpu.peak_flops.f32}, {DType::f64, hw.gpu.peak_flops.f64}};
  rates.compute_peak_flops = {{ComputeType::f32, hw.gpu.peak_flops.f32}, {ComputeType::f64, hw.gpu.peak_flops.f64}};
  if (hw.gpu.peak_flops.tf32) rates.compute_peak_flops[ComputeType::tf32] = *hw.gpu.peak_flops.tf32;
  if (hw.gpu.peak_flops.bf16) rates.compute_peak_flops[ComputeType::bf16] = *hw.gpu.peak_flops.bf16;
  if (hw.gpu.peak_flops.f16) rates.compute_peak_flops[ComputeType::f16] = *hw.gpu.peak_flops.f16;
  rates.compute_efficiency = hw.efficiency.gemm;
  rates.memory_bandwidth = hw.gpu.memory_bandwidth;
  rates.memory_efficiency = hw.efficiency.memory_bandwidth;
  rates.ridge_exponent = hw.efficiency.ridge_exponent;
  // Per op class (unset ones keep efficiency.gemm or efficiency.memory_bandwidth).
  const sim::OpEfficiencySpec& oe = hw.gpu.op_efficiency;
  auto set = [&rates](SimOpClass c, const std::optional<double>& v) { rates.op_efficiency[static_cast<size_t>(c)] = v; };
  set(SimOpClass::gemm, oe.gemm);
  set(SimOpClass::conv, oe.conv);
  set(SimOpClass::attention, oe.attention);
  set(SimOpClass::norm, oe.norm);
  set(SimOpClass::elementwise, oe.elementwise);
  set(SimOpClass::embedding, oe.embedding);
  set(SimOpClass::loss, oe.loss);
  set(SimOpClass::optimizer, oe.optimizer);
  set(SimOpClass::sdpa, oe.sdpa);
  for (size_t c = 0; c < oe.by_type.size(); ++c)
    for (const auto& [type, fraction] : oe.by_type[c]) rates.op_efficiency_by_type[type][c] = fraction;
  rates.sm_count = hw.gpu.sm_count.value_or(0);
  if (hw.gloo) rates.collective_core_share = hw.gloo->core_share;  // CPU workers: gloo's copies take the core
  rates.launch_latency_s = hw.gpu.kernel_launch_latency_s;
  rates.capacity_bytes = hw.gpu.memory_bytes;
  return rates;
}

SimMachine sim_machine_from_platform(sim::Platform& platform, const std::vector<int>& gpus) {
  const sim::HardwareSpec& hw = platform.hardware();
  SimMachine m;
  m.name = hw.name;
  m.dispatch_cost_s = hw.host.dispatch_cost_s;
  m.gil = hw.host.gil;
  SimGpuRates rates = sim_gpu_rates(hw);
  if (gpus.size() > 1) rates.nccl_channels = sim::default_channels(platform, gpus);
  for (int g : gpus) m.gpus.push_back(SimGpu{platform.gpu_host(g), platform.cpu_host_of_gpu(g), platform.node_of_gpu(g), rates});
  m.peer_to_peer = [&platform, gpus](int a, int b) {
    return platform.peer_to_peer(gpus[static_cast<size_t>(a)], gpus[static_cast<size_t>(b)]);
  };
  m.transfer_async = [&platform](s4u::Host* a, s4u::Host* b, Bytes n) { return platform.transfer_async(a, b, n); };
  if (!fault_active(Fault::staged_copies_at_link_rate)) m.staged_copy_Bps = sim::staged_unidirectional_rate(hw);
  m.make_collective_group = [&platform, gpus](const std::vector<int>& devices) {
    std::vector<int> global;
    for (int d : devices) global.push_back(gpus[static_cast<size_t>(d)]);
    return std::make_shared<PlatformCollectives>(platform, global);
  };
  return m;
}

bool symmetric_ranks_apply(const PredictConfig& c) {
  // Above exact_max_ranks the collectives run in the large-N formulation either way, so
  // simulating node 0 alone changes nothing the full simulation would time differently.
  if (!c.symmetric_ranks || c.strategy != StrategyKind::ddp || c.numeric || c.nodes < 2 ||
      c.devices <= sim::CollectiveSettings{}.exact_max_ranks)
    return false;
  const auto [global, per_device] = predict_batches(c);
  return global == per_device * c.devices;
}

namespace {

// What the driver actor measured.
struct Measured {
  Seconds t0 = 0, t1 = 0;
  std::vector<SimDeviceAccount> accounts;
  std::vector<std::string> warnings;
  std::optional<OutOfMemoryReport> oom;
  std::string error;  // another failure (rethrown in the parent)
  Seconds dispatch_total_s = 0, communication_total_s = 0;
  size_t model_layers = 0;  // the module's layers (checkpoint_sequential's functions)
};

Seconds synchronize_all(SimBackend& b) {
  for (int i = 0; i < b.device_count(); ++i) b.device(i).synchronize();
  return b.now();
}

// "out of memory on sim:gpu0: allocating 1.250 GiB for ..." -> the device and request.
OutOfMemoryReport oom_report(SimBackend& b, const OutOfMemory& e) {
  OutOfMemoryReport r;
  r.message = e.what();
  std::smatch m;
  const std::string text = e.what();
  if (std::regex_search(text, m, std::regex("out of memory on (\\S+): allocating ([0-9.]+) GiB")))
    r.device = m[1], r.requested_bytes = static_cast<Bytes>(std::stod(m[2]) * static_cast<double>(kGiB));  // to 0.001 GiB
  for (int i = 0; i < b.device_count(); ++i) {
    Device& d = b.device(i);
    if (d.name() != r.device) continue;
    r.capacity_bytes = d.capacity_bytes();
    const auto live = d.memory().breakdown_at_peak();
    for (int c = 0; c < kMemoryCategoryCount; ++c)
      if (live[static_cast<size_t>(c)] > 0)
        r.memory_breakdown_bytes[memory_category_name(static_cast<MemoryCategory>(c))] = live[static_cast<size_t>(c)];
  }
  return r;
}

// after_setup: called once the strategy is built (DDP's construction broadcast done),
// before the warm-up steps; at_window_start: before the measured step.
void drive(SimBackend& b, const PredictConfig& c, const ModelBuilder& build_model, std::int64_t batch,
           const std::function<void()>& after_setup, const std::function<void()>& at_window_start, Measured& out) {
  try {
    StrategyOptions so;
    so.kind = c.strategy;
    for (int i = 0; i < b.device_count(); ++i) so.device_ids.push_back(i);
    so.bucket_cap_mb = c.bucket_cap_mb;
    so.accumulate = c.accumulate;
    so.comm_hook = c.comm_hook;
    so.dp_loss_per_replica = c.dp_loss_per_replica;
    so.inputs_resident = c.inputs_resident;
    // Class labels (int64, one per sample), as a classifier or language model trains:
    // an MSE target as wide as the output would put a second output's worth of memory
    // on the devices that real training does not have.
    so.loss = LossKind::cross_entropy;
    OptimizerBuilder opt = c.optimizer ? c.optimizer : [](std::vector<NamedParameter> p) {
      return make_sgd(std::move(p), SgdOptions{});
    };
    const ModelBuilder build = [&build_model, &c](Device& d) {
      Sequential m = build_model(d);
      m.set_checkpoint(c.checkpoint_layers);
      return m;
    };
    auto strategy = make_strategy(b, so, build, opt);
    out.model_layers = strategy->module().size();
    after_setup();
    // One step: K micro-batches of `batch` (K = 1 without accumulation).
    auto step = [&strategy, &c](const Tensor& xs, const Tensor& ys) {
      if (c.accumulate == 1) return strategy->train_step(xs, ys);
      return ddp_accumulated_step(dynamic_cast<DistributedDataParallel&>(*strategy), c.accumulate, xs, ys);
    };
    batch *= c.accumulate;
    // The batch as the data loader hands it over: in the model's dtype, except under
    // f16-master, whose model.half() leaves the inputs f32 (apex amp O2 casts them inside
    // forward, on the GPU, after the copy; found by an outside-user review).
    const DType input_dtype = c.precision && precision_uses_master_weights(*c.precision) ? DType::f32 : c.dtype;
    Tensor x = Tensor::empty(b.host_memory(), {batch, c.input_features}, input_dtype, MemoryCategory::inputs);
    Tensor y = Tensor::empty(b.host_memory(), {batch}, DType::i64, MemoryCategory::inputs);
    if (b.options().numeric) {
      // Deterministic inputs: the values matter only for the numerics, not the time.
      std::vector<double> xv(static_cast<size_t>(x.numel())), yv(static_cast<size_t>(y.numel()));
      for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<double>(i % 17) / 17.0 - 0.5;
      for (size_t i = 0; i < yv.size(); ++i) yv[i] = static_cast<double>(static_cast<std::int64_t>(i) % c.output_features);
      tensor_fill_from_f64(x, xv);
      tensor_fill_from_f64(y, yv);
    }
    for (int w = 0; w < c.warmup_steps; ++w) {
      step(x, y);
      synchronize_all(b);
    }
    out.t0 = synchronize_all(b);
    for (int i = 0; i < b.device_count(); ++i) b.sim_device(i).begin_window(out.t0);
    b.reset_totals();
    at_window_start();
    const StepResult r = step(x, y);
    out.t1 = synchronize_all(b);
    for (int i = 0; i < b.device_count(); ++i) out.accounts.push_back(b.sim_device(i).end_window(out.t1));
    out.dispatch_total_s = b.dispatch_total_s();
    out.communication_total_s = b.communication_total_s();
    out.warnings = r.warnings;
  } catch (const OutOfMemory& e) {
    out.oom = oom_report(b, e);
  } catch (const std::exception& e) {
    // A worker's out-of-memory makes its peers fail with CollectiveErrors; report the cause.
    if (auto first = b.first_failure()) {
      try {
        std::rethrow_exception(first);
      } catch (const OutOfMemory& oom) {
        out.oom = oom_report(b, oom);
        return;
      } catch (...) {
      }
    }
    out.error = e.what();
  }
}

// The link lines after the child's JSON document: bytes, busy_s, utilisation, name
// (last: a name may hold any character but a newline), tab-separated.
std::vector<LinkReport> parse_link_lines(const std::string& text, size_t pos) {
  std::vector<LinkReport> links;
  while (pos < text.size()) {
    const size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    size_t a = line.find('\t'), b = a == std::string::npos ? a : line.find('\t', a + 1),
           d = b == std::string::npos ? b : line.find('\t', b + 1);
    if (d == std::string::npos) throw std::runtime_error(fmt::format("predict child: bad link line '{}'", line));
    LinkReport l;
    l.bytes = std::stoll(line.substr(0, a));
    l.busy_s = std::stod(line.substr(a + 1, b - a - 1));
    l.utilisation = std::stod(line.substr(b + 1, d - b - 1));
    l.name = line.substr(d + 1);
    links.push_back(std::move(l));
  }
  return links;
}

// Symmetric ranks: rank q of every other node is rank q of node 0's twin.
void expand_symmetric_devices(StepReport& r, int devices) {
  const int simulated = static_cast<int>(r.devices_detail.size());
  r.devices_detail.reserve(static_cast<size_t>(devices));
  for (int i = simulated; i < devices; ++i) {
    DeviceReport dr = r.devices_detail[static_cast<size_t>(i % simulated)];
    dr.device = fmt::format("sim:gpu{}", i);
    r.devices_detail.push_back(std::move(dr));
  }
}

// The backend's options for `c` (the planted fault predict_every_op_at_f32_peak drops
// the precision, as the twin did before it knew precisions).
SimBackendOptions backend_options(const PredictConfig& c, ChromeTrace& trace) {
  SimBackendOptions o;
  o.numeric = c.numeric;
  o.compute_dtype = c.dtype;
  o.precision = c.precision;
  if (fault_active(Fault::predict_every_op_at_f32_peak)) {
    o.precision.reset();
    o.compute_dtype = c.dtype == DType::f64 ? DType::f64 : DType::f32;
  }
  o.workers = c.strategy == StrategyKind::ddp ? SimWorkerModel::process_per_worker
                                              : SimWorkerModel::threads_of_one_process;
  o.trace = c.trace_path.empty() ? nullptr : &trace;
  return o;
}

// Symmetric ranks: the simulated ranks 0..simulated-1 form their groups over every GPU
// of `gpus` (the others have no actor), and NCCL's channel count (for interference) is
// the whole group's, not the simulated node's.
// Their collectives are timed while *timed holds.
void make_groups_symmetric(SimMachine& machine, sim::Platform& p, const std::vector<int>& gpus, int simulated,
                           const std::shared_ptr<const bool>& timed) {
  if (gpus.size() > 1)
    for (auto& g : machine.gpus) g.rates.nccl_channels = sim::default_channels(p, gpus);
  machine.make_collective_group = [&p, gpus, simulated, timed](const std::vector<int>& devices) {
    bool node0 = static_cast<int>(devices.size()) == simulated;
    for (int i = 0; node0 && i < simulated; ++i) node0 = devices[static_cast<size_t>(i)] == i;
    if (!node0)
      throw std::invalid_argument(fmt::format("symmetric ranks: a group of {} ranks, expected the {} simulated ranks in order",
                                              devices.size(), simulated));
    if (fault_active(Fault::predict_symmetric_node0_only))  // planted fault: times node 0's ranks alone
      return std::make_shared<PlatformCollectives>(p, std::vector<int>(gpus.begin(), gpus.begin() + simulated), simulated,
                                                   timed);
    return std::make_shared<PlatformCollectives>(p, gpus, simulated, timed);
  };
}

// The report's description of the configuration and its warnings (no timings yet).
StepReport report_of_config(const sim::HardwareSpec& hw, const PredictConfig& c, std::int64_t batch_global,
                            std::int64_t batch_per_device, const Measured& m) {
  StepReport r;
  r.source = "predicted";
  r.backend = "sim";
  r.hardware = hw.name;
  r.model = c.model_name;
  r.strategy = strategy_kind_name(c.strategy);
  r.devices = c.devices;
  r.nodes = c.nodes;
  r.dtype = std::string(dtype_name(c.dtype));
  if (c.precision) r.precision = std::string(precision_name(*c.precision));
  if (c.memory_format != MemoryFormat::contiguous) r.memory_format = std::string(memory_format_name(c.memory_format));
  if (c.inputs_resident) r.inputs = "device";
  r.batch_global = batch_global * c.accumulate;
  if (c.accumulate > 1) r.accumulate = c.accumulate;
  if (c.comm_hook.kind != CommHook::none) r.comm_hook = comm_hook_name(c.comm_hook);
  if (c.checkpoint_layers > 0) r.checkpoint_layers = static_cast<std::int64_t>(c.checkpoint_layers);
  if (c.strategy == StrategyKind::ddp) r.bucket_cap_mb = c.bucket_cap_mb;
  r.batch_per_device = batch_per_device;
  r.out_of_memory = m.oom;
  r.warnings = m.warnings;
  if (c.checkpoint_layers > 0 && m.model_layers > 0 && c.checkpoint_layers >= m.model_layers)
    r.warnings.push_back(fmt::format(
        "activation checkpointing, {} layer(s) per segment, has no effect here: the model's {} layers make one "
        "segment, and torch.utils.checkpoint.checkpoint_sequential runs its last segment without checkpointing; "
        "use fewer layers per segment",
        c.checkpoint_layers, m.model_layers));
  else if (const size_t n = std::max<size_t>(1, static_cast<size_t>(c.checkpoint_layers)),  // 0: no checkpointing
                        segments = (m.model_layers + n - 1) / n;
           c.checkpoint_layers > 0 && m.model_layers > 0 && m.model_layers % n != 0)
    // checkpoint_sequential(functions, S) checkpoints S - 1 segments of floor(layers / S) and
    // runs the rest last: a segment length that does not divide the layers (13 + 1 of 14)
    // has no call to name (an outside-user review found the warning naming segments=2,
    // which runs 7 + 7).
    r.warnings.push_back(fmt::format(
        "activation checkpointing, {} layer(s) per segment: the model's {} layers make segments of {} and a last "
        "of {}, which torch.utils.checkpoint.checkpoint_sequential does not run (segments={} checkpoints {} of {} "
        "and runs the last {}); the twin costs the segments of {} as given",
        n, m.model_layers, n, m.model_layers - (segments - 1) * n, segments, segments - 1,
        m.model_layers / segments, m.model_layers - (segments - 1) * (m.model_layers / segments), n));
  else if (c.checkpoint_layers > 0)
    // checkpoint_sequential's argument is the number of segments, --checkpoint's the layers in
    // one: say both, so the PyTorch call is not written with the wrong number.
    r.warnings.push_back(fmt::format(
        "activation checkpointing, {} layer(s) per segment{} (torch.utils.checkpoint.checkpoint_sequential: the "
        "last segment is not checkpointed): each checkpointed segment keeps its input and runs its forward again "
        "in backward",
        c.checkpoint_layers,
        m.model_layers > 0
            ? fmt::format(": checkpoint_sequential(functions, segments={}) over the model's {} layers",
                          (m.model_layers + static_cast<size_t>(c.checkpoint_layers) - 1) /
                              static_cast<size_t>(c.checkpoint_layers),
                          m.model_layers)
            : std::string()));
  if (c.comm_hook.kind == CommHook::powersgd)
    r.warnings.push_back(fmt::format(
        "comm hook {}: PowerSGD's steady state (past start_powerSGD_iter, warm start, error feedback); the twin "
        "runs each bucket's Q phase (orthogonalise P, Q = M^T P, all-reduce Q) after backward, not as P's "
        "all-reduce completes",
        comm_hook_name(c.comm_hook)));
  else if (const DType grads = c.precision ? precision_parameter_dtype(*c.precision) : c.dtype;
           c.comm_hook.kind != CommHook::none && *comm_hook_wire_dtype(c.comm_hook.kind) == grads)
    r.warnings.push_back(fmt::format("comm hook {}: the buckets are {} already, so the hook only divides them in "
                                     "place (no cast, no copy): it changes nothing on the wire",
                                     comm_hook_name(c.comm_hook), dtype_name(grads)));
  else if (c.comm_hook.kind != CommHook::none)
    r.warnings.push_back(fmt::format("comm hook {}: buckets all-reduced in {} with a cast kernel before and after",
                                     comm_hook_name(c.comm_hook), dtype_name(*comm_hook_wire_dtype(c.comm_hook.kind))));
  // DataParallel chunks the batch with torch.chunk, which can make fewer chunks than GPUs
  // (10 on 8: five chunks of 2): the rest get no replica's work.
  if (c.strategy == StrategyKind::data_parallel && c.devices > 1 && batch_global > 0) {
    const std::vector<std::int64_t> chunks = chunk_sizes(batch_global, c.devices);
    if (static_cast<int>(chunks.size()) < c.devices)
      r.warnings.push_back(fmt::format(
          "DataParallel: torch.chunk splits the batch of {} into {} chunk(s) ({}), so {} of the {} GPUs get no "
          "samples and compute nothing; a batch that is a multiple of {} uses every GPU",
          batch_global, chunks.size(), fmt::join(chunks, ", "), c.devices - static_cast<int>(chunks.size()), c.devices,
          c.devices));
  }
  return r;
}

// Each simulated device's peak memory, its breakdown and its busy time in the window.
void add_device_details(StepReport& r, SimBackend& backend, const Measured& m) {
  for (int i = 0; i < backend.device_count(); ++i) {
    DeviceReport dr = device_memory_report(backend.sim_device(i));
    if (!m.accounts.empty()) {
      const SimDeviceAccount& a = m.accounts[static_cast<size_t>(i)];
      dr.busy_s = a.compute_busy_s + a.optimizer_busy_s;
      for (int c = 0; c < kSimOpClassCount; ++c)
        if (a.kernel_s_by_class[static_cast<size_t>(c)] > 0)
          dr.kernel_time_by_class_s[sim_op_class_name(static_cast<SimOpClass>(c))] = a.kernel_s_by_class[static_cast<size_t>(c)];
    }
    r.devices_detail.push_back(std::move(dr));
  }
}

// The step's time, throughput and breakdown, and the links' usage over it. Throughput counts
// r.batch_global: every sample the step trains on (all K micro-batches' with accumulation).
void add_step_timing(StepReport& r, const Measured& m, const sim::Platform& p, bool with_links) {
  // Interference: the compute that overlapped NCCL kernels ran slower by the SMs and
  // bandwidth they held; the slowest device's loss lengthens the step.
  Seconds interference = 0;
  for (const auto& a : m.accounts) interference = std::max(interference, a.interference_s);
  const Seconds step = m.t1 - m.t0 + interference;
  r.step_time_s = step;
  r.throughput_samples_per_s = static_cast<double>(r.batch_global) / step;
  // The breakdown of the device with the most work (GPU 0 under DataParallel).
  const auto busiest = std::max_element(m.accounts.begin(), m.accounts.end(), [](auto& a, auto& b) {
    return a.compute_busy_s + a.optimizer_busy_s < b.compute_busy_s + b.optimizer_busy_s;
  });
  r.breakdown_s = {busiest->compute_busy_s, busiest->exposed_comm_s, busiest->idle_other_s, busiest->optimizer_busy_s,
                   interference, busiest->exposed_host_copy_s};
  if (!with_links) return;
  for (const auto& u : p.link_usage()) r.links.push_back({u.link, u.bytes, u.busy_s, std::min(1.0, u.busy_s / step)});
}

// The child's answer: the report (less its links) and the totals as one JSON line, then
// the links as text lines: at 32,768 GPUs there are ~260,000, and their JSON tree took
// ~300 MiB in each process.
std::string child_result(StepReport& r, const Measured& m) {
  std::vector<LinkReport> links = std::move(r.links);
  r.links.clear();
  std::string out = nlohmann::json{{"report", step_report_to_json(r)},
                                   {"dispatch_total_s", m.dispatch_total_s},
                                   {"communication_total_s", m.communication_total_s}}
                        .dump();
  out += '\n';
  for (const auto& l : links) fmt::format_to(std::back_inserter(out), "{}\t{}\t{}\t{}\n", l.bytes, l.busy_s, l.utilisation, l.name);
  return out;
}

// The parent's reading of child_result; symmetric ranks' details copied for every node.
PredictDetail parse_child_result(const std::string& text, int devices) {
  const size_t json_end = text.find('\n');
  const auto j = nlohmann::json::parse(text.substr(0, json_end));
  PredictDetail out{step_report_from_json(j.at("report"), "predict child"), j.at("dispatch_total_s").get<double>(),
                    j.at("communication_total_s").get<double>()};
  out.report.links = parse_link_lines(text, json_end == std::string::npos ? text.size() : json_end + 1);
  if (out.report.simulated_devices) expand_symmetric_devices(out.report, devices);
  return out;
}

// One configuration in a forked child.
PredictDetail simulate_config(const sim::HardwareSpec& hw_in, const ModelBuilder& build_model, const PredictConfig& c) {
  // Plain variables, not a structured binding: the lambdas below capture them, which
  // clang before 16 rejects for bindings.
  const std::pair<std::int64_t, std::int64_t> batches = predict_batches(c);
  const std::int64_t batch_global = batches.first, batch_per_device = batches.second;
  const sim::HardwareSpec hw = c.nodes == hw_in.nodes ? hw_in : sim::with_nodes(hw_in, c.nodes);
  const std::vector<int> gpus = predict_gpu_indices(hw, c.devices, c.nodes);
  // Symmetric ranks: node 0's GPUs are simulated and stand for all (see PredictConfig).
  const bool symmetric = symmetric_ranks_apply(c);
  const int simulated = symmetric ? c.devices / c.nodes : c.devices;
  const std::vector<int> simulated_gpus(gpus.begin(), gpus.begin() + simulated);
  const std::int64_t driver_batch = symmetric ? batch_per_device * simulated : batch_global;
  // These live in the child only (run_simulation forks): the parent's copies stay empty.
  std::unique_ptr<SimBackend> backend;
  ChromeTrace trace;
  Measured m;
  // Symmetric ranks: the setup's collectives (DDP's construction broadcast) untimed; no
  // figure reads them, and at 32,768 GPUs timing them took a tenth of the prediction.
  const auto timed = std::make_shared<bool>(!symmetric);
  auto setup = [&](sim::Platform& p) {
    SimMachine machine = sim_machine_from_platform(p, simulated_gpus);
    if (symmetric) make_groups_symmetric(machine, p, gpus, simulated, timed);
    if (fault_active(Fault::predict_half_wire_as_f64))
      machine.make_collective_group = [make = machine.make_collective_group](const std::vector<int>& devices) {
        return std::make_shared<HalfAsF64Collectives>(make(devices));
      };
    SimBackendOptions o = backend_options(c, trace);
    if (symmetric) o.symmetric_world = c.devices;
    backend = std::make_unique<SimBackend>(std::move(machine), o);
    s4u::Actor::create("driver", p.cpu_host(0), [&] {
      drive(*backend, c, build_model, driver_batch, [&timed] { *timed = true; }, [&p] { p.reset_link_usage(); }, m);
    });
  };
  auto finish = [&](sim::Platform& p) {
    if (!m.error.empty()) throw std::runtime_error(m.error);
    StepReport r = report_of_config(hw, c, batch_global, batch_per_device, m);
    add_device_details(r, *backend, m);
    // Symmetric ranks: only the simulated ranks' details go to the parent, which copies
    // them for every other node (expand_symmetric_devices).
    if (symmetric) r.simulated_devices = simulated;
    if (m.oom) return child_result(r, m);
    add_step_timing(r, m, p, c.link_usage);
    if (!c.trace_path.empty()) {
      trace.keep_window(m.t0, m.t1);
      trace.write(c.trace_path);
      r.trace = c.trace_path;
    }
    return child_result(r, m);
  };
  // Symmetric ranks: only node 0 runs actors, so the nodes no route needs SimGrid for are
  // mirrored (PlatformOptions::mirror_nodes).
  sim::PlatformOptions options;
  options.mirror_nodes = symmetric;
  return parse_child_result(sim::run_simulation(hw, setup, finish, options), c.devices);
}

}  // namespace

StepReport predict_step(const sim::HardwareSpec& hw, const ModelBuilder& build_model, const PredictConfig& c) {
  return predict_step_detailed(hw, build_model, c).report;
}

PredictDetail predict_step_detailed(const sim::HardwareSpec& hw, const ModelBuilder& build_model,
                                    const PredictConfig& c) {
  if (c.input_features < 1 || c.output_features < 1)
    throw std::invalid_argument("predict: input_features and output_features of the model must be set");
  if (c.strategy == StrategyKind::single && c.devices != 1)
    throw std::invalid_argument(fmt::format("predict: strategy single runs on 1 device, {} given", c.devices));
  if (c.comm_hook.kind != CommHook::none && c.strategy != StrategyKind::ddp)
    throw std::invalid_argument(fmt::format("predict: comm hook {} needs strategy ddp (got {})",
                                            comm_hook_name(c.comm_hook), strategy_kind_name(c.strategy)));
  if (c.accumulate < 1 || (c.accumulate > 1 && c.strategy != StrategyKind::ddp))
    throw std::invalid_argument(fmt::format("predict: accumulate {} needs strategy ddp and K >= 1 (got {})", c.accumulate,
                                            strategy_kind_name(c.strategy)));
  if (c.precision) {
    // Each op class's compute type under the precision needs its datasheet peak: named by
    // file and key here, before a device is built (whose error knows only the GPU model).
    const bool has_tf32 = hw.gpu.peak_flops.tf32.has_value();
    for (OpClass k : {OpClass::other, OpClass::matmul, OpClass::conv}) {
      const ComputeType t = precision_compute_type(*c.precision, k, has_tf32);
      try {
        (void)sim::peak_flops(hw.gpu, t);
      } catch (const std::invalid_argument&) {
        // TF32 and BF16 need Ampere (8.0): adding a figure to an older GPU's file is refused,
        // so the advice there is another precision (it had sent the user round in a circle).
        const int cc = sim::gpu_compute_capability_of(hw.gpu);
        if ((t == ComputeType::tf32 || t == ComputeType::bf16) && cc < 80)
          throw std::invalid_argument(fmt::format(
              "{}: {} has compute capability {}.{}, which has no {} Tensor Cores, and precision {} runs on them: "
              "choose f16-amp or f32",
              hw.source_file.empty() ? "hardware '" + hw.name + "'" : hw.source_file, hw.gpu.name, cc / 10, cc % 10,
              t == ComputeType::tf32 ? "TF32" : "BF16", precision_name(*c.precision)));
        throw std::invalid_argument(fmt::format(
            "{}: gpu.peak_flops.{} is not set, and precision {} runs on it: add the datasheet's dense {} "
            "rate there, or choose a precision this GPU has",
            hw.source_file.empty() ? "hardware '" + hw.name + "'" : hw.source_file, compute_type_label(t),
            precision_name(*c.precision), compute_type_label(t)));
      }
    }
  }
  PredictDetail detail = simulate_config(hw, build_model, c);
  StepReport& r = detail.report;
  // Fused attention without a figure of its own runs at efficiency.gemm (0.74 by default),
  // about 4x what FlashAttention-2 reaches in PyTorch (an outside-user review: an H100 PCIe
  // file without op_efficiency.sdpa came out faster than a DGX H100). Said, not guessed.
  const bool ran_sdpa = std::any_of(r.devices_detail.begin(), r.devices_detail.end(), [](const DeviceReport& d) {
    const auto it = d.kernel_time_by_class_s.find(sim_op_class_name(SimOpClass::sdpa));
    return it != d.kernel_time_by_class_s.end() && it->second > 0;
  });
  // The compute type matmuls and fused attention ran in: the precision's for matmul-class ops,
  // else the dtype's; a per-type figure for another type leaves them at efficiency.gemm too.
  const auto& sdpa_by_type = hw.gpu.op_efficiency.by_type[static_cast<size_t>(SimOpClass::sdpa)];
  const ComputeType matmul_type = c.precision ? precision_compute_type(*c.precision, OpClass::matmul,
                                                                     hw.gpu.peak_flops.tf32.has_value())
                                : c.dtype == DType::f64 ? ComputeType::f64
                                                        : ComputeType::f32;
  if (ran_sdpa && !hw.gpu.op_efficiency.sdpa && !sdpa_by_type.count(matmul_type))
    r.warnings.push_back(fmt::format(
        "{} gives no gpu.op_efficiency.sdpa: fused attention (scaled_dot_product_attention) ran at efficiency.gemm's "
        "{:g}, which FlashAttention-2 does not reach (0.187 of the bf16 peak on H100 in PyTorch's own benchmark, "
        "dgx-h100.yaml's source); set it from a measurement of this GPU",
        hw.source_file.empty() ? "hardware '" + hw.name + "'" : hw.source_file, hw.efficiency.gemm));
  // GEMMs without the GPU's own matmul figure run at efficiency.gemm's default, which public
  // torch matmul runs put anywhere from 0.58 to 1.0 across GPUs: said where they are a
  // tenth or more of a GPU's kernel time (an outside-user review: the fidelity table's three
  // files without a figure run BERT-large 23-46 % fast, with no word). A file that sets
  // efficiency.gemm itself (host-cpu-gloo) chose its figure.
  double gemm_share = 0;
  for (const auto& d : r.devices_detail) {
    double total = 0, gemm = 0;
    for (const auto& [cls, t] : d.kernel_time_by_class_s) {
      total += t;
      if (cls == sim_op_class_name(SimOpClass::gemm)) gemm += t;
    }
    if (total > 0) gemm_share = std::max(gemm_share, gemm / total);
  }
  const auto& gemm_by_type = hw.gpu.op_efficiency.by_type[static_cast<size_t>(SimOpClass::gemm)];
  if (gemm_share >= kUnmeasuredGemmShare && !hw.gpu.op_efficiency.gemm && !gemm_by_type.count(matmul_type) &&
      hw.efficiency.gemm == sim::EfficiencySpec{}.gemm)
    // First: a caveat on the hardware file, before what the configuration itself is told.
    r.warnings.insert(r.warnings.begin(), fmt::format(
        "{} gives no gpu.op_efficiency.gemm for {}: its matmuls ({:.0f} % of the kernel time) ran at efficiency.gemm's "
        "default {:g}, the median of the library's public matmul runs, which span 0.58 to 1.0 across GPUs; set it "
        "from a torch matmul run of this GPU (`dptwin hardware schema`; the fidelity table's files without one run "
        "BERT-large 23-46 % fast)",
        hw.source_file.empty() ? "hardware '" + hw.name + "'" : hw.source_file, compute_type_label(matmul_type),
        100.0 * gemm_share, hw.efficiency.gemm));
  // NCCL over host memory (SHM) on a node: the fidelity table's DDP runs there lost more than
  // the twin's SHM rings cost them (its class "training, NCCL via host memory": BERT-large
  // -10 to +134 % on 2026-12-07, no published microbenchmark of the SHM kernels to set a
  // figure from), so a prediction there says it (an outside-user's reading of the class).
  const int per_node = c.devices / std::max(1, c.nodes);
  // DDP's only: DataParallel's scatter and gather are the driver's copies, not NCCL's, and
  // the table's runs through host memory are all DDP.
  if (c.strategy == StrategyKind::ddp && per_node >= 2 && !hw.gloo) {
    std::string why;
    for (int a = 0; a < per_node && why.empty(); ++a)
      for (int b = a + 1; b < per_node && why.empty(); ++b)
        if (!sim::nccl_p2p_within_node(hw, a, b, per_node))
          why = hw.nccl_p2p_disable ? "nccl_p2p_disable is set, as by NCCL_P2P_DISABLE=1"
                : !sim::gpu_peer_access(hw, a, b)
                    ? fmt::format("GPUs {} and {} have no peer access: pcie.peer_to_peer is false and no NVLink "
                                  "joins them",
                                  a, b)
                    : fmt::format("GPUs {} and {} meet at the root complex of the {}, beyond NCCL's p2pLevel", a, b,
                                  hw.host.cpu);
    std::vector<int> local(static_cast<size_t>(per_node));
    for (int i = 0; i < per_node; ++i) local[static_cast<size_t>(i)] = i;
    if (!why.empty())
      r.warnings.push_back(fmt::format(
          "NCCL connects this node's GPUs through host memory, its SHM transport ({}); the twin runs those "
          "collectives at the host-staged rate ({:.1f} GB/s each way per GPU) and overlaps them with backward, but "
          "measured DDP runs over SHM can lose more (`dptwin fidelity`, class \"training, NCCL via host memory\": "
          "BERT-large on 2-8 GPUs up to 2.3x the measured throughput on 2026-12-07), so read this step time as a "
          "lower bound",
          why, sim::shm_rate_per_gpu(hw, local) / 1e9));
  }
  // A peak within kMemoryHeadroomShare of the GPU's memory fits in the twin, which counts
  // tensors only: the CUDA context, cuBLAS and cuDNN workspaces and the caching allocator's
  // fragmentation are not counted, so PyTorch may run out of memory there (an outside-user
  // review found a 99 % full L40S called fitting, without a word). The fullest GPU is named.
  const DeviceReport* fullest = nullptr;
  for (const auto& d : r.devices_detail)
    if (d.capacity_bytes && *d.capacity_bytes > 0 &&
        (!fullest || static_cast<double>(d.peak_memory_bytes) / static_cast<double>(*d.capacity_bytes) >
                         static_cast<double>(fullest->peak_memory_bytes) / static_cast<double>(*fullest->capacity_bytes)))
      fullest = &d;
  if (!r.out_of_memory && fullest &&
      static_cast<double>(fullest->peak_memory_bytes) >=
          (1.0 - kMemoryHeadroomShare) * static_cast<double>(*fullest->capacity_bytes))
    r.warnings.push_back(fmt::format(
        "peak memory on {} is {:.2f} GiB of its {:.2f} GiB ({:.0f} %): the twin counts tensors only, and the CUDA "
        "context, cuBLAS and cuDNN workspaces and the caching allocator's fragmentation take some of the rest, so "
        "PyTorch may run out of memory here; leave more than {:.0f} % free (a smaller batch, activation "
        "checkpointing)",
        fullest->device, static_cast<double>(fullest->peak_memory_bytes) / static_cast<double>(kGiB),
        static_cast<double>(*fullest->capacity_bytes) / static_cast<double>(kGiB),
        100.0 * static_cast<double>(fullest->peak_memory_bytes) / static_cast<double>(*fullest->capacity_bytes),
        100 * kMemoryHeadroomShare));
  if (c.single_device_baseline && r.step_time_s) {
    PredictConfig one = c;
    one.strategy = StrategyKind::single;
    one.devices = 1;
    one.nodes = 1;
    one.batch_global.reset();
    one.batch_per_device = r.batch_per_device;
    one.trace_path.clear();
    one.single_device_baseline = false;
    one.accumulate = 1;
    one.comm_hook = {};
    one.link_usage = false;  // only its step time is read
    const StepReport base = simulate_config(hw, build_model, one).report;
    if (base.step_time_s) {
      // With K micro-batches one GPU runs the same step: K forward and backward passes
      // queued back to back, then one update (zero_grad, optimizer: once per step). The
      // single-device step plus what K - 1 more micro-batches add to a one-GPU step: DDP on
      // one GPU with K micro-batches less with one, so the twin's own accounting of a
      // micro-batch (kernels, input copies, dispatch hidden behind queued work) is used.
      // Planted fault: the baseline one micro-batch's step, as if accumulation scaled.
      const int k = fault_active(Fault::accumulation_baseline_one_micro_batch) ? 1 : c.accumulate;
      Seconds one_step = *base.step_time_s;
      if (k > 1) {
        PredictConfig ddp1 = one;
        ddp1.strategy = StrategyKind::ddp;
        ddp1.accumulate = 1;
        const StepReport d1 = simulate_config(hw, build_model, ddp1).report;
        ddp1.accumulate = k;
        const StepReport dk = simulate_config(hw, build_model, ddp1).report;
        if (d1.step_time_s && dk.step_time_s) one_step += *dk.step_time_s - *d1.step_time_s;
      }
      r.single_device_step_time_s = one_step;
      const double one_device = static_cast<double>(k) * static_cast<double>(r.batch_per_device) / one_step;
      r.scaling_efficiency = *r.throughput_samples_per_s / (c.devices * one_device);
    } else {
      r.warnings.push_back("the single-device baseline does not fit in one GPU's memory: no scaling efficiency");
    }
  }
  return detail;
}

}  // namespace dpt
