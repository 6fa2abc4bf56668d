#include "engine/parallel/dp/gather.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dpt {

Tensor gather_rows(Backend& backend, const std::vector<Tensor>& outputs, Device& device) {
  if (outputs.empty()) throw std::invalid_argument("gather: no outputs");
  Shape shape = outputs[0].shape();
  if (shape.empty()) throw std::invalid_argument("gather: outputs must have a batch dimension (dim 0)");
  std::int64_t rows = 0;
  for (const Tensor& o : outputs) {
    if (o.dtype() != outputs[0].dtype() || o.ndim() != outputs[0].ndim() ||
        !std::equal(o.shape().begin() + 1, o.shape().end(), shape.begin() + 1))
      throw std::invalid_argument(fmt::format("gather: output {} {} does not stack with {} {}", shape_to_string(o.shape()),
                                              dtype_name(o.dtype()), shape_to_string(shape), dtype_name(outputs[0].dtype())));
    rows += o.dim(0);
  }
  shape[0] = rows;
  Tensor out = Tensor::empty(device, shape, outputs[0].dtype(), MemoryCategory::gathered_outputs);
  std::int64_t at = 0;
  for (const Tensor& o : outputs) {
    Tensor dst = out.slice_rows(at, o.dim(0));
    backend.copy(o, dst);
    at += o.dim(0);
  }
  return out;
}

}  // namespace dpt
