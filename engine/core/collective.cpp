// Collective names (see collective.hpp).
#include "engine/core/collective.hpp"

#include <cctype>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace dpt {

const char* collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce: return "all_reduce";
    case CollectiveOp::all_gather: return "all_gather";
    case CollectiveOp::reduce_scatter: return "reduce_scatter";
    case CollectiveOp::broadcast: return "broadcast";
    case CollectiveOp::reduce: return "reduce";
  }
  return "?";
}

std::string normalise_collective_name(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

CollectiveOp parse_collective_op(std::string_view name) {
  const std::string n = normalise_collective_name(name);
  for (auto op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
                  CollectiveOp::broadcast, CollectiveOp::reduce})
    if (n == normalise_collective_name(collective_op_name(op))) return op;
  throw std::invalid_argument(fmt::format(
      "unknown collective '{}' (allowed: all_reduce, all_gather, reduce_scatter, broadcast, reduce)", name));
}

}  // namespace dpt
