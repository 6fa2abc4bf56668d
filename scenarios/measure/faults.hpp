// Fault injection in the twin, so `dptwin verify` can be tested without a GPU: a
// "degraded" hardware file is an ordinary hardware file (read by the twin's own
// loader, sim/hardware.hpp) plus a `faults:` list:
//
//   faults:
//     - {link: [1, 2], bandwidth_factor: 0.4}        # GPUs 1 and 2: their NVLink link, both ways (a pair without one is refused)
//     - {link: n0.gpu3.pcie, bandwidth_factor: 0.25} # one platform link by name (sim/platform.hpp names)
//     - {gpu: 3, flops_factor: 0.5}                  # GPU 3 computes at half its rate
//     - {gpu: 2, straggle: 2 ms}                     # GPU 2's worker starts every step 2 ms late
//
// GPU indices are global (node k's GPU g is k * gpus_per_node + g). Factors lie in
// (0, 1]. A straggler's delay is paid once per training step: before each
// single-device step on that GPU, and at the start of that GPU's worker in the first
// parallel section of each DataParallel or DDP step.
//
// The hardware spec stays homogeneous (one GPU model, one link rate per kind), so the
// faults are applied where the twin is concrete: link bandwidths on the built SimGrid
// platform, per-GPU rates in the SimMachine, and the delay in the workers.
#pragma once
#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "engine/core/backend.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_backend.hpp"

namespace dpt::verify {

struct LinkFault {
  std::optional<std::pair<int, int>> gpus;  // global GPU indices: the links on their route
  std::optional<std::string> link;          // or one platform link by name
  double bandwidth_factor = 1.0;            // the link runs at this fraction of its rate
  std::string where;                        // "FILE:LINE" of the entry
};

struct GpuFault {
  int gpu = 0;
  double flops_factor = 1.0;                // fraction of the GPU's compute rate left
  std::string where;
};

struct StragglerFault {
  int gpu = 0;
  Seconds delay_s = 0;                      // extra delay per step
  std::string where;
};

struct Faults {
  std::vector<LinkFault> links;
  std::vector<GpuFault> slow_gpus;
  std::vector<StragglerFault> stragglers;
  bool empty() const { return links.empty() && slow_gpus.empty() && stragglers.empty(); }
  // One line per fault: "peer link gpu1<->gpu2 at 40 %", "gpu3 at 50 % of its compute rate", ...
  std::vector<std::string> describe() const;
};

struct DegradedHardware {
  sim::HardwareSpec spec;
  Faults faults;
};

// Reads a hardware file (a library name or a path) with an optional `faults:` list.
// The spec is parsed by sim::parse_hardware_yaml with the faults block blanked out
// (line numbers kept, so its errors still point at the right line); the faults are
// validated here: unknown keys, factors outside (0, 1], a negative delay, GPU
// indices outside the machine, unknown link names are std::invalid_argument naming
// FILE:LINE and the key.
DegradedHardware load_degraded_hardware(const std::string& name_or_path, const std::filesystem::path& library_dir);
DegradedHardware parse_degraded_hardware(const std::string& text, const std::string& file_label);

// Scales the bandwidth of every link a fault names (both directions of a pair's
// route). Call after Platform::build and before the simulation runs. Throws
// std::invalid_argument for a link name the platform does not have.
void apply_link_faults(sim::Platform& platform, const Faults& faults);

// Scales the compute rate of slowed GPUs; machine.gpus[r] is global GPU gpus[r].
void apply_gpu_faults(SimMachine& machine, const std::vector<int>& gpus, const Faults& faults);

// Delay per step of each of the run's devices (rank r on global GPU gpus[r]).
std::vector<Seconds> straggler_delays(const std::vector<int>& gpus, const Faults& faults);

// A Backend that forwards everything to a SimBackend, except that after arm() the
// next parallel_for starts each straggling device's worker late by its delay (in
// simulated time, on that worker's own clock).
class StragglingBackend : public Backend {
 public:
  StragglingBackend(SimBackend& inner, std::vector<Seconds> delays) : inner_(inner), delays_(std::move(delays)) {}
  void arm() { armed_ = std::any_of(delays_.begin(), delays_.end(), [](Seconds d) { return d > 0; }); }
  // The calling actor (a single-device step's driver) pays device `d`'s delay now.
  void delay_caller(int device);

  std::string name() const override { return inner_.name(); }
  int device_count() const override { return inner_.device_count(); }
  Device& device(int index) override { return inner_.device(index); }
  Device& host_memory() override { return inner_.host_memory(); }
  void copy(const Tensor& src, Tensor& dst) override { inner_.copy(src, dst); }
  void parallel_for(int n, const std::function<void(int)>& fn) override;
  std::vector<std::unique_ptr<Communicator>> make_communicators(const std::vector<int>& devices) override {
    return inner_.make_communicators(devices);
  }
  std::unique_ptr<BackendMutex> make_mutex() override { return inner_.make_mutex(); }
  Seconds now() override { return inner_.now(); }
  void host_dispatch(int ops) override { inner_.host_dispatch(ops); }

 private:
  SimBackend& inner_;
  std::vector<Seconds> delays_;
  bool armed_ = false;
};

}  // namespace dpt::verify
