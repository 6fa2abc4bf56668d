// `dptwin train`: trains an MLP on the host or CUDA backend with the single, dp or ddp
// strategy, printing the loss of every step (or one JSON document with --json).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/parallel/trainer.hpp"
#include "scenarios/cli/cli_docs.hpp"
#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/cli/flag_limits.hpp"
#include "scenarios/cli/train_device.hpp"

namespace dpt::cli::cmd_train {  // a namespace per command: unity batches join anonymous ones
namespace {

// Everything the flags set; defaults are PyTorch's where PyTorch has one.
struct TrainFlags {
  std::string model;                      // --model mlp:IN-H1-...-OUT
  std::string activation = "relu";        // --activation relu|gelu
  bool layernorm = false;                 // --layernorm
  std::string loss = "mse";               // --loss mse|ce
  std::string optimizer = "sgd";          // --optimizer sgd|adamw
  std::optional<double> lr;               // --lr (sgd 0.01, adamw 1e-3)
  std::optional<double> momentum;         // --momentum (sgd only; 0)
  std::optional<double> weight_decay;     // --weight-decay (sgd 0, adamw 0.01)
  std::optional<std::int64_t> batch;      // --batch: global batch of one step
  std::optional<std::int64_t> batch_per_device;  // --batch-per-device: per-rank batch
  int steps = 10;                         // --steps
  std::int64_t seed = 0;                  // --seed (not negative)
  std::optional<std::string> dtype;       // --dtype f32|f64
  std::string precision = "f32";          // --precision f32|bf16-amp|f16-amp (autocast on Linear)
  std::string activation_checkpointing = "none";  // --activation-checkpointing none|every|N
  std::optional<std::string> checkpoint;  // --checkpoint OUT.safetensors
  std::optional<std::string> init;        // --init IN.safetensors
  std::optional<std::string> init_strip_prefix;  // --init-strip-prefix PREFIX
  std::optional<std::string> data;        // --data DATA.safetensors
  std::string strategy = "single";        // --strategy single|dp|ddp
  std::optional<int> devices;             // --devices N (single 1, dp/ddp 2)
  std::optional<double> bucket_cap_mb;    // --bucket-cap-mb (ddp; 25)
  std::optional<std::string> uneven;      // --uneven pytorch|weighted (ddp; pytorch)
  std::optional<int> accumulate;          // --accumulate K (ddp; 1)
  std::optional<std::string> comm_hook;   // --comm-hook none|fp16_compress|bf16_compress (ddp; none)
  bool shuffle = false;                   // --shuffle
  bool json = false;                      // --json
  TrainDeviceFlags device;                // --backend host|cuda, --report, --trace, --tf32 (train_device.hpp)
};

constexpr std::int64_t kDefaultBatch = 32;

// A lower bound on the host memory a run takes, in bytes (double: the product of two
// huge widths must not wrap): every device's replica of the parameters and
// gradients, the optimizer state, the activations of its share of the batch
// (forward and backward) and the synthetic data set.
double host_bytes_needed(const TrainConfig& c, int devices, LossKind loss) {
  double params = 0, widths = 0;
  const auto& w = c.model.widths;
  for (size_t i = 0; i + 1 < w.size(); ++i)
    params += static_cast<double>(w[i]) * static_cast<double>(w[i + 1]) + static_cast<double>(w[i + 1]);
  for (auto x : w) widths += static_cast<double>(x);
  const double state = c.optimizer == OptimizerKind::adamw ? 2 : (c.sgd.momentum > 0 ? 1 : 0);
  const double element = c.dtype && *c.dtype == DType::f64 ? 8 : 4;
  const double per_device_batch = std::ceil(static_cast<double>(c.batch) / devices);
  const double samples = c.data_path ? 0.0 : static_cast<double>(std::max(c.batch, c.synthetic_samples));
  const double label = loss == LossKind::cross_entropy ? 1 : static_cast<double>(w.back());
  return element * (devices * (params * (2 + state) + 2 * per_device_batch * widths) +
                    samples * (static_cast<double>(w.front()) + label));
}

// --precision: f32 (no autocast), bf16-amp or f16-amp (autocast's low type for Linear).
std::optional<DType> autocast_from_flag(const std::string& text) {
  if (text == "f32") return std::nullopt;
  if (text == "bf16-amp") return DType::bf16;
  if (text == "f16-amp") return DType::f16;
  throw std::invalid_argument(fmt::format("--precision '{}': train runs f32, bf16-amp or f16-amp (f64 is --dtype "
                                          "f64; tf32 is --tf32 on --backend cuda; pure bf16 and f16-master are cost-only: predict, "
                                          "sweep, plan)",
                                          text));
}

// --activation-checkpointing, as the scenario key checkpoint: none (0), every (each
// layer its own segment: 1) or N layers per segment.
size_t checkpoint_layers_from_flag(const std::string& text) {
  if (text == "none") return 0;
  if (text == "every") return 1;
  int layers = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), layers);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || layers < 1 || layers > 1000000)
    throw std::invalid_argument(fmt::format("--activation-checkpointing '{}': expected none, every, or N layers per "
                                            "segment (1..1000000)",
                                            text));
  return static_cast<size_t>(layers);
}

