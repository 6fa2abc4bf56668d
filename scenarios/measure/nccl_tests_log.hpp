// Reads the text output of NVIDIA's nccl-tests (all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, ...) so that sites which already have those logs can
// calibrate the twin from them (`dptwin calibrate --from FILE`).
//
// The format, as nccl-tests prints it (src/common.cu, src/util.cu):
//   # nThread 1 nGpus 4 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 ...
//   # Using devices
//   #  Rank  0 Group  0 Pid  41215 on     node01 device  0 [0000:07:00] NVIDIA A100-SXM4-80GB
//   #                                                       out-of-place                       in-place
//   #       size         count      type   redop    root     time   algbw   busbw  #wrong     time ...
//   #        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us) ...
//              8             2     float     sum      -1    10.52    0.00    0.00       0    10.31 ...
//   # Out of bounds values : 0 OK
//   # Avg bus bandwidth    : 72.1234
// Columns are found by name from the header line, so the older layouts (no
// `root` column, `error` instead of `#wrong`, all_gather without `redop`) and the
// per-iteration layout read the same way. Times are microseconds, bandwidths
// GB/s (1e9 bytes per second), as nccl-tests prints them.
#pragma once
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/units.hpp"

namespace dpt {

// One measurement direction of a row (nccl-tests prints out-of-place, then in-place).
struct NcclTestsTiming {
  Seconds time_s = 0;                  // the table's time column (us) in seconds
  BytesPerSecond algbw_Bps = 0;        // algorithm bandwidth: size / time
  BytesPerSecond busbw_Bps = 0;        // bus bandwidth: algbw times the collective's factor
  std::optional<std::int64_t> wrong;   // #wrong (or `error` != 0 in old logs); empty when N/A
};

struct NcclTestsRow {
  int line = 0;                        // 1-based line in the log
  Bytes size_bytes = 0;                // the size column: the collective's total buffer
  Elements count = 0;                  // the count column (elements per rank for all_gather)
  std::string type;                    // "float", "half", "bfloat16", "double", ...
  std::string redop;                   // "sum", "none", ... (empty in layouts without it)
  std::optional<int> root;             // -1 for rootless collectives; empty without the column
  std::optional<NcclTestsTiming> out_of_place;  // empty when the log has only in-place results
  std::optional<NcclTestsTiming> in_place;
};

struct NcclTestsLog {
  std::string where;                   // the file name, for messages
  std::string collective;              // "all_reduce", "all_gather", "reduce_scatter", ...
  std::string program;                 // "all_reduce_perf" when the log names it
  int ranks = 0;                       // total ranks (GPUs) in the collective
  int gpus_per_thread = 1;             // nGpus of the "# nThread N nGpus G" line (nccl-tests -g)
  std::optional<int> iters;            // its "iters: N" (timed calls per size), when it says
  std::vector<std::string> device_names;  // from "# Using devices", one per rank listed
  std::vector<std::string> hosts;         // distinct host names of the listed ranks
  std::vector<NcclTestsRow> rows;         // in file order
  std::optional<double> avg_busbw_GBps;   // the "# Avg bus bandwidth" trailer
  std::optional<int> out_of_bounds;       // the "# Out of bounds values" trailer
  std::vector<std::string> nccl_warnings; // "NCCL WARN" lines found in the log

  // The timing used for calibration: out-of-place when present, else in-place.
  const NcclTestsTiming& timing(const NcclTestsRow& row) const;
};

// nccl-tests' busbw factor for a collective on n ranks (doc/PERFORMANCE.md):
// all_reduce 2(n-1)/n; all_gather and reduce_scatter (n-1)/n; broadcast, reduce 1.
// Throws std::invalid_argument for a collective it does not know.
double nccl_busbw_factor(const std::string& collective, int ranks);

// Parses a log. `collective_hint` ("all_reduce", "all_gather", ...) names the
// collective when the log does not ("# Collective test starting: ..." appears only
// in recent nccl-tests); otherwise it must agree with the log. Throws
// std::invalid_argument naming `where` and the line for anything malformed: a
// result row before the column header, a row with the wrong number of fields, a
// field that is not a number, no result rows, a busbw/algbw ratio that does not
// match the collective and rank count. Lines NCCL itself prints (NCCL INFO/WARN)
// are skipped; other text is an error.
NcclTestsLog parse_nccl_tests_log(std::istream& in, const std::string& where,
                                  const std::optional<std::string>& collective_hint = std::nullopt);
NcclTestsLog read_nccl_tests_log(const std::string& path,
                                 const std::optional<std::string>& collective_hint = std::nullopt);

}  // namespace dpt
