#include "engine/parallel/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <optional>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/core/fault_injection.hpp"
#include "engine/io/checkpoint.hpp"
#include "engine/optim/grad_scaler.hpp"
#include "engine/parallel/ddp/accumulate.hpp"
#include "engine/parallel/ddp/ddp.hpp"
#include "engine/nn/init.hpp"

namespace dpt {
namespace {

// The synthetic data and the shuffle draw from their own streams, so they do not
// shift when the model's initialisation draws change (and vice versa).
constexpr std::uint64_t kDataStream = 0x6461746173747265ULL;     // "datastre"
constexpr std::uint64_t kShuffleStream = 0x73687566666c6521ULL;  // "shuffle!"

std::uint64_t mix(std::uint64_t seed, std::uint64_t stream, std::uint64_t index = 0) {
  // splitmix64 finaliser over the combined words: nearby seeds give unrelated streams.
  std::uint64_t z = seed ^ stream ^ (index * 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Rows `idx` of a host tensor; a contiguous run is a view, anything else a copy.
Tensor take_rows(Backend& backend, const Tensor& t, const std::vector<std::int64_t>& idx) {
  const auto n = static_cast<std::int64_t>(idx.size());
  bool contiguous = true;
  for (std::int64_t i = 1; i < n && contiguous; ++i) contiguous = idx[static_cast<size_t>(i)] == idx[0] + i;
  if (n > 0 && contiguous) return t.slice_rows(idx[0], n);
  Shape shape = t.shape();
  shape[0] = n;
  Tensor out = Tensor::empty(backend.host_memory(), shape, t.dtype(), MemoryCategory::inputs);
  const Bytes row = t.dim(0) > 0 ? t.size_bytes() / t.dim(0) : 0;
  const auto* src = static_cast<const char*>(t.data());
  auto* dst = static_cast<char*>(out.data());
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * row, src + idx[static_cast<size_t>(i)] * row, static_cast<size_t>(row));
  return out;
}

DType resolve_dtype(const TrainConfig& c, const std::optional<SafetensorsFile>& init) {
  if (!init) return c.dtype.value_or(DType::f32);
  const DType file_dtype = state_dict_dtype(*init);
  // A half-precision state dict (model.half().state_dict(), a bf16 checkpoint) loads into
  // the f32 model (or --dtype f64), widened exactly, as torch's load_state_dict copies it
  // into a float model; train has no f16 or bf16 weights of its own (--precision *-amp
  // keeps f32 masters).
  if (file_dtype == DType::f16 || file_dtype == DType::bf16) return c.dtype.value_or(DType::f32);
  if (c.dtype && *c.dtype != file_dtype)
    throw std::invalid_argument(fmt::format("--dtype {} but --init {} holds {} parameters (omit --dtype to use the "
                                            "file's dtype)",
                                            dtype_name(*c.dtype), init->path, dtype_name(file_dtype)));
  return file_dtype;
}

void check_config(const TrainConfig& c) {
  if (c.batch < 1) throw std::invalid_argument(fmt::format("--batch must be at least 1, got {}", c.batch));
  if (c.steps < 0) throw std::invalid_argument(fmt::format("--steps must not be negative, got {}", c.steps));
  if (c.model.widths.size() < 2) throw std::invalid_argument("--model needs at least two widths");
  if (c.strategy.accumulate < 1 || (c.strategy.accumulate > 1 && c.strategy.kind != StrategyKind::ddp))
    throw std::invalid_argument(fmt::format("--accumulate {}: gradient accumulation (no_sync) needs --strategy ddp "
                                            "and K >= 1",
                                            c.strategy.accumulate));
  // Refused before training, not after it: a checkpoint must be a regular file.
  if (c.checkpoint_path) check_output_path(*c.checkpoint_path, OutputKind::replaceable, "--checkpoint");
}

void check_dataset(const Dataset& d, const MlpSpec& spec, LossKind loss, DType dtype, const std::string& where) {
  const std::int64_t in = spec.widths.front(), out = spec.widths.back();
  if (d.x.ndim() != 2 || d.x.dim(1) != in || d.x.dim(0) < 1)
    throw std::invalid_argument(fmt::format("{}: tensor 'x' must be [samples >= 1, {}] for the model's input "
                                            "width {}, got {}",
                                            where, in, in, shape_to_string(d.x.shape())));
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"x", &d.x}, {"y", &d.y}})
    if (t->dtype() == DType::f16 || t->dtype() == DType::bf16)
      throw std::invalid_argument(fmt::format("{}: tensor '{}' is {}; train reads f32 or f64 data (a PyTorch model "
                                              "in {} refuses {} inputs too): convert it, {}.float()",
                                              where, name, dtype_name(t->dtype()), dtype_name(dtype),
                                              dtype_name(t->dtype()), name));
  if (d.x.dtype() != dtype)
    throw std::invalid_argument(fmt::format("{}: tensor 'x' is {} but the run's dtype is {} (set --dtype {} or "
                                            "convert the data)",
                                            where, dtype_name(d.x.dtype()), dtype_name(dtype),
                                            dtype_name(d.x.dtype())));
  const std::int64_t n = d.x.dim(0);
  if (loss == LossKind::mse) {
    if (d.y.ndim() != 2 || d.y.dim(0) != n || d.y.dim(1) != out)
      throw std::invalid_argument(fmt::format("{}: tensor 'y' must be [{}, {}] regression targets for mse, got {}",
                                              where, n, out, shape_to_string(d.y.shape())));
    if (d.y.dtype() != dtype)
      throw std::invalid_argument(fmt::format("{}: tensor 'y' is {} but the run's dtype is {}", where,
                                              dtype_name(d.y.dtype()), dtype_name(dtype)));
    return;
  }
  if (d.y.ndim() != 1 || d.y.dim(0) != n || d.y.dtype() != DType::i64)
    throw std::invalid_argument(fmt::format("{}: tensor 'y' must be [{}] integer class labels for ce, got {} {}",
                                            where, n, dtype_name(d.y.dtype()), shape_to_string(d.y.shape())));
  const auto* labels = d.y.data_as<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i)
    if (labels[i] < 0 || labels[i] >= out)
      throw std::invalid_argument(fmt::format("{}: tensor 'y' sample {} has label {}, outside [0, {}) for {} "
                                              "output classes{}",
                                              where, i, labels[i], out, out,
                                              labels[i] == -100 ? " (-100 is CrossEntropyLoss's default ignore_index; "
                                                                  "ignored samples are not supported: leave them out "
                                                                  "of the data)"
                                                                : ""));
}

