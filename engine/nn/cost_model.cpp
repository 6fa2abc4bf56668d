// make_cost_only_model: a Sequential of CostLayers from a model description
// (kept apart from the descriptions so users of those need no Sequential), and
// the op class a described layer's kernels run as.
#include <string_view>

#include "engine/nn/cost_layer.hpp"
#include "engine/nn/model_library.hpp"

namespace dpt {

namespace {

Sequential build(const ModelDescription& m, Device& device, DType dtype, std::optional<Precision> precision,
                 MemoryFormat memory_format = MemoryFormat::contiguous) {
  validate_model_description(m);
  Sequential model;
  std::int64_t features = m.input_features;
  for (const auto& l : m.layers) {
    model.append(std::make_unique<CostLayer>(l, features, device, dtype, precision, memory_format));
    features = l.output_features;
  }
  return model;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// A part that holds no GEMM: a norm, an activation, pooling, an embedding lookup,
// dropout or a reshape.
bool part_is_other(std::string_view part) {
  for (std::string_view tail : {"Norm", "Norm1d", "Norm2d", "Embedding", "Embeddings"})
    if (part.ends_with(tail)) return true;
  for (std::string_view name : {"ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "Dropout", "Flatten", "Identity"})
    if (part == name) return true;
  return contains(part, "Pool");
}

}  // namespace

Sequential make_cost_only_model(const ModelDescription& m, Device& device, DType dtype) {
  return build(m, device, dtype, std::nullopt);
}

Sequential make_cost_only_model(const ModelDescription& m, Device& device, Precision precision,
                                MemoryFormat memory_format) {
  return build(m, device, precision_parameter_dtype(precision), precision, memory_format);
}

OpClass layer_op_class(const LayerDescription& l) {
  bool matmul = false;
  std::string_view type = l.type;
  while (true) {
    const size_t plus = type.find('+');
    const std::string_view part = type.substr(0, plus);
    if (contains(part, "Conv") || part == "Bottleneck") return OpClass::conv;
    if (!part.empty() && !part_is_other(part)) matmul = true;
    if (plus == std::string_view::npos) break;
    type.remove_prefix(plus + 1);
  }
  return matmul ? OpClass::matmul : OpClass::other;
}

}  // namespace dpt
