// `dptwin calibrate --from BENCH.json --hardware BASE`: the measured fields of a
// hardware file from `dptwin bench --backend cuda|host` output. Each efficiency
// field the twin multiplies a datasheet rate by is set to measured / datasheet
// (capped at 1), from microbenchmarks only (GEMM rate,
// memory copy, host-device and peer copies; never collectives or training steps):
//   efficiency.gemm              best f32 GEMM rate / gpu.peak_flops.f32
//   efficiency.memory_bandwidth  best on-device copy (read + written) / gpu.memory_bandwidth
//   efficiency.pcie              mean host<->device copy / (PCIe lane rate x lanes)
//   efficiency.p2p               mean peer copy between NVLink-connected GPUs / their
//                                NVLink (or NVSwitch port) bandwidth; unchanged without NVLink
// The base file's text is kept, with its sources; its `efficiency:` block is
// replaced by the measured one, each line saying what it came from and when.
#pragma once
#include <string>
#include <vector>

#include "scenarios/measure/device_bench.hpp"
#include "sim/net/hardware.hpp"

namespace dpt {

struct CalibratedField {
  std::string field;      // "gemm", "memory_bandwidth", "pcie", "p2p"
  double before = 0;      // the base file's value
  double after = 0;       // measured / datasheet, capped at 1
  bool capped = false;    // the measurement exceeded the datasheet rate
  std::string source;     // "f32 GEMM 4096^3 47.2 TFLOP/s of 66.9 on cuda:0 NVIDIA H100, 2026-12-02"
};

struct BenchCalibration {
  std::vector<CalibratedField> fields;
  sim::HardwareSpec spec;  // the base with the measured efficiencies
  std::string yaml;        // the base file's text with the new efficiency block
};

// `base_yaml` is the base file's text (kept verbatim outside the efficiency block).
// Throws std::invalid_argument naming `bench_where` when the bench has no figure for
// any field, or more devices than the hardware has GPUs.
BenchCalibration calibrate_from_bench(const sim::HardwareSpec& base, const std::string& base_yaml,
                                      const DeviceBenchResult& bench, const std::string& bench_where);

}  // namespace dpt
