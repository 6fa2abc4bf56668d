#include "scenarios/cli/train_device.hpp"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "scenarios/report/measured_report.hpp"
#include "scenarios/measure/real_backend.hpp"

namespace dpt::cli {

void add_train_device_flags(CLI::App* cmd, TrainDeviceFlags& f) {
  cmd->add_option("--backend", f.backend, "Where it trains: host (CPU workers) or cuda (GPUs, NCCL for ddp)")
      ->check(CLI::IsMember({"host", "cuda"}))
      ->capture_default_str();
  CLI::Option* out =
      cmd->add_option("-o,--out", f.report, "cuda: write the last step's measured step report to this file "
                                            "(dptwin.step_report/1)");
  cmd->add_option("--report", f.report_deprecated, "deprecated spelling of -o FILE (--report is a directory elsewhere)")
      ->excludes(out)
      ->group("Deprecated");
  cmd->add_option("--trace", f.trace, "cuda: write the last step's Chrome trace (CUDA events; opens in Perfetto)");
  cmd->add_flag("--tf32", f.tf32, "cuda: f32 GEMM on TF32 tensor cores (faster, about 1e-3 relative error)");
}

TrainDevice::TrainDevice(const TrainDeviceFlags& flags, int devices) : flags_(flags) {
  if (flags_.report_deprecated) {
    std::cerr << "dptwin train: note: --report FILE is deprecated; use -o FILE (--report names a directory in the "
                 "other commands)\n";
    flags_.report = flags_.report_deprecated;
  }
  if (flags_.backend != "cuda" && (flags_.report || flags_.trace || flags_.tf32))
    throw std::invalid_argument("-o, --trace and --tf32 need --backend cuda (per-op timing from CUDA events)");
  RealBackendOptions o;
  o.devices = devices;
  o.allow_tf32 = flags_.tf32;
  backend_ = make_real_backend(flags_.backend, o);
  if ((flags_.report || flags_.trace) && !start_measuring(*backend_))
    throw std::invalid_argument(fmt::format("backend {} records no per-op timing", flags_.backend));
}

void TrainDevice::after_step(const StepLog& s, int total_steps) {
  if (!flags_.report && !flags_.trace) return;
  if (s.step == total_steps) last_ = collect_measured(*backend_, s.step_s);
  else start_measuring(*backend_);  // keep only the latest step's intervals
}

void TrainDevice::finish(const TrainConfig& c, const std::string& model, const std::string& strategy, int devices,
                         const std::vector<std::int64_t>& per_device, DType dtype) {
  if (!last_) return;
  if (flags_.trace) measured_trace(*last_).write(*flags_.trace);
  if (!flags_.report) return;
  StepReport r = measured_run_report(c, flags_.backend, model, strategy, devices, per_device, dtype);
  for (int d = 0; d < backend_->device_count(); ++d) {
    r.devices_detail.push_back(device_memory_report(backend_->device(d)));
  }
  fill_measured_report(r, *last_);
  if (flags_.trace) r.trace = *flags_.trace;
  write_step_report(r, *flags_.report);
}

}  // namespace dpt::cli
