// Strategy names and the factory that picks one by kind.
#include "engine/parallel/strategy.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"
#include "engine/parallel/data_parallel.hpp"
#include "engine/parallel/ddp/ddp.hpp"
#include "engine/parallel/single.hpp"

namespace dpt {

StrategyKind strategy_kind_from_name(const std::string& name) {
  if (name == "single") return StrategyKind::single;
  if (name == "dp") return StrategyKind::data_parallel;
  if (name == "ddp") return StrategyKind::ddp;
  throw std::invalid_argument(fmt::format("unknown strategy '{}': expected single, dp or ddp", name));
}

const char* strategy_kind_name(StrategyKind k) {
  switch (k) {
    case StrategyKind::single: return "single";
    case StrategyKind::data_parallel: return "dp";
    case StrategyKind::ddp: return "ddp";
  }
  return "?";
}

Tensor InputPlacement::to_device(Backend& backend, const Tensor& host, Device& device) {
  // Planted fault: resident inputs copied every step all the same.
  if (!resident_ || fault_active(Fault::resident_inputs_copied))
    return copy_to(backend, host, device, MemoryCategory::inputs);
  if (&host.device() == &device) return host;  // already there: nothing to place
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Placed& p : placed_)
      if (p.device == &device && p.host.storage() == host.storage() && p.host.offset_bytes() == host.offset_bytes() &&
          p.host.shape() == host.shape() && p.host.dtype() == host.dtype())
        return p.placed;
  }
  // The copy outside the lock: on the twin every rank is a SimGrid actor of one thread, and
  // a copy yields to the others, which would block on a held lock for good.
  Tensor placed = copy_to(backend, host, device, MemoryCategory::inputs);
  std::lock_guard<std::mutex> lock(mutex_);
  placed_.push_back({host, &device, placed});
  return placed;
}

std::unique_ptr<Strategy> make_strategy(Backend& backend, const StrategyOptions& options,
                                        const ModelBuilder& build_model, const OptimizerBuilder& build_optimizer) {
  switch (options.kind) {
    case StrategyKind::single: return make_single_strategy(backend, options, build_model, build_optimizer);
    case StrategyKind::data_parallel:
      return std::make_unique<DataParallel>(backend, options, build_model, build_optimizer);
    case StrategyKind::ddp:
      return std::make_unique<DistributedDataParallel>(backend, options, build_model, build_optimizer);
  }
  throw std::invalid_argument(fmt::format("unknown strategy kind {}", static_cast<int>(options.kind)));
}

}  // namespace dpt
