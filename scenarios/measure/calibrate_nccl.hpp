// Calibrating the twin from nccl-tests logs (`dptwin calibrate --from FILE`): many
// sites already have all_reduce_perf / all_gather_perf output for their nodes.
//
// For each log the bus bandwidth at its largest size (out-of-place, where a ring
// is bandwidth-bound: the twin's latency under 10 % of its time there, else the log
// sets no bandwidth field, and says so) is compared with what the twin predicts for the same
// collective, size and rank count on the base hardware file, and the efficiency
// field of the link that bounds that collective is scaled until the twin
// reproduces the log within 1 % (bisection); where no value of the field gets there
// (the log is faster than the file's rates allow, or NCCL's per-channel bandwidth bounds
// the twin, not the link), it says which and why ("cannot reach: ..."):
//   - ranks on more than one host: efficiency.nic (the network bounds the ring);
//   - ranks NCCL connects through host memory (SHM: P2P off, or a PCIe path beyond NCCL's
//     p2pLevel, sim::nccl_p2p_within_node): pcie.staged_bidirectional, the host-staged
//     rate, bounded by the GPU link's raw rate;
//   - NVLink or NVSwitch: efficiency.p2p;
//   - PCIe only: efficiency.pcie.
// Then the latency regime: the log's smallest size (up to 64 KiB, where NCCL runs its LL
// protocol and the time is NCCL's latency term) scales efficiency.nccl_latency until the
// twin's time there matches the log's (within 1 %, bounded to 0.1 .. 10; or "cannot reach"
// where the links' own latencies, not NCCL's term, bound the twin's time). A latency fit
// that raises the twin's worst |log(twin / measured)| over the log's sizes (beyond 1 %) is
// not applied: the field keeps its value and the result says why.
// The efficiency fields are exactly what the twin multiplies datasheet rates by,
// so the calibrated file predicts the other collectives and training steps from
// the same links.
#pragma once
#include <string>
#include <vector>

#include "scenarios/measure/nccl_tests_log.hpp"
#include "scenarios/measure/calibrate.hpp"
#include "sim/net/hardware.hpp"

namespace dpt {

struct NcclFieldCalibration {
  std::string log;                       // the log's file name
  std::string collective;                // "all_reduce" | "all_gather"
  int ranks = 0;
  int line = 0;                          // the row used
  Bytes size_bytes = 0;
  BytesPerSecond measured_busbw_Bps = 0;
  BytesPerSecond predicted_before_Bps = 0;  // the base file's twin
  BytesPerSecond predicted_after_Bps = 0;   // the calibrated file's twin
  std::string field;                     // "efficiency.p2p" | ".pcie" | ".nic" | ".nccl_latency" | "pcie.staged_bidirectional"
  double before = 0, after = 0;          // the field (the staged rate in bytes per second)
  bool capped = false;                   // the log is faster than the file allows at efficiency 1 (or the link's raw rate)
  bool fitted = true;                    // false: the field was left as it was (`bound` says why)
  bool reached = true;                   // the calibrated twin reproduces the log's figure within 1 %
  std::string bound;                     // when not: why no value of the field gets there
  std::string note;                      // what the fitted value also holds (a -g log's launches); may be empty
};

struct NcclCalibrationResult {
  sim::HardwareSpec spec;
  std::vector<NcclFieldCalibration> fields;
  std::string yaml;  // the calibrated hardware file, fields marked with the log and date
  std::vector<std::string> notes;  // what was not checked (a log that names no GPUs)
};

// Throws std::invalid_argument naming the log for a collective other than
// all_reduce/all_gather, more ranks than the hardware has GPUs, or wrong results
// (#wrong > 0) in the row used.
NcclCalibrationResult calibrate_from_nccl_logs(const sim::HardwareSpec& base, const std::vector<NcclTestsLog>& logs,
                                               const std::string& date);

// The twin's time for one all_reduce or all_gather of `size_bytes` (nccl-tests' size) on
// the first `ranks` GPUs, the collective alone as `bench --backend sim` times it.
Seconds twin_collective_time(const sim::HardwareSpec& hw, const std::string& collective, int ranks, Bytes size_bytes);

// The twin's busbw for one collective of `size_bytes` on the first `ranks` GPUs.
// Every measured device must be the hardware file's GPU: its model (the first token of the
// file's GPU name that holds a digit, "H100") in the device's name, and no other board
// where both names say one (PCIe, NVL, SXM). An L40S log had set dgx-h100's p2p efficiency
// to 0.03, an H100 PCIe log to 0.316, a CPU bench file an RTX A6000's GEMM to 0.0016.
// A device named "cuda:N" alone (a CUDA bench file records no model) is not checked.
// Throws std::invalid_argument naming `where`, the device and the file's GPU.
void require_same_gpus(const sim::HardwareSpec& hw, const std::vector<std::string>& device_names,
                       const std::string& where);
BytesPerSecond twin_busbw(const sim::HardwareSpec& hw, const std::string& collective, int ranks, Bytes size_bytes);

}  // namespace dpt
