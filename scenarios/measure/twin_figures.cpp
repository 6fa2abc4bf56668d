// simulate_figures: verify's measurement code run on the twin (see twin_figures.hpp).
#include "scenarios/measure/twin_figures.hpp"

#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simgrid/s4u.hpp>

#include "sim/net/platform.hpp"
#include "sim/twin/driver_actor.hpp"
#include "sim/twin/predict.hpp"
#include "sim/twin/sim_backend.hpp"
#include "sim/twin/sim_process.hpp"

namespace dpt::verify {
namespace {

// One simulation: the parts of the figures measured on a SimBackend with `workers`.
Figures simulate_part(const sim::HardwareSpec& hw, const Faults& faults, const MeasureConfig& config,
                      const MeasureParts& parts, SimWorkerModel workers) {
  std::vector<int> gpus;
  for (int g = 0; g < config.devices; ++g) gpus.push_back(g);
  const std::string text = sim::run_in_child_process([&]() -> std::string {
    std::unique_ptr<SimBackend> backend;
    std::unique_ptr<StragglingBackend> straggling;
    Figures figures;
    sim::DriverOutcome driver;
    return sim::run_simulation(
        hw,
        [&](sim::Platform& p) {
          apply_link_faults(p, faults);
          SimMachine machine = sim_machine_from_platform(p, gpus);
          apply_gpu_faults(machine, gpus, faults);
          SimBackendOptions o;
          o.numeric = false;  // shape-only: the figures are times, not values
          o.compute_dtype = DType::f32;
          o.workers = workers;
          backend = std::make_unique<SimBackend>(std::move(machine), o);
          straggling = std::make_unique<StragglingBackend>(*backend, straggler_delays(gpus, faults));
          sim::start_driver(
              p.cpu_host(0), "verify-driver",
              [&] {
                MeasureHooks hooks;
                hooks.before_parallel_step = [&] { straggling->arm(); };
                hooks.before_single_step = [&](int device) { straggling->delay_caller(device); };
                figures = measure_figures(*straggling, config, parts, hooks);
              },
              driver);
        },
        [&](sim::Platform&) -> std::string {
          driver.check("verify on the twin",
                       fmt::format("the simulation of '{}' ended before the measurements finished (SimGrid found "
                                   "its actors deadlocked)",
                                   hw.name));
          return figures_to_json(figures).dump();
        });
  });
  return figures_from_json(nlohmann::json::parse(text));
}

}  // namespace

Figures simulate_figures(const sim::HardwareSpec& hw, const Faults& faults, const MeasureConfig& config,
                         const MeasureParts& parts) {
  if (config.devices > hw.gpu_count())
    throw std::invalid_argument(fmt::format("--devices {}: hardware '{}' has {} GPU{}", config.devices, hw.name,
                                            hw.gpu_count(), hw.gpu_count() == 1 ? "" : "s"));
  MeasureParts main_parts = parts;
  main_parts.dp = false;
  Figures f;
  if (main_parts.compute || main_parts.peers || main_parts.collectives || main_parts.single || main_parts.ddp)
    f = simulate_part(hw, faults, config, main_parts, SimWorkerModel::process_per_worker);
  if (parts.dp && config.devices >= 2) {
    MeasureParts dp_only{false, false, false, false, true, false};
    const Figures d = simulate_part(hw, faults, config, dp_only, SimWorkerModel::threads_of_one_process);
    f.dp_step_s = d.dp_step_s;
    if (f.device_names.empty()) f.device_names = d.device_names;
  }
  return f;
}

}  // namespace dpt::verify
