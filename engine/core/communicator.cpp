#include "engine/core/communicator.hpp"

#include <fmt/format.h>

namespace dpt {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

CollectiveError::CollectiveError(const std::string& collective, int rank, const std::string& cause)
    : std::runtime_error(fmt::format("{} failed on rank {}: {}", collective, rank, cause)),
      collective_(collective), rank_(rank), cause_(cause) {}

}  // namespace dpt
