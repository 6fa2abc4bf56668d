// The "single" strategy: the whole batch on one device, as a plain PyTorch loop.
#pragma once
#include <memory>

#include "engine/parallel/strategy.hpp"

namespace dpt {

std::unique_ptr<Strategy> make_single_strategy(Backend& backend, const StrategyOptions& options,
                                               const ModelBuilder& build_model,
                                               const OptimizerBuilder& build_optimizer);

}  // namespace dpt