// --devices (single 1, dp/ddp 2 by default): the strategy's device ids; returns the count.
int configure_devices(const TrainFlags& f, TrainConfig& c) {
  const int devices = f.devices.value_or(c.strategy.kind == StrategyKind::single ? 1 : 2);
  if (devices < 1) throw std::invalid_argument(fmt::format("--devices must be at least 1, got {}", devices));
  if (c.strategy.kind == StrategyKind::single && devices != 1)
    throw std::invalid_argument(
        fmt::format("--devices {} needs --strategy dp or ddp (single uses one device)", devices));
  if (f.device.backend == "host")
    limits::require_int_in("--devices", devices, 1, limits::kMaxHostDevices, "host devices are worker threads");
  for (int i = 0; i < devices; ++i) c.strategy.device_ids.push_back(i);
  return devices;
}

// --lr, --momentum, --weight-decay with PyTorch's defaults for the chosen optimizer.
void configure_optimizer(const TrainFlags& f, TrainConfig& c) {
  if (f.lr && *f.lr < 0) throw std::invalid_argument(fmt::format("--lr must not be negative, got {}", *f.lr));
  if (f.weight_decay && *f.weight_decay < 0)
    throw std::invalid_argument(fmt::format("--weight-decay must not be negative, got {}", *f.weight_decay));
  // Finite, and below what any recipe uses: larger values only train to NaN.
  if (f.lr) limits::require_finite_in("--lr", *f.lr, 0, 1e6);
  if (f.weight_decay) limits::require_finite_in("--weight-decay", *f.weight_decay, 0, 1e6);
  if (c.optimizer == OptimizerKind::sgd) {
    c.sgd.lr = f.lr.value_or(0.01);
    c.sgd.momentum = f.momentum.value_or(0.0);
    c.sgd.weight_decay = f.weight_decay.value_or(0.0);
    if (!(c.sgd.momentum >= 0))
      throw std::invalid_argument(fmt::format("--momentum must not be negative, got {}", c.sgd.momentum));
    limits::require_finite_in("--momentum", c.sgd.momentum, 0, 1, "a momentum above 1 makes the buffer grow");
  } else {
    if (f.momentum) throw std::invalid_argument("--momentum applies to --optimizer sgd only (AdamW has betas)");
    c.adamw.lr = f.lr.value_or(1e-3);
    c.adamw.weight_decay = f.weight_decay.value_or(0.01);
  }
}

// The global batch of one step from --batch or --batch-per-device (which must agree
// when both are given), else the default.
std::int64_t global_batch(const TrainFlags& f, int devices) {
  if (f.batch_per_device && *f.batch_per_device < 1)
    throw std::invalid_argument(fmt::format("--batch-per-device must be at least 1, got {}", *f.batch_per_device));
  if (f.batch && *f.batch < 1)
    throw std::invalid_argument(fmt::format("--batch must be at least 1, got {}", *f.batch));
  if (f.batch && f.batch_per_device && *f.batch != *f.batch_per_device * devices)
    throw std::invalid_argument(fmt::format("--batch {} disagrees with --batch-per-device {} on {} devices ({} in all); "
                                            "give one of them",
                                            *f.batch, *f.batch_per_device, devices, *f.batch_per_device * devices));
  return f.batch ? *f.batch : f.batch_per_device ? *f.batch_per_device * devices : kDefaultBatch;
}

