#include "scenarios/verify/verify_twin.hpp"

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
    throw std::invalid_argument(fmt::format("--devices {}: hardware '{}' has {} GPU{}", options.devices, hw.name,
                                            hw.gpu_count(), hw.gpu_count() == 1 ? "" : "s"));
  std::vector<int> gpus;
  for (int g = 0; g < options.devices; ++g) gpus.push_back(g);
  const std::string text = sim::run_in_child_process([&]() -> std::string {
    std::unique_ptr<SimBackend> backend;
    std::vector<CheckResult> results;
    std::vector<std::string> completed;
    sim::DriverOutcome driver;
    return sim::run_simulation(
        hw,
        [&](sim::Platform& p) {
          SimBackendOptions o;
          o.numeric = true;  // the host kernels: the twin's numerics are the engine's
          o.workers = SimWorkerModel::process_per_worker;
          backend = std::make_unique<SimBackend>(sim_machine_from_platform(p, gpus), o);
          sim::start_driver(
              p.cpu_host(0), "verify-correctness",
              [&] {
                results = run_checks(correctness_checks(*backend, options), std::nullopt, [&](const CheckResult& r) {
                  completed.push_back(r.name);
                  if (observer) observer(r);
                });
              },
              driver);
        },
        [&](sim::Platform&) -> std::string {
          driver.check("verify on the twin",
                       fmt::format("the simulation ended during the check after {} (SimGrid found its actors "
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

}  // namespace dpt::verify
