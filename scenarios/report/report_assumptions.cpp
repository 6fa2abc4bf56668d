#include "scenarios/report/report_assumptions.hpp"

#include "scenarios/cli/version.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/core/precision.hpp"
#include "engine/core/timestamp.hpp"
#include <yaml-cpp/yaml.h>

#include "scenarios/measure/fidelity.hpp"
#include "scenarios/report/report_axes.hpp"
#include "scenarios/report/report_sweep.hpp"
#include "scenarios/scenario/measured_scaling.hpp"


namespace dpt::report {
namespace {

using scenario::PointResult;

template <typename F>
std::string distinct(const scenario::SweepResult& r, F value) {
  std::vector<std::string> seen;
  for (const auto& p : r.points) {
    const std::string v = value(p);
    if (!v.empty() && std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
  }
  std::string out;
  for (const auto& v : seen) out += (out.empty() ? "" : ", ") + v;
  return out.empty() ? "n/a" : out;
}

// A point's precision as its figures ran it: a predicted f32 step is PyTorch's default f32
// (TF32 convolutions on Ampere and later), a measured one (host, or CUDA without --tf32)
// FP32 math throughout.
std::string precision_text(const std::string& dtype, bool measured) {
  if (dtype == "f32" && measured) return "f32 (FP32 weights, gradients and math; no mixed precision)";
  if (dtype == "f64") return "f64 (FP64 throughout)";
  try {
    return precision_description(precision_from_name(dtype));
  } catch (const std::invalid_argument&) {
    return dtype;  // a report read from a file may name one this dptwin does not know
  }
}

}  // namespace

// The same figures as dptwin --version: the git revision is refreshed at every build,
// not fixed when the build folder was configured.
std::string dptwin_version() { return cli::project_version(); }
std::string dptwin_git_revision() { return cli::git_revision(); }

std::string utc_now_iso8601() { return utc_timestamp_now(); }

AssumptionsInput assumptions_input(const scenario::SweepResult& r, const scenario::Scenario* s,
                                   const scenario::Library& lib) {
  AssumptionsInput in;
  in.date = utc_now_iso8601();
  // The scenario's overrides when it ran here, else those the result recorded (a report
  // made from a results file, or from merged shards, had said "none").
  in.overrides = s ? scenario::override_descriptions(*s) : r.overrides;
  std::set<std::string> names;
  for (const auto& p : r.points) names.insert(p.hardware);
  for (const auto& name : names) {
    try {
      // A path relative to the scenario's folder, as its points resolved it.
      const auto hw = scenario::load_hardware_with_overrides(name, {}, lib, s ? s->dir : std::filesystem::path("."), "");
      in.hardware[name] = fmt::format("{} ({})", hw.description.empty() ? hw.gpu.name : hw.description,
                                      hw.source_file.empty() ? "built in" : hw.source_file);
      in.gpu_of[name] = hw.gpu.name;
    } catch (const std::exception&) {
      in.hardware[name] = "hardware file not found when the report was written";
    }
  }
  // The fidelity table's entries per GPU model: each entry's hardware file loaded once (a
  // table that cannot be read leaves the counts empty: the row then names `dptwin fidelity`).
  std::set<std::string> gpus;
  for (const auto& [name, gpu] : in.gpu_of) gpus.insert(gpu);
  std::error_code ec;
  const auto table = lib.hardware_dir.parent_path() / "measured" / "public";
  if (!gpus.empty() && std::filesystem::is_directory(table, ec)) {
    try {
      fidelity::EntryGpuNames gpu_names(lib);
      for (const auto& source : fidelity::load_table(table))
        for (const auto& e : source.entries) {
          std::string gpu;
          try {
            gpu = gpu_names.of(e, std::filesystem::path(source.file).parent_path());
          } catch (const std::exception&) {
            continue;  // an entry whose hardware file does not load counts for no GPU
          }
          if (!gpus.count(gpu)) continue;
          auto& count = in.fidelity_by_gpu[gpu];
          ++count.entries;
          if (fidelity::is_training(fidelity::classify(e))) ++count.training;
          count.hardware.insert(std::filesystem::path(e.hardware_file).stem().string());
        }
    } catch (const std::exception&) {
      in.fidelity_by_gpu.clear();
    }
  }
  return in;
}

ReportSection assumptions_section(const scenario::SweepResult& r, const AssumptionsInput& in) {
  ReportTable t{"", {"assumption", "value"}, {}, {false, false}};
  const std::string source = distinct(r, [](const PointResult& p) { return p.report ? p.report->source : ""; });
  t.rows.push_back({"figures", source == "predicted" ? "simulated by the dptwin twin (SimGrid model of the hardware "
                                                       "file), not measured"
                               : source == "measured" ? "measured on real devices"
                                                      : source});
  // Only points with figures: a skipped point ran nothing (its dtype field is the default,
  // not the scenario's precision).
  t.rows.push_back({"precision", distinct(r, [](const PointResult& p) {
                      if (!p.report) return std::string();
                      const bool measured = p.report->source == "measured";
                      return precision_text(p.report->precision.value_or(p.report->dtype), measured);
                    })});
  t.rows.push_back({"memory format", distinct(r, [](const PointResult& p) {
                      return p.report && p.report->memory_format
                                 ? *p.report->memory_format + " (Tensor Core convolutions without NCHW<->NHWC transposes)"
                                 : std::string("contiguous (PyTorch's default NCHW)");
                    })});
  t.rows.push_back({"inputs", distinct(r, [](const PointResult& p) {
                      return p.report && p.report->inputs
                                 ? std::string("resident on the GPUs (no host-to-device copy per step)")
                                 : std::string("copied from host memory every step (x.to(device))");
                    })});
  t.rows.push_back({"optimizer", distinct(r, [](const PointResult& p) {
                      return p.report && p.report->optimizer_impl ? p.optimizer + " (" + *p.report->optimizer_impl + ")"
                                                                  : p.optimizer;
                    })});
  t.rows.push_back({"batch", distinct(r, [](const PointResult& p) {
                      if (!p.batch_per_device) return std::string();
                      const int k = p.report && p.report->accumulate ? *p.report->accumulate : 1;
                      return k > 1 ? fmt::format("{} per GPU per micro-batch, {} micro-batches per step",
                                                 p.batch_per_device, k)
                                   : fmt::format("{} per GPU", p.batch_per_device);
                    }) + " (the global batch is the per-GPU batch times the GPU count, times the micro-batches "
                         "of an accumulated step)"});
  const bool any_ddp = std::any_of(r.points.begin(), r.points.end(), [](const PointResult& p) { return p.strategy == "ddp"; });
  if (any_ddp) {
    t.rows.push_back({"DDP bucket size", distinct(r, [](const PointResult& p) {
                        if (p.strategy != "ddp") return std::string();
                        // 0: a step report that did not record it (written before bucket_cap_mb).
                        return p.bucket_cap_mb > 0 ? fmt::format("{:g} MiB", p.bucket_cap_mb) : std::string("not recorded");
                      })});
    t.rows.push_back({"DDP comm hook", distinct(r, [](const PointResult& p) {
                        if (p.strategy != "ddp" || !p.report) return std::string();
                        return p.report->comm_hook ? *p.report->comm_hook
                                                   : std::string("none (gradients all-reduced in their own dtype)");
                      })});
  }
  t.rows.push_back({"activation checkpointing", distinct(r, [](const PointResult& p) {
                      if (!p.report) return std::string();
                      return p.report->checkpoint_layers
                                 ? fmt::format("checkpoint_sequential, {} per segment (forward recomputed in "
                                               "backward)",
                                               *p.report->checkpoint_layers == 1
                                                   ? std::string("one layer")
                                                   : fmt::format("{} layers", *p.report->checkpoint_layers))
                                 : std::string("none");
                    })});
  // A profiled model's measured times: used as measured, scaled by op class, or kept unscaled.
  const std::string measured = distinct(r, [](const PointResult& p) {
    std::string notes;
    if (p.report)
      for (const auto& w : p.report->warnings)
        if (w.rfind(scenario::kMeasuredCostsNote, 0) == 0)
          notes += (notes.empty() ? "" : "; ") + w.substr(scenario::kMeasuredCostsNote.size());
    return notes;
  });
  if (measured != "n/a") t.rows.push_back({"measured layer costs", measured});
  std::string overrides;
  for (const auto& o : in.overrides) overrides += (overrides.empty() ? "" : "; ") + o;
  t.rows.push_back({"hardware overrides", overrides.empty() ? "none" : overrides});
  for (const auto& [name, description] : in.hardware) t.rows.push_back({"hardware " + name, description});
  // How far to trust simulated figures on this hardware: the twin against published
  // measurements of it (an outside-user review: the reports gave H100 figures with no word
  // of the twin running 11-45 % fast there).
  if (source == "predicted") {
    // Only where the table has entries on the hardware: elsewhere the command has nothing
    // to run (it exited 2, an outside-user review), so the row says the table lacks it.
    std::string commands, without;
    std::set<std::string> seen;
    for (const auto& [name, description] : in.hardware) {
      const auto g = in.gpu_of.find(name);
      const auto it = g == in.gpu_of.end() ? in.fidelity_by_gpu.end() : in.fidelity_by_gpu.find(g->second);
      if (it != in.fidelity_by_gpu.end() && it->second.entries > 0) {
        if (!seen.insert(it->first).second) continue;
        const auto& c = it->second;
        commands += fmt::format("{}`dptwin fidelity --gpu {}` ({} entr{}, {} of them training, on {})",
                                commands.empty() ? "" : ", ", it->first, c.entries, c.entries == 1 ? "y" : "ies",
                                c.training, fmt::join(c.hardware, ", "));
      } else {
        without += (without.empty() ? "" : ", ") +
                   (g == in.gpu_of.end() ? name : fmt::format("{} (hardware {})", g->second, name));
      }
    }
    // The commands, not their figures: each prints predicted against measured and the signed
    // median error per class (an outside-user review read the row as promising the figures).
    std::string text = "the twin against published measurements of real machines; these print each entry and the "
                       "signed median error per class: " +
                       (commands.empty() ? std::string("`dptwin fidelity`") : commands);
    if (!without.empty())
      text += fmt::format("; the table has no measurement of {} (`dptwin fidelity` covers the others)", without);
    t.rows.push_back({"accuracy", text + " (README, Fidelity)"});
  }
  t.rows.push_back({"dptwin", fmt::format("version {}, git revision {}", dptwin_version(), dptwin_git_revision())});
  t.rows.push_back({"date", in.date.empty() ? "unknown" : in.date});
  return {"Assumptions", {"What the figures above rest on; a reader forwarding this report needs these."}, {}, {t}, {}};
}

}  // namespace dpt::report
