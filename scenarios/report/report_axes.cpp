#include "scenarios/report/report_axes.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"

namespace dpt::report {
namespace {

bool is_fixed_column(const std::string& axis) {
  return axis == "hardware" || axis == "strategy" || axis == "devices" || axis == "nodes" || axis == "gpus";
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(' ');
  const auto b = s.find_last_not_of(' ');
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// The text after a value's leading number ("25 GB/s" -> "GB/s"), "" when none.
std::string unit_suffix(const std::string& value) {
  const char* begin = value.c_str();
  char* end = nullptr;
  std::strtod(begin, &end);
  return end == begin ? std::string() : trim(std::string(end));
}

}  // namespace

std::optional<double> leading_number(const std::string& value) {
  const char* begin = value.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin) return std::nullopt;
  return v;
}

std::string swept_field_label(const std::string& axis, const std::vector<std::string>& values) {
  if (axis == "bucket_cap_mb") return "DDP bucket size (MiB)";  // PyTorch's bucket_cap_mb counts MiB
  if (axis == "batch") return "global batch (samples)";
  if (axis == "batch_per_device") return "batch per GPU (samples)";
  if (axis == "dtype") return "dtype";
  if (axis == "memory_format") return "memory format";
  if (axis == "inputs") return "inputs";
  if (axis == "optimizer") return "optimizer";
  if (axis == "model") return "model";
  if (axis == "devices") return "GPUs per node";
  if (axis == "nodes") return "nodes";
  if (axis == "gpus") return "GPUs";
  std::string name = axis.rfind("overrides.", 0) == 0 ? axis.substr(10) : axis;
  if (name == "pcie.generation") return "PCIe generation";
  if (name == "pcie.lanes") return "PCIe lanes";
  // A unit written with the values (the same on all of them) goes into the label.
  std::set<std::string> units;
  for (const auto& v : values) units.insert(unit_suffix(v));
  if (units.size() == 1 && !units.begin()->empty()) return fmt::format("{} ({})", name, *units.begin());
  return name;
}

std::string axis_value(const scenario::PointResult& p, const std::string& axis) {
  for (const auto& [a, v] : p.axes)
    if (a == axis) return v;
  return "";
}

std::string field_value_text(const std::string& axis, const std::string& value) {
  if (axis == "hardware" || axis == "model" || axis == "dtype" || axis == "optimizer") return value;
  if (axis == "strategy") return value == "dp" ? "DataParallel" : value == "ddp" ? "DDP" : value;
  if (axis == "devices" || axis == "gpus") return value + " GPUs";
  if (axis == "nodes") return value + (value == "1" ? " node" : " nodes");
  std::string label = swept_field_label(axis, {value});
  std::string unit;
  if (const auto open = label.rfind(" ("); open != std::string::npos && label.back() == ')') {
    unit = label.substr(open + 2, label.size() - open - 3);
    label = label.substr(0, open);
  }
  // The value keeps a unit written with it; a unit from the label follows a bare number.
  const bool has_unit = !unit_suffix(value).empty();
  return fmt::format("{} {}{}", label, value, unit.empty() || has_unit ? "" : " " + unit);
}

std::string series_label(const scenario::PointResult& p, const std::string& x_axis) {
  std::vector<std::string> parts;
  for (const auto& [axis, value] : p.axes) {
    if (x_axis.empty() ? (axis == "devices" || axis == "nodes" || axis == "gpus") : axis == x_axis) continue;
    parts.push_back(field_value_text(axis, value));
  }
  if (parts.empty())
    return p.hardware + " " + (p.strategy == "dp" ? "DataParallel" : p.strategy == "ddp" ? "DDP" : p.strategy);
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : ", ") + part;
  return out;
}

std::vector<SweptField> extra_swept_fields(const scenario::SweepResult& r) {
  if (fault_active(Fault::report_no_swept_columns)) return {};
  std::vector<std::string> order;
  for (const auto& p : r.points)
    for (const auto& [axis, value] : p.axes)
      if (!is_fixed_column(axis) && std::find(order.begin(), order.end(), axis) == order.end()) order.push_back(axis);
  std::vector<SweptField> out;
  for (const auto& axis : order) {
    std::vector<std::string> values;
    bool numeric = true;
    for (const auto& p : r.points) {
      const std::string v = axis_value(p, axis);
      if (v.empty()) continue;
      values.push_back(v);
      if (!leading_number(v)) numeric = false;
    }
    out.push_back({axis, swept_field_label(axis, values), numeric && !values.empty()});
  }
  return out;
}

bool point_ok(const scenario::PointResult& p) {
  return p.status == scenario::PointStatus::ok && p.report && p.report->step_time_s &&
         p.report->throughput_samples_per_s;
}
double point_throughput(const scenario::PointResult& p) { return *p.report->throughput_samples_per_s; }

bool gpu_count_varies(const scenario::SweepResult& r) {
  std::set<int> counts;
  for (const auto& p : r.points)
    if (p.status == scenario::PointStatus::ok) counts.insert(p.gpus());
  return counts.size() > 1;
}

std::optional<SweptField> x_axis_field(const scenario::SweepResult& r) {
  if (gpu_count_varies(r)) return std::nullopt;
  for (const auto& f : extra_swept_fields(r))
    if (f.numeric) return f;
  return std::nullopt;
}

}  // namespace dpt::report
