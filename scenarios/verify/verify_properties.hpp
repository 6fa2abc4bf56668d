// The correctness part of `dptwin verify`: the mission's properties as RapidCheck
// properties run on the machine under test (host threads, CUDA GPUs and NCCL, or
// the twin), each a Check whose failure carries the shrunk counterexample and the
// seed that reproduces it.
//
//  correctness.split.torch_chunk          DataParallel's scatter sizes (torch.chunk)
//  correctness.split.distributed_sampler  DistributedSampler's per-rank indices
//  correctness.collectives.exact          all_reduce / all_gather / reduce_scatter /
//                                         broadcast on integer-valued f32: exact
//  correctness.dp.gradient_equivalence    DataParallel == one device (full batch)
//  correctness.ddp.gradient_equivalence   DDP == one device (even split; weighted mode
//                                         for uneven splits)
//  correctness.checkpoint.module_prefix   `module.` state dicts: strict load into an
//                                         unwrapped model fails, prefix-stripped succeeds
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/backend.hpp"
#include "engine/core/fault_injection.hpp"
#include "scenarios/verify/verify_check.hpp"

namespace dpt::verify {

// A deliberately broken variant, as a self-test of verify: with one planted, the
// correctness part must fail with a counterexample (`dptwin verify --inject-bug`).
// These are the planted faults of engine/core/fault_injection.hpp that the
// correctness part catches; the property that should catch one switches it on while
// it runs.
enum class PlantedBug {
  none,
  drop_chunk,   // DataParallel's scatter drops the last chunk (it is never computed)
  skip_divide,  // DDP's reducer sums gradients without dividing by the world size
  ring_step,    // the host ring all-reduce skips its last all-gather step (host backend only)
};
PlantedBug planted_bug_from_name(const std::string& name);  // "none" | "drop-chunk" | "skip-divide" | "ring-step"
const char* planted_bug_name(PlantedBug b);
Fault planted_fault(PlantedBug b);  // b != none

struct CorrectnessOptions {
  int devices = 1;          // the most devices a property uses (cases draw 1..devices)
  int cases = 100;          // RapidCheck cases per property
  std::uint64_t seed = 0;   // RapidCheck seed
  PlantedBug bug = PlantedBug::none;
  std::string reproduce;    // the command line that reruns verify with this seed
  std::string scratch_dir;  // where checkpoint files are written and removed
};

// The checks, bound to `backend` (which must outlive them).
std::vector<Check> correctness_checks(Backend& backend, const CorrectnessOptions& options);

}  // namespace dpt::verify
