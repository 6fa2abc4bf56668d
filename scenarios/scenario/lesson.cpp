#include "scenarios/scenario/lesson.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "engine/host/host_backend.hpp"
#include "engine/nn/model_library.hpp"
#include "engine/optim/optim.hpp"
#include "engine/parallel/split.hpp"
#include "engine/parallel/strategy.hpp"
#include "scenarios/scenario/model_library_yaml.hpp"
#include "sim/net/hardware.hpp"
#include "sim/twin/predict.hpp"
#include "sim/net/yaml_util.hpp"

namespace dpt::lesson {

namespace {

const std::vector<std::string>& known_checks() {
  static const std::vector<std::string> checks = {"split", "dp_gpu0_extra_memory", "dp_gpu0_oom_first",
                                                  "dp_scaling_falls_behind", "ddp_near_linear",
                                                  "dp_two_gpus_acceptable"};
  return checks;
}

double gib(Bytes b) { return static_cast<double>(b) / static_cast<double>(kGiB); }

// "2.847 GiB", or "54.7 MiB" below one GiB so small differences stay visible.
std::string bytes_text(Bytes b) {
  if (b >= kGiB || b <= -kGiB) return fmt::format("{:.3f} GiB", gib(b));
  return fmt::format("{:.1f} MiB", static_cast<double>(b) / static_cast<double>(kMiB));
}

}  // namespace

Claim load_claim(const std::filesystem::path& path) {
  const std::string file = path.string();
  sim::MapReader in(sim::yaml_load_file(file), file, "");
  Claim c;
  c.file = file;
  if (const auto v = in.get_int("schema_version"); v != 1)
    in.fail("schema_version", fmt::format("this dptwin reads lesson schema 1, got {}", v));
  c.claim = in.get_string("claim");
  c.lesson_claim = static_cast<int>(in.get_positive_int("lesson_claim"));
  c.check = in.get_string("check");
  const auto& checks = known_checks();
  if (std::find(checks.begin(), checks.end(), c.check) == checks.end())
    in.fail("check", fmt::format("unknown check '{}' (known: {})", c.check, fmt::join(checks, ", ")));
  c.hardware = in.opt_string("hardware").value_or("");
  c.model = in.opt_string("model").value_or("");
  if (auto d = in.opt_int("devices")) {
    in.require_positive("devices", static_cast<double>(*d));
    c.devices = static_cast<int>(*d);
  }
  if (in.has("devices_sweep"))
    for (auto d : in.get_int_list("devices_sweep")) {
      in.require_positive("devices_sweep", static_cast<double>(d));
      c.devices_sweep.push_back(static_cast<int>(d));
    }
  if (auto b = in.opt_int("batch")) {
    in.require_positive("batch", static_cast<double>(*b));
    c.batch = *b;
  }
  if (auto b = in.opt_int("batch_per_device")) {
    in.require_positive("batch_per_device", static_cast<double>(*b));
    c.batch_per_device = *b;
  }
  c.threshold = in.opt_double("threshold");
  in.finish();
  // What each check needs, named by key so a file says which line to fix.
  auto need = [&](bool ok, const std::string& key) {
    if (!ok) in.fail(key, fmt::format("check '{}' needs this key", c.check));
  };
  if (c.check == "split") {
    need(c.devices.has_value(), "devices");
    need(c.batch.has_value(), "batch");
  } else {
    need(!c.hardware.empty(), "hardware");
    need(!c.model.empty(), "model");
    need(c.batch_per_device.has_value(), "batch_per_device");
    if (c.check == "dp_scaling_falls_behind") need(c.devices_sweep.size() >= 2, "devices_sweep");
    else if (c.check != "dp_two_gpus_acceptable") need(c.devices.has_value(), "devices");
    if (c.check == "dp_scaling_falls_behind" || c.check == "ddp_near_linear" || c.check == "dp_two_gpus_acceptable")
      need(c.threshold.has_value(), "threshold");
  }
  return c;
}

std::vector<Claim> load_claims(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<Claim> out;
  for (const auto& f : files) out.push_back(load_claim(f));
  // In the lesson's order.
  std::stable_sort(out.begin(), out.end(), [](const Claim& a, const Claim& b) { return a.lesson_claim < b.lesson_claim; });
  return out;
}

namespace {

// One prediction of the claim's model on its hardware.
class Predictor {
 public:
  Predictor(const Claim& c, const LessonLibrary& lib)
      : hw_(sim::load_hardware(c.hardware, lib.hardware_dir)), model_(load_model(c.model, lib.models_dir)) {}

