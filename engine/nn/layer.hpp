// Layer: one module of a Sequential model, with forward and backward.
// Numeric layers (Linear, ReLU, GELU, LayerNorm) compute; cost-only layers (from
// the model library) emit the same kernel calls with costs and no data. The
// strategies cannot tell them apart.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/core/tensor.hpp"

namespace dpt {

// A trainable tensor and its gradient, on the layer's device. `name` is local to
// the layer ("weight", "bias"); Sequential prefixes the layer index ("0.weight").
struct Parameter {
  std::string name;
  Tensor value;
  Tensor grad;  // same shape, dtype and device as value; accumulated by backward
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string type_name() const = 0;  // PyTorch's class name: "Linear", "ReLU", ...
  virtual std::vector<Parameter*> parameters() = 0;
  // Computes the output and saves what backward needs.
  virtual Tensor forward(const Tensor& x) = 0;
  // Accumulates (+=) parameter gradients and returns dL/dx (undefined when !need_input_grad).
  virtual Tensor backward(const Tensor& dy, bool need_input_grad) = 0;
  // The same layer on `device`, parameters and gradients allocated there but not
  // copied (DataParallel's replicate fills them by broadcast).
  virtual std::unique_ptr<Layer> replicate_on(Device& device) const = 0;
  // Frees saved activations.
  virtual void clear_saved() = 0;
  // Output shape for an input shape (used by shape-only planning and checks).
  virtual Shape output_shape(const Shape& input) const = 0;
};

}  // namespace dpt