// --bucket-cap-mb, --uneven, --accumulate and --comm-hook: DDP's options, refused
// for the other strategies.
void configure_ddp(const TrainFlags& f, TrainConfig& c) {
  const bool ddp = c.strategy.kind == StrategyKind::ddp;
  if (f.bucket_cap_mb) {
    if (!ddp) throw std::invalid_argument("--bucket-cap-mb applies to --strategy ddp only");
    if (!(*f.bucket_cap_mb > 0))
      throw std::invalid_argument(fmt::format("--bucket-cap-mb must be positive, got {}", *f.bucket_cap_mb));
    limits::require_finite_in("--bucket-cap-mb", *f.bucket_cap_mb, limits::kMinBucketCapMb, limits::kMaxBucketCapMb,
                              "a bucket holds at least one byte and at most 1 TiB");
    c.strategy.bucket_cap_mb = *f.bucket_cap_mb;
  }
  if (f.uneven) {
    if (!ddp) throw std::invalid_argument("--uneven applies to --strategy ddp only");
    c.strategy.uneven = *f.uneven == "weighted" ? UnevenMode::weighted : UnevenMode::pytorch;
  }
  if (f.accumulate) {
    if (!ddp) throw std::invalid_argument(fmt::format("--accumulate {} applies to --strategy ddp only", *f.accumulate));
    limits::require_int_in("--accumulate", *f.accumulate, 1, 1 << 20, "micro-batches per optimizer step");
    c.strategy.accumulate = *f.accumulate;
  }
  if (f.comm_hook) {
    if (!ddp) throw std::invalid_argument(fmt::format("--comm-hook {} applies to --strategy ddp only", *f.comm_hook));
    try {
      c.strategy.comm_hook = comm_hook_from_name(*f.comm_hook);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("--comm-hook: {}", e.what()));
    }
    if (c.strategy.comm_hook.kind == CommHook::powersgd)
      throw std::invalid_argument(fmt::format("--comm-hook {}: PowerSGD is cost-only (predict, sweep, plan); train "
                                              "runs none, fp16_compress and bf16_compress",
                                              *f.comm_hook));
    if (c.strategy.comm_hook.kind != CommHook::none && f.device.backend != "host")
      throw std::invalid_argument(fmt::format("--comm-hook {}: the compress hooks' numerics run on --backend host "
                                              "only",
                                              *f.comm_hook));
  }
}

// The whole run's configuration from the flags, each checked with an error naming
// it; devices_out receives the device count.
TrainConfig config_from(const TrainFlags& f, int& devices_out) {
  TrainConfig c;
  try {
    c.model = parse_mlp_spec(f.model);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("--model: {}", e.what()));
  }
  c.model.activation = f.activation == "gelu" ? Activation::gelu : Activation::relu;
  c.model.layernorm = f.layernorm;
  c.loss = loss_kind_from_name(f.loss);
  c.optimizer = optimizer_kind_from_name(f.optimizer);
  c.strategy.kind = strategy_kind_from_name(f.strategy);
  const int devices = configure_devices(f, c);
  devices_out = devices;
  configure_optimizer(f, c);
  c.batch = global_batch(f, devices);

  if (f.steps < 0) throw std::invalid_argument(fmt::format("--steps must not be negative, got {}", f.steps));
  c.steps = f.steps;
  if (f.seed < 0) throw std::invalid_argument(fmt::format("--seed must not be negative, got {}", f.seed));
  c.seed = static_cast<std::uint64_t>(f.seed);
  if (f.dtype) {
    c.dtype = dtype_from_name(*f.dtype);
    if (!dtype_is_floating(*c.dtype))
      throw std::invalid_argument(fmt::format("--dtype must be f32 or f64, got {}", *f.dtype));
  }
  c.autocast = autocast_from_flag(f.precision);
  c.checkpoint_segment_layers = checkpoint_layers_from_flag(f.activation_checkpointing);
  c.shuffle = f.shuffle;
  c.init_path = f.init;
  if (f.init_strip_prefix) {
    if (!f.init) throw std::invalid_argument("--init-strip-prefix needs --init (the state dict whose keys it strips)");
    if (f.init_strip_prefix->empty()) throw std::invalid_argument("--init-strip-prefix: empty prefix");
    c.init_strip_prefix = *f.init_strip_prefix;
  }
  c.data_path = f.data;
  c.checkpoint_path = f.checkpoint;
  // The checkpoint never replaces the training data. It may replace --init (resuming and
  // saving in place, as torch.save over the loaded file does: written atomically, after the
  // state dict was read).
  limits::refuse_shared_files({{"--checkpoint", f.checkpoint.value_or("")}}, {{"--data", f.data.value_or("")}});
  configure_ddp(f, c);
  if (f.device.backend == "host")
    limits::require_memory(fmt::format("--model {} with --batch {} on {} device(s): parameters, gradients, optimizer "
                                       "state, activations and data",
                                       f.model, c.batch, devices),
                           host_bytes_needed(c, devices, c.loss));
  return c;
}

