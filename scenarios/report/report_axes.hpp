// The swept fields of a sweep as a report shows them: a column per field that is
// not already one of the fixed columns (hardware, strategy, GPU count), headed
// with the field's name and unit, and the choice of the charts' x-axis: the GPU
// count when it varies, else the first numeric swept field (bucket size, PCIe
// generation, ...), else none (the charts become bars, one per configuration).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "scenarios/scenario/sweep.hpp"

namespace dpt::report {

// A swept field shown in the report.
struct SweptField {
  std::string axis;    // as the scenario names it: "bucket_cap_mb", "overrides.pcie.generation"
  std::string label;   // column header and axis title with its unit: "DDP bucket size (MiB)"
  bool numeric = false;  // every value reads as a number (units after it allowed)
};

// A field's display name with its unit: "bucket_cap_mb" -> "DDP bucket size (MiB)",
// "overrides.pcie.generation" -> "PCIe generation", "overrides.nvlink.link_bandwidth"
// with values "25 GB/s" -> "nvlink.link_bandwidth (GB/s)".
std::string swept_field_label(const std::string& axis, const std::vector<std::string>& values);
// The number a value starts with ("25 GB/s" -> 25), when it starts with one.
std::optional<double> leading_number(const std::string& value);

// Whether a point ran and has the figures a report plots (step time, throughput).
bool point_ok(const scenario::PointResult& p);
// A point's throughput in samples per second; only for a point_ok point.
double point_throughput(const scenario::PointResult& p);

// The swept fields that need their own column: every axis except hardware,
// strategy and the GPU count (devices, nodes, gpus), in the scenario's order.
std::vector<SweptField> extra_swept_fields(const scenario::SweepResult& r);
// A point's value of a swept axis ("" when the point lacks it).
std::string axis_value(const scenario::PointResult& p, const std::string& axis);

// "DDP bucket size 25 MiB", "PCIe generation 4", "dgx-a100", "DDP": a swept value
// as a series name or a sentence shows it.
std::string field_value_text(const std::string& axis, const std::string& value);
// The series a point belongs to: its swept values except the x-axis (the GPU count
// when x_axis is empty, else that field's axis name); when nothing else is swept,
// "HARDWARE STRATEGY".
std::string series_label(const scenario::PointResult& p, const std::string& x_axis = "");

// The charts' x-axis: nullopt means the GPU count.
std::optional<SweptField> x_axis_field(const scenario::SweepResult& r);
// Whether the ok points span more than one GPU count.
bool gpu_count_varies(const scenario::SweepResult& r);

}  // namespace dpt::report