std::unique_ptr<Optimizer> build_optimizer(const TrainConfig& c, std::vector<NamedParameter> params) {
  std::unique_ptr<Optimizer> inner = c.optimizer != OptimizerKind::adamw ? make_sgd(params, c.sgd)
                                                                         : make_adamw(params, c.adamw);
  // f16's narrow range needs loss scaling; bf16 has f32's exponent range and runs without.
  if (c.autocast == DType::f16) return wrap_with_grad_scaler(std::move(inner), std::move(params));
  return inner;
}

// Reads a file named by a flag; its errors are prefixed with the flag.
SafetensorsFile read_for_flag(const char* flag, const std::string& path) {
  try {
    return read_safetensors(path);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", flag, e.what()));
  }
}

}  // namespace

OptimizerKind optimizer_kind_from_name(const std::string& name) {
  if (name == "sgd") return OptimizerKind::sgd;
  if (name == "adamw") return OptimizerKind::adamw;
  throw std::invalid_argument(fmt::format("unknown optimizer '{}': expected sgd or adamw", name));
}

Dataset make_synthetic_dataset(Backend& backend, const MlpSpec& spec, LossKind loss, DType dtype,
                               std::int64_t samples, std::uint64_t seed) {
  if (samples < 1) throw std::invalid_argument(fmt::format("synthetic data needs at least 1 sample, got {}", samples));
  const std::int64_t in = spec.widths.front(), out = spec.widths.back();
  Generator gen(mix(seed, kDataStream));
  std::vector<double> teacher(static_cast<size_t>(out * in));
  for (auto& a : teacher) a = gen.normal() / std::sqrt(static_cast<double>(in));
  std::vector<double> x(static_cast<size_t>(samples * in));
  for (auto& v : x) v = gen.normal();
  // z = x A^T, the teacher's output for every sample.
  std::vector<double> z(static_cast<size_t>(samples * out), 0.0);
  for (std::int64_t s = 0; s < samples; ++s)
    for (std::int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (std::int64_t i = 0; i < in; ++i)
        acc += x[static_cast<size_t>(s * in + i)] * teacher[static_cast<size_t>(o * in + i)];
      z[static_cast<size_t>(s * out + o)] = acc;
    }
  Dataset d;
  d.x = Tensor::empty(backend.host_memory(), {samples, in}, dtype, MemoryCategory::inputs);
  tensor_fill_from_f64(d.x, x);
  if (loss == LossKind::mse) {
    d.y = Tensor::empty(backend.host_memory(), {samples, out}, dtype, MemoryCategory::inputs);
    tensor_fill_from_f64(d.y, z);
  } else {
    d.y = Tensor::empty(backend.host_memory(), {samples}, DType::i64, MemoryCategory::inputs);
    auto* labels = d.y.data_as<std::int64_t>();
    for (std::int64_t s = 0; s < samples; ++s) {
      const auto row = z.begin() + s * out;
      labels[s] = std::max_element(row, row + out) - row;
    }
  }
  return d;
}

