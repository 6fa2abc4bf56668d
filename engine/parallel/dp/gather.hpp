// DataParallel step 4, Gather: the replicas' outputs concatenated along dim 0 on the
// output device, where the loss is computed. Its backward is Scatter: the gradient
// of the gathered output is split back with the same chunk sizes (scatter_rows).
#pragma once
#include <vector>

#include "engine/core/backend.hpp"

namespace dpt {

// One tensor on `device` (MemoryCategory::gathered_outputs) holding outputs[0],
// outputs[1], ... stacked along dim 0. All outputs share dtype and trailing shape.
Tensor gather_rows(Backend& backend, const std::vector<Tensor>& outputs, Device& device);

}  // namespace dpt
