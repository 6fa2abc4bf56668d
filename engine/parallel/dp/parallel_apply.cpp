#include "engine/parallel/dp/parallel_apply.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dpt {

std::vector<Tensor> parallel_apply(Backend& backend, const std::vector<Sequential*>& replicas,
                                   const std::vector<Tensor>& inputs,
                                   const std::function<void(int, const Tensor&)>& then) {
  if (replicas.size() != inputs.size())
    throw std::invalid_argument(fmt::format("parallel_apply: {} replicas for {} inputs", replicas.size(), inputs.size()));
  std::vector<Tensor> outputs(replicas.size());
  backend.parallel_for(static_cast<int>(replicas.size()), [&](int i) {
    Sequential& m = *replicas[static_cast<size_t>(i)];
    backend.host_dispatch(static_cast<int>(m.size()));
    outputs[static_cast<size_t>(i)] = m.forward(inputs[static_cast<size_t>(i)]);
    if (then) then(i, outputs[static_cast<size_t>(i)]);
  });
  return outputs;
}

}  // namespace dpt
