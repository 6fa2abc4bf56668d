#include "engine/parallel/dp/scatter.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "engine/parallel/split.hpp"

namespace dpt {

std::vector<Tensor> scatter_rows(Backend& backend, const Tensor& x, const std::vector<std::int64_t>& sizes,
                                 const std::vector<int>& devices, MemoryCategory category) {
  if (sizes.size() > devices.size())
    throw std::invalid_argument(fmt::format("scatter: {} chunks for {} devices", sizes.size(), devices.size()));
  if (x.ndim() < 1)
    throw std::invalid_argument("scatter: the input must have a batch dimension (dim 0)");
  const std::vector<std::int64_t> offsets = chunk_offsets(sizes);
  if (!sizes.empty() && offsets.back() + sizes.back() != x.dim(0))
    throw std::invalid_argument(fmt::format("scatter: chunks cover {} rows, the input has {}",
                                            offsets.back() + sizes.back(), x.dim(0)));
  std::vector<Tensor> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Tensor rows = x.slice_rows(offsets[i], sizes[i]);
    Device& dst = backend.device(devices[i]);
    out.push_back(&x.device() == &dst ? rows : copy_to(backend, rows, dst, category));
  }
  return out;
}

}  // namespace dpt
