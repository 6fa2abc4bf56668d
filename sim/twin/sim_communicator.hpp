// SimCommunicator: the twin's Communicator. Each rank has a communication stream,
// a SimGrid actor that runs the rank's collectives in issue order (as one NCCL
// stream does) and times them with the machine's collective algorithms on the
// modelled links. A collective is issued without blocking the rank's host actor;
// it starts on the stream once the rank's compute stream has produced its data.
// Work::wait() blocks the host actor until the collective ended on that rank.
//
// Numerics (numeric mode): when the last rank has issued a collective, its result
// is computed at once in shared memory (the simulation is one OS thread), in the
// same summation order as the host ring communicator, so the twin's gradients are
// bitwise those of the host backend.
#pragma once
#include <memory>
#include <vector>

#include "engine/core/communicator.hpp"
#include "engine/core/dtype.hpp"

namespace dpt {

class SimBackend;

// The twin's communicators for ranks on `devices` (rank r on devices[r]).
std::vector<std::unique_ptr<Communicator>> make_sim_communicators(SimBackend& backend,
                                                                  const std::vector<int>& devices);

// ---- the host ring's summation orders, as pure functions on each rank's buffer --------
// All reduce `n` elements in place on every rank: chunk c (a balanced floor split in
// N chunks) is folded along the ring starting at rank c; avg divides the sum by N.
void ring_all_reduce_values(DType t, ReduceOp op, Elements n, const std::vector<void*>& buffers);
// Reduces onto buffers[root] (others unchanged), folding from rank root+1 to the root.
void ring_reduce_values(DType t, ReduceOp op, Elements n, int root, const std::vector<void*>& buffers);
// outs[r] (block elements) = reduction of block r of every ins[q] (N x block elements),
// folded from rank r+1 around to rank r.
void ring_reduce_scatter_values(DType t, ReduceOp op, Elements block, const std::vector<const void*>& ins,
                                const std::vector<void*>& outs);

}  // namespace dpt
