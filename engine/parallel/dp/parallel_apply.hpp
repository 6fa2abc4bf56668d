// DataParallel step 3, parallel_apply: replica i runs forward on input i, one worker
// per used device (backend.parallel_for: threads on host and CUDA, actors in the
// twin). A worker's exception is rethrown on the caller, as torch re-raises it.
#pragma once
#include <functional>
#include <vector>

#include "engine/core/backend.hpp"
#include "engine/nn/model.hpp"

namespace dpt {

// outputs[i] = replicas[i]->forward(inputs[i]). Each worker reports one host
// dispatch per layer, as the single Python thread dispatches each module's ops.
// `then`, when given, runs on worker i after its forward (a loss the module computes).
std::vector<Tensor> parallel_apply(Backend& backend, const std::vector<Sequential*>& replicas,
                                   const std::vector<Tensor>& inputs,
                                   const std::function<void(int, const Tensor&)>& then = {});

}  // namespace dpt