  StepReport run(StrategyKind kind, int devices, std::int64_t batch_per_device) {
    const auto key = std::make_tuple(static_cast<int>(kind), devices, batch_per_device);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    PredictConfig p;
    p.strategy = kind;
    p.devices = devices;
    p.nodes = 1;
    p.batch_per_device = batch_per_device;
    p.model_name = model_.name;
    p.input_features = model_.input_features;
    p.output_features = model_output_features(model_);
    p.single_device_baseline = kind != StrategyKind::single;
    // f32 as `dptwin predict` runs it: PyTorch's defaults (TF32 convolutions on Ampere and
    // later), so a claim's figures are predict's for the same configuration. (Until
    // 2026-12-07 the lesson built its model without a precision: FP32 convolutions, and
    // ResNet-50's DDP on 8 A100s at 94.2 % where predict said 89.9 %.)
    const Precision precision = precision_of_dtype(DType::f32);
    p.precision = precision;
    // predict's default optimizer too: torch.optim.SGD with PyTorch 2.x's foreach kernels.
    p.optimizer = [](std::vector<NamedParameter> params) {
      return make_sgd(std::move(params), SgdOptions{}, OptimizerImpl::foreach);
    };
    const ModelDescription desc = model_;
    StepReport r = predict_step(
        hw_, [desc, precision](Device& d) { return make_cost_only_model(desc, d, precision, MemoryFormat::contiguous); },
        p);
    cache_.emplace(key, r);
    return r;
  }
  const sim::HardwareSpec& hardware() const { return hw_; }
  const ModelDescription& model() const { return model_; }

