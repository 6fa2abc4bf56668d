// Rendezvous for multi-process runs: where the ranks find each other, read from
// the launcher's environment (torchrun or Slurm), and a TCP exchange in which rank
// 0 hands every other rank an opaque id (NCCL's 128-byte ncclUniqueId).
//
// Plain C++ and POSIX sockets, no CUDA: built as dptwin_rendezvous with or without
// the CUDA toolkit, so CI tests it on loopback.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/core/units.hpp"

namespace dpt {

struct RendezvousConfig {
  std::string launcher;     // "torchrun" or "slurm": which variables were read
  std::string master_addr;  // host name or address of rank 0
  int master_port = 0;      // TCP port rank 0 listens on
  int rank = 0;             // this process's rank in [0, world_size)
  int world_size = 1;
  int local_rank = 0;       // rank within this node: the GPU this process drives
};

// Looks an environment variable up; std::nullopt when unset. Tests pass a map.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// torchrun's port default (its --master-port default), used when Slurm gives no MASTER_PORT.
constexpr int kDefaultMasterPort = 29500;

// Reads torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)
// when RANK is set, else Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and the
// first host of SLURM_JOB_NODELIST unless MASTER_ADDR is set; MASTER_PORT or 29500).
// Throws std::invalid_argument naming the variable and its value when one is
// missing, not an integer, or out of range (rank >= world size, port outside 1..65535).
RendezvousConfig rendezvous_from_env(const EnvLookup& env);

// The first host of a Slurm host list: "gpu[03-07,9],login1" -> "gpu03",
// "rack[1-2]-n[01-04]" -> "rack1-n01", "a,b" -> "a". Zero padding is kept.
// Throws std::invalid_argument on an unbalanced bracket or an empty list.
std::string slurm_first_host(const std::string& nodelist);

// A failure of the exchange itself (connection refused until the deadline,
// a peer that never arrived, a malformed message). what() says which rank
// waited for what and for how long.
class RendezvousError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Rank 0 listens on master_port, accepts world_size - 1 connections, checks each
// peer's rank and world size, and sends it `id`; it returns `id`. Every other rank
// connects to master_addr:master_port (retrying while rank 0 is not yet listening),
// announces itself and returns the id it receives. Throws RendezvousError when the
// whole exchange does not finish within `timeout`.
std::vector<std::uint8_t> rendezvous_exchange(const RendezvousConfig& config, const std::vector<std::uint8_t>& id,
                                              Seconds timeout);

}  // namespace dpt
