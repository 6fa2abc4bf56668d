// DataParallel step 1, Scatter (torch/nn/parallel/scatter_gather.py): the batch is
// split with torch.chunk along dim 0 and chunk i goes to devices[i]. Fewer chunks
// than devices when the batch is small; only those devices get work.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/core/backend.hpp"

namespace dpt {

// Rows [offset_i, offset_i + sizes[i]) of x on devices[i], for each chunk i
// (sizes.size() <= devices.size()). A chunk whose device already holds x is a view,
// as torch's scatter does not copy to the source device; others are copies in
// `category` memory.
std::vector<Tensor> scatter_rows(Backend& backend, const Tensor& x, const std::vector<std::int64_t>& sizes,
                                 const std::vector<int>& devices, MemoryCategory category);

}  // namespace dpt