 private:
  sim::HardwareSpec hw_;
  ModelDescription model_;
  std::map<std::tuple<int, int, std::int64_t>, StepReport> cache_;
};

std::string percent(double x) { return fmt::format("{:.1f} %", 100.0 * x); }

std::string step_summary(const StepReport& r) {
  return fmt::format(
      "step {:.2f} ms (compute {:.2f}, exposed communication {:.2f}, dispatch {:.2f}, interference {:.2f}, optimizer "
      "{:.2f})",
      1e3 * *r.step_time_s, 1e3 * r.breakdown_s.compute, 1e3 * r.breakdown_s.exposed_communication,
      1e3 * r.breakdown_s.dispatch, 1e3 * r.breakdown_s.interference, 1e3 * r.breakdown_s.optimizer);
}

void require_ran(const StepReport& r, const Claim& c) {
  if (!r.step_time_s)
    throw std::runtime_error(fmt::format("{}: {} on {} GPUs does not fit: {}", c.file, r.strategy, r.devices,
                                         r.out_of_memory ? r.out_of_memory->message : std::string("no step time")));
}

Verdict check_split(const Claim& c) {
  // DataParallel for real on the host backend: a small MLP, the claim's batch.
  const int n = *c.devices;
  const std::int64_t batch = *c.batch;
  HostBackend host(n);
  StrategyOptions so;
  so.kind = StrategyKind::data_parallel;
  const MlpSpec spec = parse_mlp_spec("mlp:8-16-2");
  auto strategy = make_strategy(host, so, [spec](Device& d) { return make_mlp(spec, d, DType::f32, 1); },
                                [](std::vector<NamedParameter> p) { return make_sgd(std::move(p), SgdOptions{}); });
  Tensor x = Tensor::zeros(host.host_memory(), {batch, 8}, DType::f32, MemoryCategory::inputs);
  Tensor y = Tensor::zeros(host.host_memory(), {batch, 2}, DType::f32, MemoryCategory::inputs);
  const StepResult r = strategy->train_step(x, y);
  const std::vector<std::int64_t> chunks = chunk_sizes(batch, n);
  std::vector<std::int64_t> ran = r.samples_per_device;
  // Devices that got no chunk report 0 samples; compare the used ones.
  while (ran.size() > chunks.size() && ran.back() == 0) ran.pop_back();
  // The lesson's claim: DataParallel splits the batch evenly along dim 0, as torch.chunk
  // does when the batch divides (64 on 2: 32 + 32). It passes when the devices ran
  // torch.chunk's split and that split is even over every device; the numbers say which
  // part failed (a FAIL with 2 + 2 + 1 + 0 of 5 on 4 read as agreeing with torch.chunk).
  const bool even = static_cast<int>(chunks.size()) == n &&
                    std::all_of(chunks.begin(), chunks.end(), [&](auto s) { return s == chunks[0]; });
  Verdict v{c.file, c.claim, ran == chunks && even, ""};
  v.numbers = fmt::format("DataParallel on {} host devices processed {} of a batch of {} (torch.chunk gives {}{})", n,
                          fmt::join(r.samples_per_device, " + "), batch, fmt::join(chunks, " + "),
                          ran != chunks ? ": the devices did not run torch.chunk's split"
                          : even        ? ""
                                        : fmt::format(": not an even split over {} devices, which the claim is", n));
  return v;
}

Verdict check_gpu0_extra(const Claim& c, Predictor& p) {
  const StepReport r = p.run(StrategyKind::data_parallel, *c.devices, *c.batch_per_device);
  require_ran(r, c);
  Bytes others = 0;
  for (size_t i = 1; i < r.devices_detail.size(); ++i) others = std::max(others, r.devices_detail[i].peak_memory_bytes);
  const auto& g0 = r.devices_detail.at(0);
  std::string extra;
  for (const auto& [cat, bytes] : g0.memory_breakdown_bytes) {
    Bytes other = 0;
    if (r.devices_detail.size() > 1)
      if (auto it = r.devices_detail[1].memory_breakdown_bytes.find(cat); it != r.devices_detail[1].memory_breakdown_bytes.end())
        other = it->second;
    if (bytes > other) extra += fmt::format("{}{} +{}", extra.empty() ? "" : ", ", cat, bytes_text(bytes - other));
  }
  Verdict v{c.file, c.claim, g0.peak_memory_bytes > others, ""};
  v.numbers = fmt::format("{} x {}, {} at {} per GPU: GPU 0 peak {}, other GPUs at most {} (+{}, "
                          "+{}); GPU 0's extra: {}",
                          *c.devices, p.hardware().gpu.name, p.model().name, *c.batch_per_device,
                          bytes_text(g0.peak_memory_bytes), bytes_text(others), bytes_text(g0.peak_memory_bytes - others),
                          percent(static_cast<double>(g0.peak_memory_bytes - others) / static_cast<double>(std::max<Bytes>(others, 1))),
                          extra.empty() ? "none" : extra);
  return v;
}

Verdict check_oom_first(const Claim& c, Predictor& p) {
  const StepReport dp = p.run(StrategyKind::data_parallel, *c.devices, *c.batch_per_device);
  const StepReport ddp = p.run(StrategyKind::ddp, *c.devices, *c.batch_per_device);
  const bool dp_oom_gpu0 = dp.out_of_memory && dp.out_of_memory->device == "sim:gpu0";
  Bytes ddp_peak = 0;
  for (const auto& d : ddp.devices_detail) ddp_peak = std::max(ddp_peak, d.peak_memory_bytes);
  Bytes others = 0;
  for (size_t i = 1; i < dp.devices_detail.size(); ++i) others = std::max(others, dp.devices_detail[i].peak_memory_bytes);
  Verdict v{c.file, c.claim, dp_oom_gpu0 && !ddp.out_of_memory, ""};
  const double cap = gib(p.hardware().gpu.memory_bytes);
  v.numbers = fmt::format(
      "{} x {} ({:.1f} GiB), {} at {} per GPU: DataParallel {}; its other GPUs peaked at {:.3f} GiB; DDP {}",
      *c.devices, p.hardware().gpu.name, cap, p.model().name, *c.batch_per_device,
      dp.out_of_memory ? fmt::format("ran out of memory on {} ({})", dp.out_of_memory->device,
                                     [&] {
                                       std::string s;
                                       for (const auto& [k, b] : dp.out_of_memory->memory_breakdown_bytes)
                                         s += fmt::format("{}{} {}", s.empty() ? "" : ", ", k, bytes_text(b));
                                       return s;
                                     }())
                       : std::string("fits"),
      gib(others),
      ddp.out_of_memory ? fmt::format("ran out of memory on {}", ddp.out_of_memory->device)
                        : fmt::format("fits, {:.3f} GiB peak on every GPU", gib(ddp_peak)));
  return v;
}

Verdict check_dp_scaling(const Claim& c, Predictor& p) {
  std::vector<std::string> parts;
  std::vector<double> eff;
  for (int n : c.devices_sweep) {
    const StepReport r = p.run(StrategyKind::data_parallel, n, *c.batch_per_device);
    require_ran(r, c);
    const double e = n == 1 ? 1.0 : r.scaling_efficiency.value_or(0.0);
    eff.push_back(e);
    parts.push_back(fmt::format("{}: {}", n, percent(e)));
  }
  const int top = c.devices_sweep.back();
  const StepReport ddp = p.run(StrategyKind::ddp, top, *c.batch_per_device);
  require_ran(ddp, c);
  const double ddp_eff = ddp.scaling_efficiency.value_or(0.0);
  // Falls behind: never rises as GPUs are added (within 0.5 % for rounding of batches),
  // ends below the threshold, while DDP at the same count stays at or above it.
  bool falling = true;
  for (size_t i = 1; i < eff.size(); ++i) falling = falling && eff[i] <= eff[i - 1] + 0.005;
  Verdict v{c.file, c.claim, falling && eff.back() < *c.threshold && ddp_eff >= *c.threshold, ""};
  v.numbers = fmt::format("{} on {}, {} per GPU: DataParallel scaling efficiency {}; DDP on {}: {} (threshold {})",
                          p.model().name, p.hardware().name, *c.batch_per_device, fmt::join(parts, ", "), top,
                          percent(ddp_eff), percent(*c.threshold));
  return v;
}

Verdict check_ddp_linear(const Claim& c, Predictor& p) {
  const StepReport r = p.run(StrategyKind::ddp, *c.devices, *c.batch_per_device);
  require_ran(r, c);
  const double e = r.scaling_efficiency.value_or(0.0);
  Verdict v{c.file, c.claim, e >= *c.threshold, ""};
  v.numbers = fmt::format("DDP, {} on {} x {} ({}), {} per GPU: {:.0f} samples/s vs {:.0f} on one GPU: efficiency {} "
                          "(threshold {}); {}",
                          p.model().name, *c.devices, p.hardware().gpu.name, p.hardware().name, *c.batch_per_device,
                          *r.throughput_samples_per_s,
                          static_cast<double>(*c.batch_per_device) / r.single_device_step_time_s.value_or(1.0),
                          percent(e), percent(*c.threshold), step_summary(r));
  return v;
}

Verdict check_dp_two(const Claim& c, Predictor& p) {
  const StepReport dp = p.run(StrategyKind::data_parallel, 2, *c.batch_per_device);
  const StepReport ddp = p.run(StrategyKind::ddp, 2, *c.batch_per_device);
  require_ran(dp, c);
  require_ran(ddp, c);
  const double ratio = *dp.throughput_samples_per_s / *ddp.throughput_samples_per_s;
  Verdict v{c.file, c.claim, ratio >= 1.0 - *c.threshold, ""};
  v.numbers = fmt::format("{} on 2 x {} ({}), {} per GPU: DataParallel {:.0f} samples/s, DDP {:.0f} samples/s: "
                          "DataParallel reaches {} of DDP (needs >= {}); DataParallel efficiency {}",
                          p.model().name, p.hardware().gpu.name, p.hardware().name, *c.batch_per_device,
                          *dp.throughput_samples_per_s, *ddp.throughput_samples_per_s, percent(ratio),
                          percent(1.0 - *c.threshold), percent(dp.scaling_efficiency.value_or(0.0)));
  return v;
}

}  // namespace

Verdict evaluate(const Claim& c, const LessonLibrary& lib) {
  if (c.check == "split") return check_split(c);
  Predictor p(c, lib);
  if (c.check == "dp_gpu0_extra_memory") return check_gpu0_extra(c, p);
  if (c.check == "dp_gpu0_oom_first") return check_oom_first(c, p);
  if (c.check == "dp_scaling_falls_behind") return check_dp_scaling(c, p);
  if (c.check == "ddp_near_linear") return check_ddp_linear(c, p);
  return check_dp_two(c, p);
}

}  // namespace dpt::lesson
