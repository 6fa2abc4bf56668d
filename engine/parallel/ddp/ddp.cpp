#include "engine/parallel/ddp/ddp.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/core/fault_injection.hpp"
#include "engine/io/checkpoint.hpp"
#include "engine/core/kernels.hpp"
#include "engine/parallel/data_parallel.hpp"
#include "engine/parallel/split.hpp"

namespace dpt {

struct DistributedDataParallel::Rank {
  std::unique_ptr<Sequential> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<Reducer> reducer;
};

namespace {

// Runs fn on every rank; a rank that throws aborts the communicator group first, so
// the other ranks fail fast in their collectives instead of waiting for a timeout.
void on_every_rank(Backend& backend, std::vector<std::unique_ptr<Communicator>>& comms,
                   const std::function<void(int)>& fn) {
  backend.parallel_for(static_cast<int>(comms.size()), [&](int r) {
    try {
      fn(r);
    } catch (const std::exception& e) {
      if (auto* a = dynamic_cast<AbortableCommunicator*>(comms[static_cast<size_t>(r)].get())) a->abort(e.what());
      throw;
    }
  });
}

constexpr Bytes kDdpBroadcastBucketBytes = 250 * kMiB;

// torch's _broadcast_coalesced groups (take_tensors in torch/csrc/utils/tensor_flatten.cpp):
// tensors in order, one open group per dtype; a tensor that would take its group past
// `limit` first closes it (so only a tensor larger than the limit exceeds it).
std::vector<std::vector<size_t>> coalesced_groups(const std::vector<NamedParameter>& params, Bytes limit) {
  std::vector<std::vector<size_t>> out;
  std::vector<std::pair<DType, std::pair<std::vector<size_t>, Bytes>>> open;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& v = params[i].param->value;
    auto it = std::find_if(open.begin(), open.end(), [&](const auto& g) { return g.first == v.dtype(); });
    if (it == open.end()) it = open.insert(open.end(), {v.dtype(), {{}, 0}});
    auto& [indices, bytes] = it->second;
    if (!indices.empty() && bytes + v.size_bytes() > limit) {
      out.push_back(std::move(indices));
      indices.clear();
      bytes = 0;
    }
    indices.push_back(i);
    bytes += v.size_bytes();
  }
  for (auto& g : open)
    if (!g.second.first.empty()) out.push_back(std::move(g.second.first));
  return out;
}

// Parameters broadcast from rank 0 as torch's _sync_module_states does: flattened into
// buffers of at most 250 MiB (its broadcast_bucket_size, 250 * 1024 * 1024 bytes), one
// broadcast per buffer, then copied back into the parameters.
// The copies move bits, so every rank ends with rank 0's values exactly; a 1.5B-parameter
// model needs 24 broadcasts instead of one per tensor. Rank 0 flattens; the others receive
// into the buffer, so they skip the flatten (its values would be overwritten).
void broadcast_coalesced(const std::vector<NamedParameter>& params, int rank, Communicator& comm, Seconds timeout_s) {
  for (const auto& group : coalesced_groups(params, kDdpBroadcastBucketBytes)) {
    const Tensor& first = params[group.front()].param->value;
    Elements n = 0;
    for (size_t i : group) n += params[i].param->value.numel();
    Tensor flat = Tensor::empty(first.device(), {n}, first.dtype(), MemoryCategory::buckets);
    Elements at = 0;
    if (rank == 0)
      for (size_t i : group) {
        const Tensor& v = params[i].param->value;
        Tensor dst = flat.slice_rows(at, v.numel());
        kernel_copy(v.reshape({v.numel()}), dst);
        at += v.numel();
      }
    comm.broadcast(flat, {0, timeout_s})->wait();
    if (rank == 0) continue;  // its parameters are the source
    at = 0;
    for (size_t i : group) {
      Tensor& v = params[i].param->value;
      kernel_copy(flat.slice_rows(at, v.numel()).reshape(v.shape()), v);
      at += v.numel();
    }
  }
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(Backend& backend, const StrategyOptions& options,
                                                 const ModelBuilder& build_model,
                                                 const OptimizerBuilder& build_optimizer,
                                                 std::vector<std::unique_ptr<Communicator>> communicators)
    : backend_(backend), options_(options), device_ids_(resolve_device_ids(backend, options.device_ids, "ddp")),
      comms_(std::move(communicators)) {
  if (comms_.empty()) comms_ = backend.make_communicators(device_ids_);
  if (comms_.size() != device_ids_.size())
    throw std::invalid_argument(fmt::format("ddp: {} communicators for {} devices", comms_.size(), device_ids_.size()));
  ReducerOptions ro;
  ro.bucket_cap_bytes = ddp_bucket_cap_bytes(options.bucket_cap_mb);
  ro.gradient_as_bucket_view = options.gradient_as_bucket_view;
  ro.comm_hook = options.comm_hook;
  for (size_t r = 0; r < device_ids_.size(); ++r) ranks_.push_back(std::make_unique<Rank>());
  on_every_rank(backend_, comms_, [&](int r) {
    Rank& rk = *ranks_[static_cast<size_t>(r)];
    rk.model = std::make_unique<Sequential>(build_model(backend_.device(device_ids_[static_cast<size_t>(r)])));
    // Parameters broadcast from rank 0 (torch's _sync_module_states), so every rank
    // starts from rank 0's initialisation whatever its own builder produced.
    if (!fault_active(Fault::ddp_skip_initial_broadcast))  // planted fault: ranks keep their own
      broadcast_coalesced(rk.model->named_parameters(), r, *comms_[static_cast<size_t>(r)], ro.timeout_s);
    rk.optimizer = build_optimizer(rk.model->named_parameters());
    rk.reducer = std::make_unique<Reducer>(rk.model->named_parameters(), *comms_[static_cast<size_t>(r)], ro);
  });
}

// Reducers and models go before the communicators they use.
DistributedDataParallel::~DistributedDataParallel() { ranks_.clear(); }

StepResult DistributedDataParallel::train_step(const Tensor& x, const Tensor& target) { return run(x, target, true); }
StepResult DistributedDataParallel::no_sync_step(const Tensor& x, const Tensor& target) { return run(x, target, false); }

StepResult DistributedDataParallel::run(const Tensor& x, const Tensor& target, bool sync) {
  const int world = world_size();
  if (x.ndim() < 1 || target.ndim() < 1 || target.dim(0) != x.dim(0))
    throw std::invalid_argument(fmt::format("ddp: input shape {} and target shape {} do not share a batch dimension",
                                            shape_to_string(x.shape()), shape_to_string(target.shape())));
  const std::int64_t batch = x.dim(0);
  const std::vector<std::int64_t> sizes = chunk_sizes(batch, world);
  if (batch == 0 || static_cast<int>(sizes.size()) < world)
    throw std::invalid_argument(fmt::format(
        "ddp: a global batch of {} split over {} ranks with torch.chunk gives local batches [{}], leaving {} "
        "without samples; use a batch that gives every rank at least one sample (e.g. a multiple of {})",
        batch, world, fmt::join(sizes, ", "),
        world - static_cast<int>(sizes.size()) == 1 ? fmt::format("rank {}", sizes.size())
                                                    : fmt::format("ranks {} to {}", sizes.size(), world - 1),
        world));
  const std::vector<std::int64_t> offsets = chunk_offsets(sizes);
  const bool uneven = std::any_of(sizes.begin(), sizes.end(), [&](std::int64_t s) { return s != sizes[0]; });

  StepResult result;
  result.samples_per_device = sizes;
  if (uneven && options_.uneven == UnevenMode::pytorch) {
    // Per-sample weight relative to the full batch: (1/W)(1/n_r) / (1/B) = B / (W n_r).
    std::vector<std::string> weights;
    for (int r = 0; r < world; ++r)
      weights.push_back(fmt::format("rank {} ({} samples) x{:.3g}", r, sizes[static_cast<size_t>(r)],
                                    double(batch) / (double(world) * double(sizes[static_cast<size_t>(r)]))));
    result.warnings.push_back(fmt::format(
        "ddp: uneven local batches [{}]: DDP averages per-rank means, so the gradient is not the full-batch "
        "gradient; each sample's weight relative to the full batch is {}; weighting each rank's loss by its "
        "share of the batch gives the full-batch gradient (dptwin train --uneven weighted)",
        fmt::join(sizes, ", "), fmt::join(weights, ", ")));
  }

  const bool zero_first = !accumulating_;
  std::vector<double> losses(static_cast<size_t>(world), 0.0);
  on_every_rank(backend_, comms_, [&](int r) {
    Rank& rk = *ranks_[static_cast<size_t>(r)];
    Device& dev = backend_.device(device_ids_[static_cast<size_t>(r)]);
    const std::int64_t n = sizes[static_cast<size_t>(r)];
    const std::int64_t at = offsets[static_cast<size_t>(r)];
    backend_.host_dispatch(1);
    // Each rank's shard to its device (once, when resident: options_.inputs_resident).
    const Tensor x_r = inputs_.to_device(backend_, x.slice_rows(at, n), dev);
    const Tensor t_r = inputs_.to_device(backend_, target.slice_rows(at, n), dev);
    if (zero_first) rk.model->zero_grad();
    // Planted fault: no_sync ignored, every backward all-reduces.
    rk.reducer->prepare_for_backward(sync || fault_active(Fault::ddp_sync_inside_no_sync));
    backend_.host_dispatch(static_cast<int>(rk.model->size()));
    const Tensor y = rk.model->forward(x_r);
    std::optional<double> divisor;
    const double per_sample = options_.loss == LossKind::mse ? double(y.numel()) / double(n) : 1.0;
    if (options_.uneven == UnevenMode::weighted) {
      // The full batch's divisor over W: after the Reducer's division by W and the
      // sum over ranks, the gradient is the full-batch gradient.
      const double full = options_.reduction == Reduction::mean ? double(batch) * per_sample : 1.0;
      divisor = full / world;
    }
    // The recipe's loss / K (planted fault: the K micro-batch means summed undivided).
    if (options_.accumulate > 1 && !fault_active(Fault::ddp_accumulate_undivided))
      divisor = divisor.value_or(options_.reduction == Reduction::mean ? double(n) * per_sample : 1.0) *
                options_.accumulate;
    backend_.host_dispatch(1);
    LossResult loss = loss_forward_backward(options_.loss, options_.reduction, y, t_r, divisor,
                                             rk.optimizer->loss_scale());
    losses[static_cast<size_t>(r)] = loss.value;
    backend_.host_dispatch(static_cast<int>(rk.model->size()));
    rk.model->backward(loss.grad, [&](size_t i) { rk.reducer->mark_ready(i); });
    rk.model->clear_saved();
    rk.reducer->finalize();
    if (sync) {
      backend_.host_dispatch(1);
      rk.optimizer->step();
    }
  });
  accumulating_ = !sync;
  // The loss a script prints after all-reducing it: the mean of the ranks' losses
  // (in weighted mode each rank's share, so the mean is the full-batch loss).
  double sum = 0;
  for (double l : losses) sum += l;
  result.loss = sum / world;
  return result;
}

Sequential& DistributedDataParallel::rank_module(int rank) { return *ranks_.at(static_cast<size_t>(rank))->model; }
const Reducer& DistributedDataParallel::reducer(int rank) const {
  return *ranks_.at(static_cast<size_t>(rank))->reducer;
}

std::vector<std::pair<std::string, Tensor>> DistributedDataParallel::state_dict() {
  return model_state_dict(rank_module(0), "module.");
}

}  // namespace dpt
