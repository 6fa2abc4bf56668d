// The performance part of `dptwin verify`: measured figures against the twin's
// predictions, one check per figure. A figure passes when its speed ratio
// (measured rate / predicted rate, or predicted time / measured time, so below 1
// always means slower than predicted) lies inside the stated tolerance band.
// A failing figure names the device or link and the likely cause, reasoning across
// figures: a slow GEMM on one GPU explains its slow step; slow peer copies on every
// pair of one GPU point at that GPU's own link, on one pair at that pair's link; a
// slow step with kernels at the predicted rate is a straggler; a slow collective
// with healthy links is NCCL (or the host ring) on a slow path.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "scenarios/verify/verify_check.hpp"
#include "scenarios/measure/measure.hpp"

namespace dpt::verify {

// The accepted band for a speed ratio.
struct Tolerance {
  double low = 0.8;
  double high = 1.25;
  bool accepts(double ratio) const { return ratio >= low && ratio <= high; }
};

struct PerformanceTolerances {
  Tolerance micro;       // GEMM, memory, peer copies
  Tolerance collective;  // busbw
  Tolerance step;        // training steps
};

// The stated tolerances per backend (and printed in every figure):
//  - cuda: micro 0.80-1.25 (the hardware file's efficiency fields come from the same
//    microbenchmarks, so a healthy node lands within 20 %); collectives 0.70-1.43;
//    steps 0.50-2.00 (the twin's cost model for a whole step, launch and dispatch
//    overheads included);
//  - sim (a twin measured against a twin): 0.95-1.05 everywhere, the simulations are
//    deterministic and a nominal twin reproduces its prediction exactly;
//  - host: 0.05-20 everywhere: host "devices" are threads sharing a few CPU cores with
//    whatever else runs there (a CI runner's other jobs): under a load of 6 per core a
//    DataParallel step, which waits for its workers several times, was measured 7-10x
//    slower than on an idle machine. Only order-of-magnitude errors are flagged there;
//    the tight checks are the twin's and a GPU node's.
PerformanceTolerances default_tolerances(const std::string& backend_name);

struct PerformanceContext {
  std::string backend;  // "host" | "sim" | "cuda"
  std::string hardware; // what the prediction used: a hardware file, or "host calibration"
  // True when the twin's rates were calibrated from these very measurements (host
  // without --hardware): the GEMM, memory and peer figures then cannot disagree and
  // are reported as skipped, not as passes.
  bool micro_calibrated_from_measurement = false;
  // When set, the machine was too busy for its timings to mean anything (the host
  // backend on loaded cores): every figure is still reported, as skipped with this
  // reason, instead of judged.
  std::optional<std::string> not_judged_because;
};

// One check per figure present in both sets (missing ones: a skipped check saying why).
std::vector<Check> performance_checks(const Figures& measured, const Figures& predicted,
                                      const PerformanceTolerances& tolerances, const PerformanceContext& context);

// "4MiB", "256KiB", "1GiB": sizes in check names.
std::string size_label(Bytes bytes);

}  // namespace dpt::verify
