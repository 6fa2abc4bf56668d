// NCCL communicators. Single process: one communicator per GPU from
// ncclCommInitAll, each driven by its own thread (or all from one thread inside
// nccl_group). Several processes: one communicator per process, the ncclUniqueId
// handed out by rank 0 over TCP (rendezvous.hpp).
//
// Never a hang: Work::wait polls the collective's completion event and
// ncclCommGetAsyncError against the collective's deadline; on an error or at the
// deadline it aborts the communicator (ncclCommAbort) and throws CollectiveError
// naming the collective, the rank and NCCL's message.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "../communicator.hpp"
#include "cuda_device.hpp"
#include "rendezvous.hpp"

namespace dpt {

// One communicator per device, rank r on devices[r], all in this process.
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<CudaDevice*>& devices);

// This process's communicator in a multi-process group: rendezvous (rank 0 makes the
// NCCL id and serves it on config.master_port), then a non-blocking
// ncclCommInitRankConfig bounded by `timeout`. The process drives `device`.
std::unique_ptr<Communicator> make_nccl_communicator(CudaDevice& device, const RendezvousConfig& config,
                                                     Seconds timeout);

// Runs fn between ncclGroupStart and ncclGroupEnd: required when one thread issues
// a collective on several communicators of the same group (else the first blocks).
void nccl_group(const std::function<void()>& fn);

}  // namespace dpt
