// make_cost_only_model: a Sequential of CostLayers from a model description
// (kept apart from the descriptions so users of those need no Sequential).
#include "engine/nn/cost_layer.hpp"
#include "engine/nn/model_library.hpp"

namespace dpt {

Sequential make_cost_only_model(const ModelDescription& m, Device& device, DType dtype) {
  validate_model_description(m);
  Sequential model;
  std::int64_t features = m.input_features;
  for (const auto& l : m.layers) {
    model.append(std::make_unique<CostLayer>(l, features, device, dtype));
    features = l.output_features;
  }
  return model;
}

}  // namespace dpt