// "64 (32 per device x 2)" or "65 (33+32 over 2 devices)", from what the first step did.
std::string batch_text(std::int64_t batch, const std::vector<std::int64_t>& per_device) {
  if (per_device.size() <= 1) return fmt::format("{}", batch);
  bool even = true;
  for (auto n : per_device) even = even && n == per_device[0];
  if (even) return fmt::format("{} ({} per device x {})", batch, per_device[0], per_device.size());
  // torch.chunk can leave devices without a sample (5 on 4: 2+2+1, and DataParallel runs 3
  // replicas): say how many computed (an outside-user review read "on 4 device(s)").
  const auto used = std::count_if(per_device.begin(), per_device.end(), [](std::int64_t n) { return n > 0; });
  return fmt::format("{} ({} over {} devices{})", batch, fmt::join(per_device, "+"), per_device.size(),
                     used < static_cast<std::ptrdiff_t>(per_device.size())
                         ? fmt::format(", {} with samples: torch.chunk gives {} chunks", used, used)
                         : "");
}

int run_train(const TrainFlags& f) {
  int devices = 1;
  const TrainConfig c = config_from(f, devices);
  TrainDevice device(f.device, devices);
  Backend& backend = device.backend();
  nlohmann::json steps = nlohmann::json::array();
  std::vector<std::int64_t> first_split;
  int nonfinite_step = 0;  // the first step whose loss is NaN or inf
  const TrainResult r = train(backend, c, [&](const StepLog& s) {
    device.after_step(s, c.steps);
    if (!std::isfinite(s.loss) && nonfinite_step == 0) nonfinite_step = s.step;
    if (s.step == 1) first_split = s.result->samples_per_device;
    if (f.json) {
      steps.push_back({{"step", s.step}, {"loss", s.loss}, {"step_s", s.step_s},
                       {"samples_per_device", s.result->samples_per_device}});
    } else {
      if (s.step == 1)
        std::cout << fmt::format("batch {} on {} device(s), strategy {}{}{}\n", batch_text(c.batch * c.strategy.accumulate, first_split),
                                 devices, f.strategy,
                                 c.strategy.accumulate > 1
                                     ? fmt::format(", {} micro-batches of {} per step (no_sync for {})",
                                                   c.strategy.accumulate, c.batch, c.strategy.accumulate - 1)
                                     : "",
                                 c.strategy.comm_hook.kind != CommHook::none
                                     ? ", comm hook " + comm_hook_name(c.strategy.comm_hook)
                                     : "");
      if (s.step == 1 && c.autocast)
        std::cout << fmt::format("precision {}: Linear in {} with f32 accumulation, f32 master weights and "
                                 "gradients{}{}\n",
                                 f.precision, dtype_name(*c.autocast),
                                 *c.autocast == DType::f16 ? ", GradScaler" : "",
                                 f.device.backend == "host" ? " (bf16/f16 rounding emulated on the CPU)" : "");
      // NaN as PyTorch prints it ("nan", not fmt's sign-carrying "-nan").
      std::cout << fmt::format("step {} loss {}\n", s.step,
                               std::isnan(s.loss) ? std::string("nan") : fmt::format("{:.9g}", s.loss))
                << std::flush;
    }
  });
  device.finish(c, f.model, f.strategy, devices, first_split, r.dtype);
  // A run whose loss went NaN or inf ends as PyTorch's would (exit 0, the same numbers), but
  // says so and where to look (an outside-user review: NaN weights in --init printed "loss
  // nan" ten times and nothing else).
  std::vector<std::string> warnings = r.warnings;
  if (nonfinite_step > 0)
    warnings.push_back(fmt::format(
        "the loss is not finite from step {} on: check --init and --data for NaN or inf values, or lower --lr ({:g})",
        nonfinite_step, c.optimizer == OptimizerKind::sgd ? c.sgd.lr : c.adamw.lr));
  if (f.json) {
    // One micro-batch's split, as "batch" is one micro-batch's (the K equal micro-batches of
    // an accumulated step split alike; the step's result sums them).
    std::vector<std::int64_t> micro_split = first_split;
    for (auto& n : micro_split) n /= std::max(1, c.strategy.accumulate);
    nlohmann::json doc{
        {"command", "train"},
        {"backend", f.device.backend},
        {"model", f.model},
        {"activation", f.activation},
        {"layernorm", f.layernorm},
        {"parameters", r.parameters},
        {"loss", f.loss},
        {"optimizer", f.optimizer},
        {"lr", c.optimizer == OptimizerKind::sgd ? c.sgd.lr : c.adamw.lr},
        {"strategy", f.strategy},
        {"devices", devices},
        {"batch", c.batch},
        {"accumulate", c.strategy.accumulate},
        {"comm_hook", comm_hook_name(c.strategy.comm_hook)},
        // DDP's uneven-batch loss (pytorch: the mean of per-rank means) and the data order:
        // both change the losses (an outside-user review found neither in the JSON).
        {"uneven", f.strategy == "ddp" ? nlohmann::json(c.strategy.uneven == UnevenMode::weighted ? "weighted" : "pytorch")
                                       : nlohmann::json(nullptr)},
        {"shuffle", c.shuffle},
        {"batch_per_device", micro_split},
        {"dtype", dtype_name(r.dtype)},
        {"precision", f.precision},
        {"activation_checkpointing", f.activation_checkpointing},
        {"seed", c.seed},
        {"data", c.data_path ? nlohmann::json(*c.data_path) : nlohmann::json("synthetic")},
        {"data_samples", r.data_samples},
        {"init", c.init_path ? nlohmann::json(*c.init_path) : nlohmann::json(nullptr)},
        {"checkpoint", c.checkpoint_path ? nlohmann::json(*c.checkpoint_path) : nlohmann::json(nullptr)},
        {"warnings", warnings},
        {"grad_scaler", r.loss_scale ? nlohmann::json{{"scale", *r.loss_scale}, {"skipped_steps", r.skipped_steps}}
                                     : nlohmann::json(nullptr)},
        {"steps", steps},
    };
    print_json(doc);
  } else {
    for (auto& w : warnings) std::cerr << "warning: " << w << "\n";
    if (r.loss_scale)
      std::cout << fmt::format("GradScaler: loss scale {:g}, {} step(s) skipped on inf/NaN gradients\n", *r.loss_scale,
                               r.skipped_steps);
    if (c.checkpoint_path) std::cout << "checkpoint written: " << *c.checkpoint_path << "\n";
  }
  return kExitOk;
}

