#include "scenarios/lib/verify_twin.hpp"

#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simgrid/s4u.hpp>

#include "sim/platform.hpp"
#include "sim/predict.hpp"
#include "sim/sim_backend.hpp"
#include "sim/sim_process.hpp"

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
    std::string error;
    bool finished = false;
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
          simgrid::s4u::Actor::create("verify-driver", p.cpu_host(0), [&] {
            try {
              MeasureHooks hooks;
              hooks.before_parallel_step = [&] { straggling->arm(); };
              hooks.before_single_step = [&](int device) { straggling->delay_caller(device); };
              figures = measure_figures(*straggling, config, parts, hooks);
            } catch (const std::exception& e) {
              error = e.what();
            }
            finished = true;
          });
        },
        [&](sim::Platform&) -> std::string {
          if (!error.empty()) throw std::runtime_error("verify on the twin: " + error);
          if (!finished)
            throw std::runtime_error(fmt::format(
                "verify on the twin: the simulation of '{}' ended before the measurements finished (SimGrid found "
                "its actors deadlocked)",
                hw.name));
          return figures_to_json(figures).dump();
        });
  });
  return figures_from_json(nlohmann::json::parse(text));
}

nlohmann::json result_to_json(const CheckResult& r) {
  return {{"name", r.name},       {"kind", check_kind_name(r.kind)}, {"status", static_cast<int>(r.status)},
          {"figure", r.figure},   {"message", r.message},           {"time_s", r.duration_s}};
}

CheckResult result_from_json(const nlohmann::json& j) {
  CheckResult r;
  r.name = j.at("name");
  r.kind = check_kind_from_name(j.at("kind"));
  r.status = static_cast<CheckStatus>(j.at("status").get<int>());
  r.figure = j.at("figure");
  r.message = j.at("message");
  r.duration_s = j.at("time_s");
  return r;
}

}  // namespace

std::vector<CheckResult> run_correctness_in_twin(const sim::HardwareSpec& hw, const CorrectnessOptions& options,
                                                 const CheckObserver& observer) {
  if (options.devices > hw.gpu_count())
    throw std::invalid_argument(fmt::format("--devices {}: hardware '{}' has {} GPUs", options.devices, hw.name,
                                            hw.gpu_count()));
  std::vector<int> gpus;
  for (int g = 0; g < options.devices; ++g) gpus.push_back(g);
  const std::string text = sim::run_in_child_process([&]() -> std::string {
    std::unique_ptr<SimBackend> backend;
    std::vector<CheckResult> results;
    std::vector<std::string> completed;
    std::string error;
    bool finished = false;
    return sim::run_simulation(
        hw,
        [&](sim::Platform& p) {
          SimBackendOptions o;
          o.numeric = true;  // the host kernels: the twin's numerics are the engine's
          o.workers = SimWorkerModel::process_per_worker;
          backend = std::make_unique<SimBackend>(sim_machine_from_platform(p, gpus), o);
          simgrid::s4u::Actor::create("verify-correctness", p.cpu_host(0), [&] {
            try {
              results = run_checks(correctness_checks(*backend, options), std::nullopt, [&](const CheckResult& r) {
                completed.push_back(r.name);
                if (observer) observer(r);
              });
            } catch (const std::exception& e) {
              error = e.what();
            }
            finished = true;
          });
        },
        [&](sim::Platform&) -> std::string {
          if (!error.empty()) throw std::runtime_error("verify on the twin: " + error);
          if (!finished)
            throw std::runtime_error(fmt::format(
                "verify on the twin: the simulation ended during the check after {} (SimGrid found its actors "
                "deadlocked)",
                completed.empty() ? std::string("none") : completed.back()));
          nlohmann::json j = nlohmann::json::array();
          for (const auto& r : results) j.push_back(result_to_json(r));
          return j.dump();
        });
  });
  std::vector<CheckResult> out;
  for (const auto& j : nlohmann::json::parse(text)) out.push_back(result_from_json(j));
  return out;
}

Figures simulate_figures(const sim::HardwareSpec& hw, const Faults& faults, const MeasureConfig& config,
                         const MeasureParts& parts) {
  if (config.devices > hw.gpu_count())
    throw std::invalid_argument(fmt::format("--devices {}: hardware '{}' has {} GPUs", config.devices, hw.name,
                                            hw.gpu_count()));
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
