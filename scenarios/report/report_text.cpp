#include "scenarios/report/report_text.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/precision.hpp"
#include "scenarios/report/report_axes.hpp"
#include "scenarios/report/report_format.hpp"
#include "scenarios/report/report_sweep.hpp"

namespace dpt::report {
namespace {

std::string opt_duration(const std::optional<Seconds>& s) { return s ? format_duration(*s) : "n/a"; }

// Exposed communication, with the part that was only host<->device copies (the batch's
// x.to(device)) named: a planner reads the rest as the collectives' share.
std::string exposed_communication_text(const StepBreakdown& b) {
  if (!(b.exposed_host_copy > 0)) return format_duration(b.exposed_communication);
  return fmt::format("{} ({} of it host-to-device copies of the batch, no collective running)",
                     format_duration(b.exposed_communication), format_duration(b.exposed_host_copy));
}

// The busiest device's kernel time by op class, largest first, each with its share of that
// device's kernel time: "conv 161 ms (38 %), norm 74 ms (17 %), ... on sim:gpu0". None when
// the report has no breakdown (measured reports, reports written before it).
std::optional<std::vector<std::string>> kernel_time_by_class_text(const StepReport& r) {
  const auto busiest = std::max_element(r.devices_detail.begin(), r.devices_detail.end(),
                                        [](const auto& a, const auto& b) { return a.busy_s < b.busy_s; });
  if (busiest == r.devices_detail.end() || busiest->kernel_time_by_class_s.empty()) return std::nullopt;
  std::vector<std::pair<std::string, Seconds>> parts(busiest->kernel_time_by_class_s.begin(),
                                                     busiest->kernel_time_by_class_s.end());
  std::stable_sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  Seconds total = 0;
  for (const auto& [name, s] : parts) total += s;
  std::string text;
  for (const auto& [name, s] : parts)
    text += fmt::format("{}{} {} ({})", text.empty() ? "" : ", ", name, format_duration(s),
                        total > 0 && s / total < 0.005 ? "<1 %" : format_percent(total > 0 ? s / total : 0.0));
  return std::vector<std::string>{"    kernels by op class", fmt::format("{} on {}", text, busiest->device)};
}

}  // namespace

std::string text_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  // A column of numbers (every body cell empty, "-" or starting with a digit or sign) is right-aligned.
  std::vector<bool> numeric(width.size(), true);
  for (size_t r = 1; r < rows.size(); ++r)
    for (size_t c = 0; c < rows[r].size(); ++c) {
      const std::string& cell = rows[r][c];
      if (!(cell.empty() || cell == "-" || std::isdigit(static_cast<unsigned char>(cell[0])) ||
            ((cell[0] == '-' || cell[0] == '+') && cell.size() > 1)))
        numeric[c] = false;
    }
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t c = 0; c < rows[r].size(); ++c) {
      if (c > 0) line += "  ";
      line += numeric[c] && c > 0 ? fmt::format("{:>{}}", rows[r][c], width[c]) : fmt::format("{:<{}}", rows[r][c], width[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string step_summary_text(const StepReport& r, const std::string& gpu_name) {
  std::string out = fmt::format("{} on {} ({}), {} on {} GPU{} ({} node{}), batch {} ({} per GPU), {}\n", r.model,
                                r.hardware, gpu_name, strategy_display_name(r.strategy), r.devices,
                                r.devices == 1 ? "" : "s", r.nodes, r.nodes == 1 ? "" : "s", r.batch_global,
                                r.batch_per_device, r.precision.value_or(r.dtype));
  if (r.precision) {
    std::string what = *r.precision;  // a report read from a file may name one this dptwin does not know
    try {
      what = precision_description(precision_from_name(*r.precision));
    } catch (const std::invalid_argument&) {
    }
    out += fmt::format("  precision: {}\n", what);
  }
  if (r.optimizer) {
    const std::string& o = *r.optimizer;
    out += fmt::format("  optimizer: {}{}\n", o,
                       o == "sgd"            ? " (torch.optim.SGD, momentum 0: no optimizer state)"
                       : o == "sgd_momentum" ? " (torch.optim.SGD with momentum: one state tensor per parameter)"
                       : o == "adamw"        ? " (torch.optim.AdamW: two state tensors per parameter)"
                                             : "");
    if (r.optimizer_impl)
      out += fmt::format("    kernels: {}\n",
                         *r.optimizer_impl == "foreach"
                             ? "foreach (torch._foreach_* over all parameters: PyTorch's default on CUDA since 2.0)"
                         : *r.optimizer_impl == "for_loop"
                             ? "for_loop (a few kernels per parameter: PyTorch's default before 2.0)"
                         : *r.optimizer_impl == "fused" ? "fused (one multi-tensor kernel: fused=True, apex)"
                                                        : *r.optimizer_impl);
    // f16-master's optimizer also holds f32 master weights and master gradients (in the
    // memory breakdown's optimizer state and gradients), whatever optimizer it wraps.
    if (r.precision && *r.precision == "f16-master")
      out += "    (f16-master: plus f32 master weights, master gradients, and the state in f32)\n";
  }
  if (r.memory_format)
    out += fmt::format("  memory format: {} (Tensor Core convolutions run NHWC without transposes)\n",
                       *r.memory_format);
  // The step report accepts only "device" here (null: copied from the host every step).
  if (r.inputs) out += "  inputs: on the GPUs (the batch stays there across steps: no host-to-device copy per step)\n";
  if (r.accumulate)
    out += fmt::format("  gradient accumulation: {} micro-batches of {} per GPU per step (no_sync for {})\n",
                       *r.accumulate, r.batch_per_device, *r.accumulate - 1);
  if (r.out_of_memory) {
    // The engine's message already names the device ("out of memory on sim:gpu0: allocating ...").
    const auto& m = r.out_of_memory->message;
    out += m.rfind("out of memory on", 0) == 0 ? fmt::format("  {}\n", m)
                                               : fmt::format("  out of memory on {}: {}\n", r.out_of_memory->device, m);
    return out;
  }
  std::vector<std::vector<std::string>> rows = {
      {"  step time", opt_duration(r.step_time_s)},
      {"    compute", format_duration(r.breakdown_s.compute)},
      {"    exposed communication", exposed_communication_text(r.breakdown_s)},
      {"    dispatch", format_duration(r.breakdown_s.dispatch)},
      {"    optimizer", format_duration(r.breakdown_s.optimizer)},
      {"    interference", format_duration(r.breakdown_s.interference)},
  };
  if (auto by_class = kernel_time_by_class_text(r)) rows.push_back(std::move(*by_class));
  std::string throughput = r.throughput_samples_per_s ? format_figure(*r.throughput_samples_per_s) + " samples/s" : "n/a";
  if (r.throughput_samples_per_s && r.tokens_per_sample)
    throughput += fmt::format(" ({} tokens/s of {}-token samples)",
                              format_figure(*r.throughput_samples_per_s * *r.tokens_per_sample),
                              format_count(*r.tokens_per_sample));
  rows.push_back({"  throughput", throughput});
  if (r.scaling_efficiency)
    // What the figure is: this step's throughput over N x one GPU's running the per-GPU
    // batch alone (an outside-user review read 6.37 ms against a 28.5 ms step as 22 %, where
    // the throughput ratio, a DataParallel split of 10 over 8 GPUs at 2 per GPU, is 14 %).
    rows.push_back({"  scaling efficiency",
                    r.devices > 1
                        ? fmt::format("{} of {} x one GPU's throughput (one GPU: {} per step of {})",
                                      format_percent(*r.scaling_efficiency), r.devices,
                                      opt_duration(r.single_device_step_time_s),
                                      // With K micro-batches one GPU's step runs all K.
                                      r.accumulate && *r.accumulate > 1
                                          ? fmt::format("{} micro-batches of {}", *r.accumulate, r.batch_per_device)
                                          : std::to_string(r.batch_per_device))
                        : fmt::format("{} (one GPU: {} per step)", format_percent(*r.scaling_efficiency),
                                      opt_duration(r.single_device_step_time_s))});
  // Where the time over one GPU's step went: the collectives the step waited for, and the
  // rest, the strategy's own per-step work (an outside-user review read 84 % efficiency at
  // 64 GPUs as the network's, where exposed communication was 0.4 of 3.6 ms: DDP's bucket
  // copies and hooks cost most of it, on one GPU as on 64).
  if (r.devices > 1 && r.step_time_s && r.single_device_step_time_s && *r.step_time_s > *r.single_device_step_time_s) {
    const Seconds over = *r.step_time_s - *r.single_device_step_time_s;
    // The exposed communication less the batch's host copies: DDP's all-reduces; under
    // DataParallel its peer copies (broadcast, scatter, gather, reduce), none a collective.
    const Seconds exposed = std::max(0.0, r.breakdown_s.exposed_communication - r.breakdown_s.exposed_host_copy);
    const bool dp = r.strategy == "dp";
    const std::string what = dp ? "exposed peer copies (broadcast, scatter, gather, reduce)" : "exposed collectives";
    const std::string own = dp                    ? "DataParallel's dispatch under one process and its copy kernels"
                            : r.strategy == "ddp" ? "DDP's bucket copies, hooks and their dispatch"
                                                  : "the strategy's own work";
    rows.push_back({"  over one GPU's step",
                    fmt::format("{}: {} {}, {} the rest ({})", format_duration(over),
                                format_duration(std::min(exposed, over)), what,
                                format_duration(std::max(0.0, over - exposed)), own)});
  }
  for (size_t i = 0; i < r.devices_detail.size(); ++i) {
    const auto& d = r.devices_detail[i];
    if (i >= 2 && i + 1 < r.devices_detail.size()) continue;  // GPU 0, 1 and the last tell the story
    rows.push_back({fmt::format("  peak memory {}", d.device),
                    d.capacity_bytes ? fmt::format("{} of {}", format_gib(d.peak_memory_bytes), format_gib(*d.capacity_bytes))
                                     : format_gib(d.peak_memory_bytes)});
  }
  if (r.simulated_devices && *r.simulated_devices < r.devices)
    rows.push_back({"  simulated", fmt::format("node 0's {} ranks, standing for the {} identical nodes' {} ranks "
                                               "(collectives timed for all)",
                                               *r.simulated_devices, r.nodes, r.devices)});
  if (!r.trace.empty()) rows.push_back({"  trace", r.trace});
  // Left-align labels, values after two spaces.
  size_t w = 0;
  for (const auto& row : rows) w = std::max(w, row[0].size());
  for (const auto& row : rows) out += fmt::format("{:<{}}  {}\n", row[0], w, row[1]);
  for (const auto& warning : r.warnings) out += "  warning: " + warning + "\n";
  return out;
}

std::string sweep_table_text(const scenario::SweepResult& r) {
  // The fixed columns, then one per swept field none of them shows (memory format, inputs,
  // bucket size, an override: the report's every-point table does the same), so rows that
  // differ only in such a field are told apart.
  const auto extra = extra_swept_fields(r);
  std::vector<std::string> header = {"#", "hardware", "strategy", "GPUs"};
  for (const auto& f : extra) header.push_back(f.label);
  // A target in tokens: tokens/s beside samples/s (it was in points.csv and predict only;
  // an outside-user review).
  const bool tokens = r.target && r.target->in_tokens();
  for (const char* h : {"batch", "step time", "samples/s"}) header.push_back(h);
  if (tokens) header.push_back("tokens/s");
  for (const char* h : {"efficiency", "status"}) header.push_back(h);
  std::vector<std::vector<std::string>> rows = {header};
  for (const auto& p : r.points) {
    const bool ok = p.status == scenario::PointStatus::ok && p.report;
    std::vector<std::string> row = {std::to_string(p.index), p.hardware, strategy_display_name(p.strategy),
                                    p.gpus() ? std::to_string(p.gpus()) : "-"};
    for (const auto& f : extra) {
      const std::string v = axis_value(p, f.axis);
      row.push_back(v.empty() ? "-" : v);
    }
    for (auto cell : {p.batch_global ? fmt::format("{}/{}", p.batch_global, p.batch_per_device) : "-",
                      ok ? opt_duration(p.report->step_time_s) : "-",
                      ok && p.report->throughput_samples_per_s ? format_figure(*p.report->throughput_samples_per_s)
                                                               : "-"})
      row.push_back(cell);
    if (tokens) {
      const auto per_sample = ok && p.report->tokens_per_sample ? p.report->tokens_per_sample : r.target->tokens_per_sample;
      row.push_back(ok && p.report->throughput_samples_per_s && per_sample
                        ? format_figure(*p.report->throughput_samples_per_s * *per_sample)
                        : "-");
    }
    for (auto cell : {ok && p.report->scaling_efficiency ? format_percent(*p.report->scaling_efficiency) : "-",
                      ok ? "ok" : fmt::format("{}: {}", scenario::point_status_name(p.status), p.reason)})
      row.push_back(cell);
    rows.push_back(row);
  }
  // Status is free text: keep it out of the alignment by rendering it last, unpadded.
  std::string out;
  std::vector<std::vector<std::string>> aligned;
  for (auto& row : rows) aligned.push_back(std::vector<std::string>(row.begin(), row.end() - 1));
  const std::string table = text_table(aligned);
  size_t line = 0, pos = 0;
  while (pos < table.size()) {
    const size_t end = table.find('\n', pos);
    out += table.substr(pos, end - pos) + "  " + rows[line++].back() + "\n";
    pos = end + 1;
  }
  return out;
}

std::vector<std::vector<std::string>> compare_rows(const std::vector<std::string>& labels,
                                                  const std::vector<StepReport>& reports) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {""};
  for (const auto& l : labels) header.push_back(l);
  rows.push_back(header);
  auto row = [&](const std::string& name, auto value) {
    std::vector<std::string> r = {name};
    for (const auto& rep : reports) r.push_back(value(rep));
    rows.push_back(r);
  };
  auto relative = [&](const std::string& name, auto get) {
    // Each column after the first against the first: (x - first) / first.
    std::vector<std::string> r = {name};
    const std::optional<double> base = get(reports.front());
    for (const auto& rep : reports) {
      const auto v = get(rep);
      r.push_back(base && v && *base != 0 && &rep != &reports.front() ? fmt::format("{:+.1f} %", 100.0 * (*v - *base) / *base)
                                                                      : "");
    }
    rows.push_back(r);
  };
  row("source", [](const StepReport& r) { return r.source; });
  row("hardware", [](const StepReport& r) { return r.hardware; });
  row("model", [](const StepReport& r) { return r.model; });
  row("precision", [](const StepReport& r) { return r.precision.value_or(r.dtype); });
  // The optimizer's state is part of every GPU's memory: reports that differ in it alone
  // differ in nothing else shown here.
  row("optimizer type", [](const StepReport& r) { return r.optimizer.value_or("-"); });
  // Scenarios that differ in the memory format or where the batch lives differ in step
  // time for that reason alone (an outside-user review saw 93.5 against 133 ms under
  // identical rows).
  row("memory format", [](const StepReport& r) { return r.memory_format.value_or("contiguous"); });
  row("inputs", [](const StepReport& r) { return std::string(r.inputs ? "on the GPUs" : "copied from the host"); });
  row("strategy", [](const StepReport& r) { return strategy_display_name(r.strategy); });
  row("GPUs", [](const StepReport& r) { return std::to_string(r.devices); });
  row("batch (global/per GPU)", [](const StepReport& r) { return fmt::format("{}/{}", r.batch_global, r.batch_per_device); });
  // Training choices that change the step besides the rows above (absent: PyTorch's default).
  row("accumulation", [](const StepReport& r) {
    return r.accumulate ? fmt::format("{} micro-batches", *r.accumulate) : std::string("none");
  });
  row("comm hook", [](const StepReport& r) { return r.comm_hook.value_or("none"); });
  row("activation checkpointing", [](const StepReport& r) {
    if (!r.checkpoint_layers) return std::string("none");
    return *r.checkpoint_layers == 1 ? std::string("every layer") : fmt::format("{} layers per segment", *r.checkpoint_layers);
  });
  row("hardware overrides", [](const StepReport& r) {
    if (!r.hardware_overrides) return std::string("not recorded");
    std::string out;
    for (const auto& o : *r.hardware_overrides) out += (out.empty() ? "" : "; ") + o;
    return out.empty() ? std::string("none") : out;
  });
  row("step time", [](const StepReport& r) { return opt_duration(r.step_time_s); });
  relative("  vs first", [](const StepReport& r) -> std::optional<double> { return r.step_time_s; });
  // A step that ran out of memory has no time, so no breakdown of it: n/a, as its step time.
  const auto part = [](Seconds StepBreakdown::*field) {
    return [field](const StepReport& r) { return r.step_time_s ? format_duration(r.breakdown_s.*field) : std::string("n/a"); };
  };
  row("compute", part(&StepBreakdown::compute));
  row("exposed communication", part(&StepBreakdown::exposed_communication));
  // Measured reports do not split it out: n/a there, not 0.
  row("  of it host copies", [](const StepReport& r) {
    return r.step_time_s && r.source != "measured" ? format_duration(r.breakdown_s.exposed_host_copy) : std::string("n/a");
  });
  row("dispatch", part(&StepBreakdown::dispatch));
  row("interference", part(&StepBreakdown::interference));
  row("optimizer", part(&StepBreakdown::optimizer));
  row("samples/s", [](const StepReport& r) {
    return r.throughput_samples_per_s ? format_figure(*r.throughput_samples_per_s) : std::string("n/a");
  });
  relative("  vs first", [](const StepReport& r) -> std::optional<double> { return r.throughput_samples_per_s; });
  row("scaling efficiency", [](const StepReport& r) {
    return r.scaling_efficiency ? format_percent(*r.scaling_efficiency) : std::string("n/a");
  });
  row("GPU 0 peak memory", [](const StepReport& r) {
    // A run out of memory has no peak: what was live when it failed is no fit.
    if (r.out_of_memory) return std::string("n/a (out of memory)");
    return r.devices_detail.empty() ? std::string("n/a") : format_gib(r.devices_detail[0].peak_memory_bytes);
  });
  row("out of memory", [](const StepReport& r) { return r.out_of_memory ? r.out_of_memory->device : std::string("no"); });
  return rows;
}

std::string compare_table_text(const std::vector<std::string>& labels, const std::vector<StepReport>& reports) {
  return text_table(compare_rows(labels, reports));
}

}  // namespace dpt::report