Registration reg{"train", [](CLI::App& parent) -> RunFn {
  auto flags = std::make_shared<TrainFlags>();
  CLI::App* app = parent.add_subcommand(
      "train", "Train an MLP on the host or CUDA backend (single, dp or ddp); prints the loss of every step");
  app->add_option("--model", flags->model, "Model: mlp:IN-H1-...-OUT (nn.Sequential of Linear layers)")->required();
  app->add_option("--activation", flags->activation, "Activation between Linear layers")
      ->check(CLI::IsMember({"relu", "gelu"}))
      ->capture_default_str();
  app->add_flag("--layernorm", flags->layernorm, "LayerNorm after each hidden Linear, before the activation");
  app->add_option("--loss", flags->loss, "Loss: mse, or ce (softmax cross-entropy on int64 labels)")
      ->check(CLI::IsMember({"mse", "ce"}))
      ->capture_default_str();
  app->add_option("--optimizer", flags->optimizer, "Optimizer, with PyTorch's update formulas")
      ->check(CLI::IsMember({"sgd", "adamw"}))
      ->capture_default_str();
  app->add_option("--lr", flags->lr, "Learning rate [sgd 0.01, adamw 0.001]");
  app->add_option("--momentum", flags->momentum, "SGD momentum [0]");
  app->add_option("--weight-decay", flags->weight_decay, "Weight decay [sgd 0, adamw 0.01 as PyTorch]");
  app->add_option("--batch", flags->batch, "Global batch of one step, all devices together, as a DataParallel script "
                                           "writes it [32]");
  app->add_option("--batch-per-device", flags->batch_per_device,
                  "Per-device batch, as a DDP script writes it; the global batch is this times --devices");
  app->add_option("--steps", flags->steps, "Training steps")->capture_default_str();
  app->add_option("--seed", flags->seed, "Seed of the initial weights and the synthetic data")->capture_default_str();
  app->add_option("--dtype", flags->dtype, "f32 or f64 [f32, or the dtype of the --init file]")
      ->check(CLI::IsMember({"f32", "f64"}));
  with_choices(app->add_option("--precision", flags->precision,
                               "f32, or autocast as torch.autocast: bf16-amp, f16-amp (with a GradScaler): Linear in "
                               "bf16/f16 with f32 accumulation, f32 master weights and gradients; emulated rounding "
                               "on the host"),
               {"f32", "bf16-amp", "f16-amp"})
      ->capture_default_str();
  with_choices(app->add_option("--activation-checkpointing", flags->activation_checkpointing,
                               "Recompute activations in backward as checkpoint_sequential: none, every (each layer a "
                               "segment) or N layers per segment (the scenario key checkpoint:)"),
               {"none", "every"})
      ->capture_default_str();
  app->add_option("--checkpoint", flags->checkpoint,
                  "Write the final state dict here (safetensors; dp and ddp names carry the 'module.' prefix)");
  app->add_option("--init", flags->init,
                  "Start from this state dict (safetensors, strict load); dp and ddp also take a DataParallel/DDP "
                  "checkpoint (every key 'module.'), as the wrapper's load_state_dict does");
  app->add_option("--init-strip-prefix", flags->init_strip_prefix,
                  "Remove this prefix from every --init key that has it before loading, as "
                  "consume_prefix_in_state_dict_if_present ('module.': a single-device run from a dp/ddp checkpoint)");
  app->add_option("--data", flags->data, "Train on tensors 'x' [N, IN] and 'y' ([N, OUT] for mse, [N] int labels "
                                         "for ce), consumed in order and wrapping; synthetic data from --seed "
                                         "without it");
  app->add_option("--strategy", flags->strategy, "single, dp (DataParallel) or ddp (DistributedDataParallel)")
      ->check(CLI::IsMember({"single", "dp", "ddp"}))
      ->capture_default_str();
  app->add_option("--devices", flags->devices, "Devices: host worker threads or GPUs [single 1, dp and ddp 2]");
  app->add_option("--bucket-cap-mb", flags->bucket_cap_mb, "DDP gradient bucket cap in MiB [25, as PyTorch]");
  app->add_option("--accumulate", flags->accumulate,
                  "DDP gradient accumulation: K micro-batches of --batch per step, no_sync for K-1 [1]");
  with_choices(app->add_option("--comm-hook", flags->comm_hook,
                               "DDP comm hook: none, fp16_compress or bf16_compress (real numerics on the host) [none]"),
               {"none", "fp16_compress", "bf16_compress"});
  app->add_option("--uneven", flags->uneven, "DDP with uneven local batches: pytorch (average of per-rank means, as "
                                             "PyTorch) or weighted (the full-batch gradient) [pytorch]")
      ->check(CLI::IsMember({"pytorch", "weighted"}));
  app->add_flag("--shuffle", flags->shuffle, "Shuffle the samples on every pass over the data (seeded)");
  add_train_device_flags(app, flags->device);
  app->add_flag("--json", flags->json, "Print one JSON document (configuration and every step) instead of text");
  app->footer(
      "Example:\n"
      "  dptwin train --model mlp:16-64-4 --loss ce --optimizer adamw --lr 1e-3 --batch 64 --steps 20\n"
      "  dptwin train --model mlp:16-64-1 --strategy ddp --devices 2 --batch-per-device 32 --json\n" +
      exit_codes_help());
  return [flags] { return run_train(*flags); };
}};

}  // namespace
}  // namespace dpt::cli::cmd_train
