#include "engine/parallel/ddp/bucket_assignment.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace dpt {

std::vector<Bucket> compute_bucket_assignment_by_size(const std::vector<BucketTensor>& tensors,
                                                      const std::vector<Bytes>& limits, bool sort_by_min_index) {
  if (limits.empty()) throw std::invalid_argument("compute_bucket_assignment_by_size: no bucket size limits");
  for (Bytes l : limits)
    if (l <= 0) throw std::invalid_argument(fmt::format("compute_bucket_assignment_by_size: bucket limit {} bytes is not positive", l));
  struct Open {
    Bucket bucket;
    size_t limit_index = 0;
    size_t min_position = 0;
  };
  std::vector<std::pair<size_t, Bucket>> closed;  // (smallest position in `tensors`, bucket)
  std::map<DType, Open> open;
  for (size_t pos = 0; pos < tensors.size(); ++pos) {
    const BucketTensor& t = tensors[pos];
    Open& o = open[t.dtype];
    if (o.bucket.indices.empty()) o.min_position = pos;
    o.bucket.indices.push_back(t.index);
    o.bucket.size_bytes += t.size_bytes;
    o.bucket.limit_bytes = limits[o.limit_index];
    if (o.bucket.size_bytes >= o.bucket.limit_bytes) {
      closed.emplace_back(o.min_position, std::move(o.bucket));
      o.bucket = Bucket{};
      if (o.limit_index + 1 < limits.size()) ++o.limit_index;
    }
  }
  for (auto& [dtype, o] : open)
    if (!o.bucket.indices.empty()) closed.emplace_back(o.min_position, std::move(o.bucket));
  if (sort_by_min_index)
    std::stable_sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Bucket> out;
  for (auto& c : closed) out.push_back(std::move(c.second));
  return out;
}

Bytes ddp_bucket_cap_bytes(double bucket_cap_mb) {
  if (!(bucket_cap_mb > 0))
    throw std::invalid_argument(fmt::format("bucket_cap_mb must be positive, got {}", bucket_cap_mb));
  return static_cast<Bytes>(bucket_cap_mb * 1024.0 * 1024.0);
}

}  // namespace dpt