Dataset load_dataset(Backend& backend, const std::string& path, const MlpSpec& spec, LossKind loss, DType dtype) {
  const SafetensorsFile file = read_for_flag("--data", path);
  // A file without the tensors names the flag, the file and what it holds (it said only
  // "no tensor named 'x'", as if another file were meant).
  for (const char* name : {"x", "y"})
    if (!file.find(name)) {
      std::string held;
      for (const auto& t : file.tensors) held += (held.empty() ? "" : ", ") + t.name;
      throw std::invalid_argument(fmt::format("--data {}: no tensor named '{}' (the file holds {}); --data takes 'x' "
                                              "[N, IN] and 'y' ([N, OUT] for mse, [N] int labels for ce)",
                                              path, name, held.empty() ? "none" : held));
    }
  Dataset d;
  d.x = tensor_from_safetensors(file.at("x"), backend.host_memory(), MemoryCategory::inputs, &backend);
  const SafetensorsTensor& y = file.at("y");
  if (loss == LossKind::cross_entropy && y.dtype == DType::i32) {
    // Labels as PyTorch wants them: int64 class indices.
    Tensor y32 = tensor_from_safetensors(y, backend.host_memory(), MemoryCategory::workspace, &backend);
    d.y = Tensor::empty(backend.host_memory(), y32.shape(), DType::i64, MemoryCategory::inputs);
    for (Elements i = 0; i < y32.numel(); ++i) d.y.data_as<std::int64_t>()[i] = y32.data_as<std::int32_t>()[i];
  } else {
    d.y = tensor_from_safetensors(y, backend.host_memory(), MemoryCategory::inputs, &backend);
  }
  check_dataset(d, spec, loss, dtype, fmt::format("--data {}", path));
  return d;
}

std::vector<std::int64_t> batch_indices(std::int64_t step, std::int64_t batch, std::int64_t samples, bool shuffle,
                                        std::uint64_t seed) {
  if (samples < 1 || batch < 0 || step < 0)
    throw std::invalid_argument(fmt::format("batch_indices: step {}, batch {}, samples {}", step, batch, samples));
  std::vector<std::int64_t> out;
  out.reserve(static_cast<size_t>(batch));
  std::int64_t cached_epoch = -1;
  std::vector<std::int64_t> order;
  for (std::int64_t pos = step * batch; pos < (step + 1) * batch; ++pos) {
    const std::int64_t epoch = pos / samples, k = pos % samples;
    if (!shuffle) {
      out.push_back(k);
      continue;
    }
    if (epoch != cached_epoch) {
      // Fisher-Yates over 0..N-1 with this epoch's generator.
      order.resize(static_cast<size_t>(samples));
      std::iota(order.begin(), order.end(), 0);
      Generator gen(mix(seed, kShuffleStream, static_cast<std::uint64_t>(epoch)));
      for (std::int64_t i = samples - 1; i > 0; --i)
        std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(gen.randint(i + 1))]);
      cached_epoch = epoch;
    }
    out.push_back(order[static_cast<size_t>(k)]);
  }
  return out;
}

