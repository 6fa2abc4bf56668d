// The collectives by name, and one collective call as nccl-tests sizes it: the engine's
// vocabulary, shared by the twin's collective model and its Communicator (a barrier is
// not a CollectiveOp: the twin times it as a one-element all_reduce).
#pragma once
#include <string>
#include <string_view>

#include "engine/core/units.hpp"

namespace dpt {

enum class CollectiveOp { all_reduce, all_gather, reduce_scatter, broadcast, reduce };

const char* collective_op_name(CollectiveOp op);  // "all_reduce", ...
// Parses a name (case-insensitive; "allreduce"/"all-reduce" accepted). Throws
// std::invalid_argument naming the value and the allowed names.
CollectiveOp parse_collective_op(std::string_view name);
// A name as the parsers compare it: lower case, '_' and '-' dropped ("All-Reduce" ->
// "allreduce"), so collective and algorithm names read in any of their spellings.
std::string normalise_collective_name(std::string_view name);

// One collective as nccl-tests sizes it: `count` elements of the whole buffer.
//   all_reduce, broadcast, reduce: the buffer on every rank;
//   all_gather:     the output (N x each rank's input);
//   reduce_scatter: the input  (N x each rank's output).
struct CollectiveCall {
  CollectiveOp op = CollectiveOp::all_reduce;
  Elements count = 0;
  Bytes element_bytes = 4;
  int root = 0;  // broadcast and reduce
  Bytes bytes() const { return count * element_bytes; }
};

}  // namespace dpt
