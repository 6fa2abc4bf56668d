// NCCL communicators. Single process: one communicator per GPU, created together
// from one thread (the grouped ncclCommInitRankConfig that ncclCommInitAll wraps,
// here non-blocking so creation is bounded), each then driven by its own thread, or
// all from one thread inside nccl_group. Several processes: one communicator per
// process, the ncclUniqueId handed out by rank 0 over TCP (rendezvous.hpp).
//
// Never a hang: the communicators are non-blocking (config.blocking = 0), so no
// NCCL call waits for a peer on the host; Work::wait polls the collective's
// completion event and ncclCommGetAsyncError against the collective's deadline. On
// an error or at the deadline it aborts the group (ncclCommAbort on every
// communicator of the process's group) and throws CollectiveError naming the
// collective, the rank and NCCL's message.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "engine/core/communicator.hpp"
#include "engine/cuda/cuda_device.hpp"
#include "engine/cuda/rendezvous.hpp"

namespace dpt {

// Seconds communicator creation may take before it is aborted and reported.
constexpr Seconds kNcclInitTimeout = 120.0;

// One communicator per device, rank r on devices[r], all in this process. The
// returned communicators are AbortableCommunicators: abort() on one aborts the group.
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<CudaDevice*>& devices,
                                                                   Seconds init_timeout = kNcclInitTimeout);

// This process's communicator in a multi-process group: rendezvous (rank 0 makes the
// NCCL id and serves it on config.master_port), then ncclCommInitRankConfig, the
// whole bounded by `timeout`. The process drives `device`.
std::unique_ptr<Communicator> make_nccl_communicator(CudaDevice& device, const RendezvousConfig& config,
                                                     Seconds timeout = kNcclInitTimeout);

// Runs fn between ncclGroupStart and ncclGroupEnd: required when one thread issues
// a collective on several communicators of the same group (else the first blocks).
void nccl_group(const std::function<void()>& fn);

}  // namespace dpt