DType state_dict_dtype(const SafetensorsFile& file) {
  // Half tensors beside f32 ones (f16 weights with f32 norms, as some checkpoints keep them),
  // or f16 beside bf16, load into an f32 model, each widened exactly: the file counts as f32.
  // f64 beside any other dtype is refused (narrowing it rounds).
  const SafetensorsTensor* first = nullptr;
  bool mixed = false;
  for (auto& t : file.tensors) {
    if (!dtype_is_floating(t.dtype) && !dtype_is_half(t.dtype)) continue;
    if (!first) first = &t;
    if (t.dtype == first->dtype) continue;
    if (t.dtype == DType::f64 || first->dtype == DType::f64)
      throw std::invalid_argument(fmt::format("{}: tensors '{}' ({}) and '{}' ({}) differ in dtype; a model has one "
                                              "dtype",
                                              file.path, first->name, dtype_name(first->dtype), t.name,
                                              dtype_name(t.dtype)));
    mixed = true;
  }
  if (!first) throw std::invalid_argument(fmt::format("{}: no floating-point tensors, so no parameters", file.path));
  return mixed ? DType::f32 : first->dtype;
}

namespace {

constexpr const char* kWrapperPrefix = "module.";

bool every_key_has(const SafetensorsFile& file, const std::string& prefix) {
  if (file.tensors.empty()) return false;
  for (const auto& t : file.tensors)
    if (!t.name.starts_with(prefix)) return false;
  return true;
}

// How --init loads: the explicit prefix; else under dp and ddp a file saved from a wrapper
// (every key "module.") loads into the wrapper, i.e. into its module without the prefix.
LoadOptions init_load_options(const TrainConfig& config, const SafetensorsFile& init) {
  LoadOptions o;
  // dp and ddp load into the wrapper: its class and its "module." keys in the error text, as
  // PyTorch's wrapper.load_state_dict writes them (they read "for Sequential" without the
  // prefix; an outside-user review).
  if (config.strategy.kind != StrategyKind::single) {
    o.module_name = config.strategy.kind == StrategyKind::ddp ? "DistributedDataParallel" : "DataParallel";
    o.report_prefix = kWrapperPrefix;
  }
  if (!config.init_strip_prefix.empty())
    o.strip_prefix = config.init_strip_prefix;
  else if (config.strategy.kind != StrategyKind::single && every_key_has(init, kWrapperPrefix) &&
           !fault_active(Fault::init_wrapper_prefix_kept))
    o.strip_prefix = kWrapperPrefix;
  return o;
}

// "mlp:8-32-2 --layernorm": the --model (and flag) that builds `spec`.
std::string mlp_model_text(const MlpSpec& spec) {
  std::string text = "mlp:";
  for (size_t i = 0; i < spec.widths.size(); ++i) {
    if (i) text += '-';
    text += std::to_string(spec.widths[i]);
  }
  if (spec.layernorm) text += " --layernorm";
  return text;
}

// The `mlp:` spec whose state dict the file holds, when it is one make_mlp builds (its keys
// and shapes exactly, after `prefix`): "mlp:8-32-2 --layernorm". None otherwise.
std::optional<std::string> mlp_spec_of(const SafetensorsFile& file, const std::string& prefix) {
  std::map<int, const SafetensorsTensor*> weights;
  for (const auto& t : file.tensors) {
    if (!t.name.starts_with(prefix) || !t.name.ends_with(".weight")) continue;
    const std::string index = t.name.substr(prefix.size(), t.name.size() - prefix.size() - 7);
    if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    weights[std::stoi(index)] = &t;
  }
  if (weights.empty() || weights.begin()->second->shape.size() != 2) return std::nullopt;
  MlpSpec spec;
  spec.widths.push_back(weights.begin()->second->shape[1]);
  for (const auto& [i, w] : weights) {
    if (w->shape.size() == 2) spec.widths.push_back(w->shape[0]);
    else spec.layernorm = true;
  }
  if (spec.widths.size() < 2) return std::nullopt;
  // make_mlp's own names and shapes for that spec: the hint only where they are the file's.
  std::map<std::string, Shape> expected;
  int index = 0;
  for (size_t l = 0; l + 1 < spec.widths.size(); ++l) {
    const std::int64_t in = spec.widths[l], out = spec.widths[l + 1];
    expected[fmt::format("{}{}.weight", prefix, index)] = {out, in};
    expected[fmt::format("{}{}.bias", prefix, index)] = {out};
    ++index;
    if (l + 2 == spec.widths.size()) break;
    if (spec.layernorm) {
      expected[fmt::format("{}{}.weight", prefix, index)] = {out};
      expected[fmt::format("{}{}.bias", prefix, index)] = {out};
      ++index;
    }
    ++index;  // the activation
  }
  if (expected.size() != file.tensors.size()) return std::nullopt;
  for (const auto& t : file.tensors) {
    const auto it = expected.find(t.name);
    if (it == expected.end() || it->second != t.shape) return std::nullopt;
  }
  return mlp_model_text(spec);
}

// The strict load; a single-device run given a wrapper's checkpoint fails as PyTorch's
// unwrapped load_state_dict does, and the error says how to start from it.
void load_init(Sequential& m, const SafetensorsFile& init, const LoadOptions& options, const TrainConfig& config,
               Backend& backend) {
  try {
    load_state_dict(m, init, options, &backend);
  } catch (const std::invalid_argument& e) {
    if (!options.strip_prefix.empty() || !every_key_has(init, kWrapperPrefix)) {
      // The file is another MLP's: say which --model loads it (an outside-user review left
      // out --layernorm and read only PyTorch's key lists).
      const auto file_spec = mlp_spec_of(init, options.strip_prefix);
      if (!file_spec || *file_spec == mlp_model_text(config.model)) throw;
      throw std::invalid_argument(fmt::format("{}\n--init: {} holds the state dict of --model {} (the activation is "
                                              "not in a state dict: --activation as trained)",
                                              e.what(), init.path, *file_spec));
    }
    throw std::invalid_argument(fmt::format(
        "{}\n--init: every key of {} starts with '{}': it was saved from a DataParallel/DDP wrapper; start "
        "--strategy {} from it with --init-strip-prefix {} (as consume_prefix_in_state_dict_if_present), or train "
        "with --strategy dp or ddp, which load it into the wrapper",
        e.what(), init.path, kWrapperPrefix, strategy_kind_name(config.strategy.kind), kWrapperPrefix));
  }
}

}  // namespace

