#include "engine/parallel/data_parallel.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/core/fault_injection.hpp"
#include "engine/io/checkpoint.hpp"
#include "engine/parallel/dp/gather.hpp"
#include "engine/parallel/dp/parallel_apply.hpp"
#include "engine/parallel/dp/replicate.hpp"
#include "engine/parallel/dp/scatter.hpp"
#include "engine/parallel/split.hpp"

namespace dpt {

std::vector<int> resolve_device_ids(Backend& backend, const std::vector<int>& requested, const char* strategy) {
  std::vector<int> ids = requested;
  if (ids.empty())
    for (int i = 0; i < backend.device_count(); ++i) ids.push_back(i);
  std::set<int> seen;
  for (int id : ids) {
    if (id < 0 || id >= backend.device_count())
      throw std::invalid_argument(fmt::format("{}: device id {} is outside 0..{} (the {} backend has {} devices)", strategy,
                                              id, backend.device_count() - 1, backend.name(), backend.device_count()));
    if (!seen.insert(id).second)
      throw std::invalid_argument(fmt::format("{}: device id {} is listed twice in device_ids [{}]", strategy, id,
                                              fmt::join(ids, ", ")));
  }
  return ids;
}

namespace {

// The module's own loss (StrategyOptions::dp_loss_per_replica): worker i computes its
// chunk's loss right after its forward; the step's loss is the mean of the replicas'
// losses (the Trainer's loss.mean() over the gathered per-GPU losses), so each
// replica's loss is divided by the replica count on top of its own reduction.
// Returns the step's loss; `outputs` and `grads` get each replica's output and its
// gradient.
double per_replica_losses(Backend& backend, const StrategyOptions& o, const std::vector<Sequential*>& replicas,
                          const std::vector<Tensor>& inputs, const std::vector<Tensor>& targets, double loss_scale,
                          std::vector<Tensor>& outputs, std::vector<Tensor>& grads) {
  const size_t n = replicas.size();
  std::vector<double> values(n, 0.0);
  grads.assign(n, Tensor{});
  outputs = parallel_apply(backend, replicas, inputs, [&](int i, const Tensor& y) {
    const auto r = static_cast<size_t>(i);
    const double rows = static_cast<double>(y.dim(0));
    const double per_sample = o.loss == LossKind::mse ? static_cast<double>(y.numel()) / rows : 1.0;
    const double divisor = (o.reduction == Reduction::mean ? rows * per_sample : 1.0) * static_cast<double>(n);
    backend.host_dispatch(1);
    LossResult l = loss_forward_backward(o.loss, o.reduction, y, targets[r], divisor, loss_scale);
    values[r] = l.value;
    grads[r] = l.grad;
  });
  double sum = 0;
  for (double v : values) sum += v;
  return sum;
}

}  // namespace

DataParallel::DataParallel(Backend& backend, const StrategyOptions& options, const ModelBuilder& build_model,
                           const OptimizerBuilder& build_optimizer)
    : backend_(backend), options_(options), device_ids_(resolve_device_ids(backend, options.device_ids, "dp")),
      output_device_(options.output_device.value_or(device_ids_[0])) {
  if (options.dim != 0)
    throw std::invalid_argument(fmt::format("dp: dim={} is not supported; DataParallel scatters along dim 0 only", options.dim));
  if (output_device_ < 0 || output_device_ >= backend.device_count())
    throw std::invalid_argument(fmt::format("dp: output_device {} is outside 0..{}", output_device_, backend.device_count() - 1));
  primary_ = build_model(backend.device(device_ids_[0]));
  optimizer_ = build_optimizer(primary_.named_parameters());
}

StepResult DataParallel::train_step(const Tensor& x, const Tensor& target) {
  if (x.ndim() < 1 || x.dim(0) == 0)
    throw std::invalid_argument(fmt::format("dp: the batch is empty (input shape {})", shape_to_string(x.shape())));
  if (target.ndim() < 1 || target.dim(0) != x.dim(0))
    throw std::invalid_argument(fmt::format("dp: input has {} rows but target shape is {}", x.dim(0),
                                            shape_to_string(target.shape())));
  Device& primary_device = backend_.device(device_ids_[0]);
  Device& out_device = backend_.device(output_device_);

  // The user's script moves the batch to the primary device (x.to("cuda:0")); once, when
  // it is resident there (options_.inputs_resident). Scatter still runs every step.
  backend_.host_dispatch(1);
  const Tensor x_primary = inputs_.to_device(backend_, x, primary_device);
  Tensor target_out = inputs_.to_device(backend_, target, out_device);

  // 1. scatter: torch.chunk; devices past the last chunk get nothing (and no replica).
  std::vector<std::int64_t> sizes = chunk_sizes(x.dim(0), static_cast<int>(device_ids_.size()));
  std::vector<std::int64_t> computed = sizes;
  const bool drop_last = fault_active(Fault::dp_scatter_drops_last_chunk);  // planted fault
  if (drop_last && computed.size() > 1) computed.pop_back();
  const std::vector<int> used(device_ids_.begin(), device_ids_.begin() + static_cast<std::ptrdiff_t>(computed.size()));
  backend_.host_dispatch(static_cast<int>(computed.size()));
  Tensor x_kept = x_primary.slice_rows(0, chunk_offsets(computed).back() + computed.back());
  std::vector<Tensor> inputs = scatter_rows(backend_, x_kept, computed, used, MemoryCategory::inputs);
  if (drop_last) target_out = target_out.slice_rows(0, x_kept.dim(0));

  // 2. replicate: fresh replicas every step, parameters broadcast from the primary.
  backend_.host_dispatch(static_cast<int>(used.size()));
  std::vector<Sequential> others = replicate(backend_, primary_, used);
  std::vector<Sequential*> replicas{&primary_};
  for (auto& r : others) replicas.push_back(&r);
  primary_.zero_grad();
  replicas_last_step_ = static_cast<int>(replicas.size());

  // 3. parallel_apply, 4. gather on the output device; the loss there, or in each replica.
  LossResult loss;
  Tensor y;  // the gathered outputs, alive until backward is done as in the user's script
  std::vector<Tensor> grads;
  if (options_.dp_loss_per_replica) {
    const std::vector<Tensor> targets = scatter_rows(backend_, target_out, computed, used, MemoryCategory::inputs);
    std::vector<Tensor> outputs;
    loss.value =
        per_replica_losses(backend_, options_, replicas, inputs, targets, optimizer_->loss_scale(), outputs, grads);
    backend_.host_dispatch(1);
    y = gather_rows(backend_, outputs, out_device);
    if (fault_active(Fault::dp_replica_loss_scatters_grad))  // planted fault: the gathered mode's scatter
      (void)scatter_rows(backend_, y, computed, used, MemoryCategory::activations);
  } else {
    std::vector<Tensor> outputs = parallel_apply(backend_, replicas, inputs);
    backend_.host_dispatch(1);
    y = gather_rows(backend_, outputs, out_device);
    backend_.host_dispatch(1);
    loss = loss_forward_backward(options_.loss, options_.reduction, y, target_out, std::nullopt,
                                 optimizer_->loss_scale());
    // Gather's backward scatters the gradient back with the same sizes.
    grads = scatter_rows(backend_, loss.grad, computed, used, MemoryCategory::activations);
  }
  // Each replica runs backward on its worker (the autograd engine's device threads).
  backend_.parallel_for(static_cast<int>(replicas.size()), [&](int i) {
    Sequential& m = *replicas[static_cast<size_t>(i)];
    backend_.host_dispatch(static_cast<int>(m.size()));
    m.backward(grads[static_cast<size_t>(i)]);
    m.clear_saved();
  });
  // Broadcast's backward: the replicas' gradients summed onto the primary.
  backend_.host_dispatch(1);
  reduce_add_coalesced(backend_, primary_, std::vector<Sequential*>(replicas.begin() + 1, replicas.end()));

  backend_.host_dispatch(1);
  optimizer_->step();

  StepResult result;
  result.loss = loss.value;
  result.samples_per_device.assign(device_ids_.size(), 0);
  for (size_t i = 0; i < computed.size(); ++i) result.samples_per_device[i] = computed[i];
  return result;
}

std::vector<std::pair<std::string, Tensor>> DataParallel::state_dict() { return model_state_dict(primary_, "module."); }

}  // namespace dpt
