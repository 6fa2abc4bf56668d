// Sweep points with hand-written step reports, for the report and plan tests: every
// figure a report shows is set here or by the test, so each expected value is known.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "scenarios/scenario/sweep.hpp"

namespace dpt::test {

// A resnet50 point (32 samples per GPU, f32, sgd_momentum, 25 MB buckets, one node) of
// `gpus` GPUs named `gpu_name` on `hardware`, running at `thr` samples/s: the report
// holds the strategy, device count, step time and throughput, and each GPU peaks at
// `peak_bytes` of `capacity_bytes`. Tests set the rest of the report themselves.
inline scenario::PointResult hand_written_point(std::size_t index,
                                                std::vector<std::pair<std::string, std::string>> axes,
                                                const std::string& hardware, const std::string& gpu_name,
                                                const std::string& strategy, int gpus, double thr, Bytes peak_bytes,
                                                Bytes capacity_bytes) {
  scenario::PointResult p;
  p.index = index;
  p.axes = std::move(axes);
  p.hardware = hardware;
  p.gpu_name = gpu_name;
  p.model = "resnet50";
  p.strategy = strategy;
  p.devices = gpus;
  p.nodes = 1;
  p.batch_per_device = 32;
  p.batch_global = 32 * gpus;
  p.dtype = "f32";
  p.bucket_cap_mb = 25;
  p.optimizer = "sgd_momentum";
  StepReport r;
  r.strategy = strategy;
  r.devices = gpus;
  r.step_time_s = p.batch_global / thr;
  r.throughput_samples_per_s = thr;
  for (int g = 0; g < gpus; ++g) {
    DeviceReport d;
    d.device = "sim:gpu" + std::to_string(g);
    d.peak_memory_bytes = peak_bytes;
    d.capacity_bytes = capacity_bytes;
    r.devices_detail.push_back(d);
  }
  p.report = r;
  return p;
}

}  // namespace dpt::test