TrainResult train(Backend& backend, const TrainConfig& config, const std::function<void(const StepLog&)>& on_step) {
  check_config(config);
  std::optional<SafetensorsFile> init;
  if (config.init_path) init = read_for_flag("--init", *config.init_path);
  const DType dtype = resolve_dtype(config, init);
  const Dataset data = config.data_path
                           ? load_dataset(backend, *config.data_path, config.model, config.loss, dtype)
                           : make_synthetic_dataset(backend, config.model, config.loss, dtype,
                                                    config.synthetic_samples, config.seed);
  return train_on(backend, config, data, on_step);
}

TrainResult train_on(Backend& backend, const TrainConfig& config, const Dataset& data,
                     const std::function<void(const StepLog&)>& on_step) {
  check_config(config);
  std::optional<SafetensorsFile> init;
  if (config.init_path) init = read_for_flag("--init", *config.init_path);
  const DType dtype = resolve_dtype(config, init);
  check_dataset(data, config.model, config.loss, dtype, config.data_path ? *config.data_path : "data");

  StrategyOptions options = config.strategy;
  options.loss = config.loss;
  options.reduction = config.reduction;
  if (config.autocast && dtype != DType::f32)
    throw std::invalid_argument(fmt::format("--precision {}-amp keeps f32 master weights, but the run's dtype is {}",
                                            dtype_name(*config.autocast), dtype_name(dtype)));
  const auto configure = [&](Sequential m) {
    m.set_autocast(config.autocast);
    m.set_checkpoint(config.checkpoint_segment_layers);
    return m;
  };
  const LoadOptions init_options = init ? init_load_options(config, *init) : LoadOptions{};
  const ModelBuilder build_model = [&](Device& device) {
    // On a device the CPU cannot write (a GPU) make_mlp draws the weights in host memory
    // and copies them over, and load_state_dict copies through the backend.
    Sequential m = make_mlp(config.model, backend, device, dtype, config.seed);
    if (init) load_init(m, *init, init_options, config, backend);
    return configure(std::move(m));
  };
  // Each device's GradScaler (f16-amp), owned by the strategy; DDP's ranks build
  // theirs concurrently, each into its own device's slot.
  std::vector<const GradScaler*> scalers(static_cast<size_t>(backend.device_count()), nullptr);
  const OptimizerBuilder build_opt = [&](std::vector<NamedParameter> params) {
    const int device = params.empty() ? -1 : params.front().param->value.device().index();
    std::unique_ptr<Optimizer> o = build_optimizer(config, std::move(params));
    if (device >= 0 && static_cast<size_t>(device) < scalers.size())
      scalers[static_cast<size_t>(device)] = dynamic_cast<const GradScaler*>(o.get());
    return o;
  };
  auto strategy = make_strategy(backend, options, build_model, build_opt);

  TrainResult result;
  result.dtype = dtype;
  result.data_samples = data.samples();
  result.parameters = strategy->module().parameter_count();
  if (init) {
    std::set<std::string> halves;
    for (const auto& t : init->tensors)
      if (dtype_is_half(t.dtype)) halves.insert(std::string(dtype_name(t.dtype)));
    if (!halves.empty())
      result.warnings.push_back(fmt::format("--init {} holds {} parameters: loaded into the {} model widened exactly, "
                                            "as torch's load_state_dict casts them; training and --checkpoint are {}",
                                            init->path, fmt::join(halves, " and "), dtype_name(dtype),
                                            dtype_name(dtype)));
  }
  // A step larger than the dataset takes some samples twice within it, which a DataLoader
  // never does (it yields a short batch): said once, since the losses then differ from one.
  if (config.data_path && config.batch * config.strategy.accumulate > data.samples())
    result.warnings.push_back(fmt::format(
        "a step takes {} samples but --data holds {}: some samples appear twice in one step (a DataLoader would "
        "give one batch of {}); give --batch {} or less",
        config.batch * config.strategy.accumulate, data.samples(), data.samples(),
        data.samples() / std::max(1, config.strategy.accumulate)));
  for (int s = 0; s < config.steps; ++s) {
    // With accumulation a step takes K micro-batches of `batch` samples, in order.
    const int k = config.strategy.accumulate;
    const auto idx = batch_indices(s, config.batch * k, data.samples(), config.shuffle, config.seed);
    const Tensor x = take_rows(backend, data.x, idx), y = take_rows(backend, data.y, idx);
    const Seconds t0 = backend.now();
    const StepResult r = k == 1 ? strategy->train_step(x, y)
                                : ddp_accumulated_step(dynamic_cast<DistributedDataParallel&>(*strategy), k, x, y);
    const Seconds dt = backend.now() - t0;
    result.losses.push_back(r.loss);
    result.step_s.push_back(dt);
    for (auto& w : r.warnings)
      if (std::find(result.warnings.begin(), result.warnings.end(), w) == result.warnings.end())
        result.warnings.push_back(w);
    if (on_step) on_step(StepLog{s + 1, r.loss, dt, &r});
  }
  for (const GradScaler* g : scalers)
    if (g) {
      result.loss_scale = g->scale();
      result.skipped_steps = g->skipped_steps();
      break;
    }
  if (config.checkpoint_path) write_safetensors_atomic(*config.checkpoint_path, strategy->state_dict(), &backend);
  return result;
}

}  // namespace dpt
