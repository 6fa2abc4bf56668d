// dptwin verify: proves the data-parallel path correct on a machine and checks that
// the machine performs as its hardware file says (see scenarios/verify/ and scenarios/measure/).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/cli/library_dir.hpp"
#include "scenarios/cli/flag_limits.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/host/host_gemm.hpp"
#include "scenarios/measure/calibrate.hpp"
#include "scenarios/verify/verify_check.hpp"
#include "scenarios/measure/faults.hpp"
#include "scenarios/measure/measure.hpp"
#include "scenarios/measure/real_backend.hpp"
#include "scenarios/verify/verify_performance.hpp"
#include "scenarios/verify/verify_properties.hpp"
#include "scenarios/verify/verify_report.hpp"
#include "scenarios/verify/verify_twin.hpp"
#include "sim/twin/step_report.hpp"

namespace dpt::cli::cmd_verify {  // a namespace per command: unity batches join anonymous ones
namespace {

using namespace dpt::verify;

struct VerifyFlags {
  std::string backend = "host";
  std::optional<int> devices;
  std::string hardware;
  int cases = 100;
  std::optional<std::int64_t> seed;   // not negative
  std::string only;
  bool json = false;
  std::string junit;
  std::string calibrate_out;
  std::string as_measured;
  std::string inject_bug = "none";
  bool require_device = false;  // exit 3 instead of skipping when the backend has no device
};

const std::filesystem::path kHardwareLibrary = scenarios_dir() / "hardware";

void print_result(const CheckResult& r) {
  std::cout << console_line(r) << "\n";
  if (r.status != CheckStatus::passed && !r.message.empty()) {
    std::string m = r.message;
    size_t pos = 0;
    while (pos < m.size()) {
      const size_t nl = m.find('\n', pos);
      std::cout << "      " << m.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos) << "\n";
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
  }
  std::cout << std::flush;
}

// Host "devices" are threads on the machine's cores: with other processes keeping
// the cores busy (a CI runner's parallel jobs), their timings measure the scheduler,
// not dptwin. Above 1.5 runnable processes per core (1-minute load average) the
// host's figures are reported but not judged.
std::optional<std::string> host_too_busy() {
  double load[1] = {0};
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (getloadavg(load, 1) != 1) return std::nullopt;
  if (load[0] / cores <= 1.5) return std::nullopt;
  return fmt::format("host busy (load average {:.1f} on {} cores): reported, not judged; rerun on a quiet machine",
                     load[0], cores);
}

void append(std::vector<CheckResult>& to, std::vector<CheckResult> from) {
  for (auto& r : from) to.push_back(std::move(r));
}

// Prints the run (JSON or console), writes the JUnit file, and gives the exit code.
int finish(const VerifyFlags& f, const VerifyRun& run) {
  if (f.json) print_json(verify_run_to_json(run));
  else std::cout << console_summary(run) << "\n";
  if (!f.junit.empty()) write_junit_xml(run, f.junit);
  return run.passed() ? kExitOk : kExitFailure;
}

// The machine has no device for the backend (a CI runner without a GPU): every
// requested part is reported as skipped with the reason, JUnit included, and the
// run exits 0, as the gpu-labelled ctests skip. With --require-device (a node being
// validated, where a missing device is the finding) each part is an error, in JUnit
// too, and the run exits 3.
int skip_unavailable(const VerifyFlags& f, bool correctness, bool performance, const std::string& why) {
  VerifyRun run;
  run.backend = f.backend;
  run.devices = 0;
  run.hardware = f.hardware;
  run.seed = f.seed ? static_cast<std::uint64_t>(*f.seed) : 0;
  run.cases = f.cases;
  run.timestamp = utc_timestamp_now();
  run.hostname = local_hostname();
  for (const auto& [part, wanted] : {std::pair{"correctness", correctness}, std::pair{"performance", performance}}) {
    if (!wanted) continue;
    CheckResult r;
    r.name = std::string(part);
    r.kind = check_kind_from_name(part);
    r.status = f.require_device ? CheckStatus::error : CheckStatus::skipped;
    r.message = fmt::format("backend {} unavailable: {}", f.backend, why);
    if (!f.json) print_result(r);
    run.results.push_back(r);
  }
  const int code = finish(f, run);
  // A node runbook's next step reads the calibrated file: say that it was not written.
  if (!f.calibrate_out.empty() && performance)
    std::cerr << "dptwin verify: warning: --calibrate-out " << f.calibrate_out << " not written: backend " << f.backend
              << " unavailable (" << why << ")\n";
  if (f.require_device) {
    std::cerr << "dptwin verify: --require-device: backend " << f.backend << " unavailable: " << why << "\n";
    return kExitRuntimeError;
  }
  return code;
}

// The flags' own checks, before anything is loaded or run; the planted bug they name.
PlantedBug validated_bug(const VerifyFlags& f) {
  if (f.backend == "sim" && f.hardware.empty())
    throw std::invalid_argument("--backend sim needs --hardware FILE (the twin's nominal machine)");
  if (!f.as_measured.empty() && f.backend != "sim")
    throw std::invalid_argument("--as-measured is for --backend sim (a degraded twin as the machine under test)");
  if (f.cases < 1) throw std::invalid_argument(fmt::format("--cases {}: must be at least 1", f.cases));
  const PlantedBug bug = planted_bug_from_name(f.inject_bug);
  // A self-test must be able to fail: ring-step lives in the host backend's ring, so
  // on the twin or on NCCL it would plant nothing and pass.
  if (bug == PlantedBug::ring_step && f.backend != "host")
    throw std::invalid_argument(fmt::format("--inject-bug ring-step: the bug is planted in the host backend's ring "
                                            "all-reduce; --backend {} runs other collectives, so the self-test would "
                                            "prove nothing (use --backend host, or drop-chunk or skip-divide)",
                                            f.backend));
  if (bug != PlantedBug::none && f.only == "performance")
    throw std::invalid_argument(fmt::format("--inject-bug {} --only performance: the bug is planted in the collectives "
                                            "the correctness properties run; the performance checks never see it, so "
                                            "the self-test would pass and prove nothing (drop --only, or use --only "
                                            "correctness)",
                                            f.inject_bug));
  if (f.seed && *f.seed < 0) throw std::invalid_argument(fmt::format("--seed {}: must not be negative", *f.seed));
  if (f.devices && *f.devices < 1)
    throw std::invalid_argument(fmt::format("--devices must be at least 1, got {}", *f.devices));
  if (f.backend == "host" && f.devices)
    limits::require_int_in("--devices", *f.devices, 1, limits::kMaxHostDevices, "host devices are worker threads");
  return bug;
}

// The performance part: the figures measured (or simulated on the machine under test)
// and predicted, judged against each other, and the calibrated file when asked for.
// `real` is null on the twin.
void run_performance_part(const VerifyFlags& f, VerifyRun& run, Backend* real,
                          const std::optional<DegradedHardware>& nominal,
                          const std::optional<DegradedHardware>& as_measured, int devices,
                          const CheckObserver& observer) {
  const MeasureConfig config = default_measure_config(f.backend, devices);
  Figures measured, predicted;
  std::optional<sim::HardwareSpec> prediction_spec;
  bool calibrated_from_measurement = false;
  const Check measure{"performance.measure", CheckKind::performance, [&] {
    if (f.backend == "sim") {
      const DegradedHardware& mut = as_measured ? *as_measured : *nominal;
      measured = simulate_figures(mut.spec, mut.faults, config);
      prediction_spec = nominal->spec;
    } else {
      measured = measure_figures(*real, config);
      if (nominal) {
        prediction_spec = nominal->spec;
      } else if (f.backend == "host") {
        prediction_spec = host_spec_from_figures(measured, devices, "host CPU");
        calibrated_from_measurement = true;
      } else {
        return CheckOutcome::skip("no --hardware FILE: nothing to predict the GPUs with");
      }
    }
    predicted = simulate_figures(*prediction_spec, Faults{}, config);
    return CheckOutcome::pass(fmt::format("measured and predicted {} devices ({})", devices,
                                          as_measured ? "measured: " + as_measured->spec.source_file
                                                      : std::string("prediction: ") + prediction_spec->name));
  }};
  std::vector<CheckResult> m = run_checks({measure}, std::nullopt, observer);
  const bool ok = m.front().status == CheckStatus::passed;
  append(run.results, std::move(m));
  if (ok) {
    PerformanceContext ctx;
    ctx.backend = f.backend;
    ctx.hardware = prediction_spec->name;
    ctx.micro_calibrated_from_measurement = calibrated_from_measurement;
    if (f.backend == "host") ctx.not_judged_because = host_too_busy();
    append(run.results, run_checks(performance_checks(measured, predicted, default_tolerances(f.backend), ctx),
                                   std::nullopt, observer));
    if (!f.calibrate_out.empty()) {
      const std::string device = measured.device_names.empty() ? f.backend : measured.device_names.front();
      const CalibrationResult cal =
          calibrate_from_figures(*prediction_spec, measured, predicted, device, run.timestamp);
      write_file_atomic(f.calibrate_out, cal.yaml, {.create_parent_dirs = true});
      if (!f.json) std::cout << "calibrated hardware file written to " << f.calibrate_out << "\n";
    }
  }
}

int run_verify(const VerifyFlags& f) {
  // Output paths are refused before the run, not after it (a name too long, a file in the way).
  limits::require_output_file("--junit", f.junit);
  limits::require_output_file("--calibrate-out", f.calibrate_out);
  limits::refuse_shared_files({{"--junit", f.junit}, {"--calibrate-out", f.calibrate_out}},
                              {{"--hardware file", f.hardware}, {"--as-measured file", f.as_measured}});
  const PlantedBug bug = validated_bug(f);
  // --only: one kind of check; empty runs both. (Plain booleans, not an optional: g++ 12 at
  // -O1 warns that the optional's value may be read uninitialized, a false positive.)
  const bool run_all = f.only.empty();
  const CheckKind only = run_all ? CheckKind::correctness : check_kind_from_name(f.only);
  const bool run_correctness = run_all || only == CheckKind::correctness;
  const bool run_performance = run_all || only == CheckKind::performance;

  std::optional<DegradedHardware> nominal;
  if (!f.hardware.empty()) nominal = load_degraded_hardware(f.hardware, kHardwareLibrary);
  std::optional<DegradedHardware> as_measured;
  if (!f.as_measured.empty()) as_measured = load_degraded_hardware(f.as_measured, kHardwareLibrary);

  if (const auto why = real_backend_unavailable(f.backend)) return skip_unavailable(f, run_correctness,
                                                                                   run_performance, *why);
  std::unique_ptr<Backend> real;
  if (f.backend != "sim") {
    RealBackendOptions o;
    // verify's host default is 2 workers, so the multi-device properties have two ranks.
    o.devices = f.backend == "host" ? std::optional<int>(f.devices.value_or(2)) : f.devices;
    real = make_real_backend(f.backend, o);
  }
  const int devices = real ? real->device_count() : f.devices.value_or(nominal->spec.gpu_count());
  if (devices < 1) throw std::invalid_argument(fmt::format("--devices {}: must be at least 1", devices));
  if (!real && devices > nominal->spec.gpu_count())  // refused before the header is printed
    throw std::invalid_argument(fmt::format("--devices {}: hardware '{}' has {} GPU{}", devices, nominal->spec.name,
                                            nominal->spec.gpu_count(), nominal->spec.gpu_count() == 1 ? "" : "s"));

  VerifyRun run;
  run.backend = f.backend;
  run.devices = devices;
  run.hardware = nominal ? nominal->spec.source_file : (f.backend == "host" ? "host calibration" : "");
  run.seed = f.seed ? static_cast<std::uint64_t>(*f.seed) : std::random_device{}() % 1000000;
  run.cases = f.cases;
  run.timestamp = utc_timestamp_now();
  run.hostname = local_hostname();
  const CheckObserver observer = f.json ? CheckObserver{} : CheckObserver(print_result);
  if (!f.json)
    std::cout << fmt::format("dptwin verify: backend {}, {} device(s), seed {}, {} cases per property{}\n",
                             run.backend, devices, run.seed, run.cases,
                             nominal ? ", hardware " + nominal->spec.name : "");
  if (!f.json && f.backend != "cuda")  // the host backend and the twin's numerics run the host kernels
    std::cout << "host GEMM: " << host_gemm_info().summary() << "\n";
  // The sim backend without --as-measured measures the twin of the very file it predicts
  // with: its performance checks can only agree (an outside-user review read "95 passed" as
  // a node's verdict). Say so before the checks, and in the JSON.
  if (f.backend == "sim" && f.as_measured.empty() && run_performance) {
    run.note = "backend sim without --as-measured: the 'measured' figures are the twin's own, simulated from the same "
               "hardware file, so the performance checks test the harness, not a machine; --as-measured FILE (a "
               "hardware file with faults:) stands in for a degraded node";
    if (!f.json) std::cout << "note: " << run.note << "\n";
  }

  if (run_correctness) {
    CorrectnessOptions co;
    co.devices = devices;
    co.cases = f.cases;
    co.seed = run.seed;
    co.bug = bug;
    co.scratch_dir = std::filesystem::temp_directory_path().string();
    co.reproduce = fmt::format("dptwin verify --backend {} --devices {}{} --only correctness --seed {} --cases {}{}",
                               f.backend, devices, f.hardware.empty() ? "" : " --hardware " + f.hardware, run.seed,
                               f.cases, bug == PlantedBug::none ? "" : std::string(" --inject-bug ") + f.inject_bug);
    if (real) append(run.results, run_checks(correctness_checks(*real, co), std::nullopt, observer));
    else append(run.results, run_correctness_in_twin(nominal->spec, co, observer));
  }

  if (run_performance) run_performance_part(f, run, real.get(), nominal, as_measured, devices, observer);

  return finish(f, run);
}

Registration reg{"verify", [](CLI::App& parent) -> RunFn {
  auto flags = std::make_shared<VerifyFlags>();
  CLI::App* app = parent.add_subcommand(
      "verify",
      "Prove the data-parallel path correct on this machine (RapidCheck properties: DataParallel and DDP "
      "gradients equal one device's, torch.chunk and DistributedSampler splits, exact collectives, the "
      "`module.` checkpoint round trip) and check that it performs as its hardware file says (GEMM, memory, "
      "peer copies, collective busbw, DataParallel and DDP steps, each against the twin's prediction).");
  app->add_option("--backend", flags->backend, "Machine under test: host | sim | cuda")
      ->check(CLI::IsMember({"host", "sim", "cuda"}))
      ->capture_default_str();
  app->add_option("--devices", flags->devices,
                  "Devices to use (default: host 2; cuda all visible GPUs; sim every GPU of the hardware file)");
  app->add_option("--hardware", flags->hardware,
                  "Hardware file (a name of `dptwin hardware list` or a path) the twin predicts with; required for sim and for the "
                  "performance part on cuda; on host, default: a host twin calibrated from microbenchmarks");
  app->add_option("--cases", flags->cases, "RapidCheck cases per correctness property")->capture_default_str();
  app->add_option("--seed", flags->seed, "RapidCheck seed (default: random, printed; a failure prints it)");
  app->add_option("--only", flags->only, "Run only one part: correctness | performance")
      ->check(CLI::IsMember({"correctness", "performance"}));
  app->add_flag("--json", flags->json, "Print the report as JSON (schema dptwin.verify/1) instead of text");
  app->add_option("--junit", flags->junit, "Also write a JUnit XML report to FILE (written atomically)");
  app->add_option("--calibrate-out", flags->calibrate_out,
                  "Write the measured figures as a hardware file (measured fields marked with date and device)");
  app->add_option("--as-measured", flags->as_measured,
                  "sim only: a degraded hardware file (with `faults:`) whose twin is the machine under test");
  app->add_option("--inject-bug", flags->inject_bug,
                  "Self-test of verify: plant a bug so the correctness part must fail with a counterexample "
                  "(drop-chunk: DataParallel drops its last chunk; skip-divide: DDP does not divide by the world "
                  "size; ring-step: the host ring all-reduce skips a step)")
      ->check(CLI::IsMember({"none", "drop-chunk", "skip-divide", "ring-step"}))
      ->group("Self-test");
  app->add_flag("--require-device", flags->require_device,
                "Validating a node: no device for the backend is an error (JUnit <error>, exit 3); default: every "
                "check skipped with the reason, exit 0 (a CI runner without a GPU)");
  app->footer(
      "Examples:\n"
      "  dptwin verify --backend host --devices 2 --junit verify.xml        # CI without a GPU\n"
      "  dptwin verify --backend cuda --hardware dgx-h100 --cases 200 --require-device --junit verify.xml\n"
      "  dptwin verify --backend sim --hardware dgx1-v100 --devices 4 --only performance \\\n"
      "      --as-measured scenarios/faults/dgx1-slow-link.yaml             # a degraded twin as the node\n\n"
      "Tolerances (measured/predicted speed ratio): cuda micro 0.80-1.25, collectives 0.70-1.43, steps "
      "0.50-2.00; sim 0.95-1.05; host 0.05-20 (threads on shared, possibly busy, CPU cores).\n"
      "Without a device for --backend (cuda on a machine without a GPU) every check is reported skipped with the "
      "reason (JUnit <skipped>) and the run exits 0; with --require-device (validating a node) each part is an "
      "error (JUnit <error>) and the run exits 3.\n" +
      exit_codes_help() + " Exit 0 only when every check passes or is skipped.");
  return [flags] { return run_verify(*flags); };
}};

}  // namespace
}  // namespace dpt::cli::cmd_verify
