#include "scenarios/scenario/model_library_yaml.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/closest_name.hpp"
#include "engine/nn/model_transformer.hpp"
#include "scenarios/scenario/model_hf_config.hpp"
#include "sim/net/library_files.hpp"
#include "sim/net/yaml_util.hpp"

namespace dpt {
namespace {

using sim::MapReader;

// dptwin_profile's block: where and how the model was measured.
MeasuredProfile parse_measured(MapReader r) {
  MeasuredProfile p;
  p.device = r.get_string("device");
  p.device_kind = r.get_string("device_kind");
  if (p.device_kind != "cpu" && p.device_kind != "cuda")
    r.fail("device_kind", fmt::format("'{}' is neither cpu nor cuda", p.device_kind));
  p.gpu_model = r.opt_string("gpu_model");
  p.torch = r.get_string("torch");
  p.dtype = r.get_string("dtype");
  p.batch = r.get_positive_int("batch");
  if (auto t = r.opt_int("threads")) p.threads = static_cast<int>(*t);
  p.optimizer = r.get_string("optimizer");
  p.steps = static_cast<int>(r.get_positive_int("steps"));
  p.warmup_steps = static_cast<int>(r.get_int("warmup_steps"));
  for (auto [key, field] : {std::pair{"step_s", &p.step_s}, {"forward_s", &p.forward_s},
                            {"backward_s", &p.backward_s}, {"optimizer_step_s", &p.optimizer_step_s}}) {
    *field = r.get_double(key);
    r.require_non_negative(key, *field);
  }
  p.frozen_parameters = r.opt_int("frozen_parameters").value_or(0);
  p.buffer_elements = r.opt_int("buffer_elements").value_or(0);
  r.finish();
  return p;
}

// Plausibility bounds: a per-sample size of 10^12 elements is 4 TB of input per sample;
// a layer of 10^18 flops per sample is 1,000x GPT-3's whole forward per sequence.
constexpr std::int64_t kMaxFeatures = 1'000'000'000'000;
constexpr double kMaxLayerFlops = 1e18;
constexpr std::int64_t kMaxTensorElements = kMaxLayerActivationElements;  // 10^13 per tensor
constexpr std::int64_t kMaxModelElements = 100'000'000'000'000;  // 10^14 parameters in all

// One parameter; model_elements (the parameters so far) grows by its size and is
// bounded, checked as the product grows so no multiplication can overflow.
ParameterDescription parse_parameter(MapReader& pr, std::int64_t& model_elements) {
  ParameterDescription p;
  p.name = pr.get_string("name");
  p.shape = pr.get_int_list("shape");
  if (p.shape.empty()) pr.fail("shape", "expected at least one dimension");
  p.requires_grad = pr.opt_bool("requires_grad").value_or(true);
  std::int64_t elements = 1;
  for (auto d : p.shape) {
    if (d <= 0) pr.fail("shape", fmt::format("dimensions must be positive, got {}", shape_to_string(p.shape)));
    if (d > kMaxTensorElements / elements)
      pr.fail("shape", fmt::format("{} has more than {} elements", shape_to_string(p.shape), kMaxTensorElements));
    elements *= d;
  }
  model_elements += elements;
  if (model_elements > kMaxModelElements)
    pr.fail("shape", fmt::format("the model's parameters exceed {} elements", kMaxModelElements));
  pr.finish();
  return p;
}

// One layer; its measured times need the model's measured block (read before).
LayerDescription parse_layer(MapReader& lr, const ModelDescription& m, std::int64_t& model_elements) {
  LayerDescription l;
  l.name = lr.get_string("name");
  l.type = lr.get_string("type");
  l.forward_flops_per_sample = lr.get_double_in("forward_flops_per_sample", 0, kMaxLayerFlops);
  l.activation_elements_per_sample = lr.get_int_in("activation_elements_per_sample", 0, kMaxTensorElements);
  l.output_features = lr.get_int_in("output_features", 1, kMaxFeatures);
  l.memory_bound_forward_elements_per_sample =
      lr.opt_int_in("memory_bound_forward_elements_per_sample", 0, kMaxTensorElements);
  l.memory_bound_backward_elements_per_sample =
      lr.opt_int_in("memory_bound_backward_elements_per_sample", 0, kMaxTensorElements);
  if (l.memory_bound_forward_elements_per_sample.has_value() != l.memory_bound_backward_elements_per_sample.has_value())
    lr.fail(l.memory_bound_forward_elements_per_sample ? "memory_bound_backward_elements_per_sample"
                                                       : "memory_bound_forward_elements_per_sample",
            "give the memory-bound elements of both passes or of neither");
  l.memory_bound_forward_f32_elements_per_sample =
      lr.opt_int_in("memory_bound_forward_f32_elements_per_sample", 0, kMaxTensorElements);
  l.memory_bound_backward_f32_elements_per_sample =
      lr.opt_int_in("memory_bound_backward_f32_elements_per_sample", 0, kMaxTensorElements);
  // The f32 share is part of the counted traffic: it needs the count and cannot exceed it.
  auto check_f32 = [&](const char* key, const std::optional<Elements>& f32, const std::optional<Elements>& all) {
    if (!f32) return;
    if (!all) lr.fail(key, "needs the memory-bound elements it is a part of (memory_bound_*_elements_per_sample)");
    if (*f32 > *all) lr.fail(key, fmt::format("{} is more than the layer's {} memory-bound elements", *f32, *all));
  };
  check_f32("memory_bound_forward_f32_elements_per_sample", l.memory_bound_forward_f32_elements_per_sample,
            l.memory_bound_forward_elements_per_sample);
  check_f32("memory_bound_backward_f32_elements_per_sample", l.memory_bound_backward_f32_elements_per_sample,
            l.memory_bound_backward_elements_per_sample);
  l.autocast_forward_cast_elements_per_sample =
      lr.opt_int_in("autocast_forward_cast_elements_per_sample", 0, kMaxTensorElements);
  l.autocast_backward_cast_elements_per_sample =
      lr.opt_int_in("autocast_backward_cast_elements_per_sample", 0, kMaxTensorElements);
  l.conv_io_elements_per_sample = lr.opt_int_in("conv_io_elements_per_sample", 0, kMaxTensorElements);
  if (lr.has("gemms"))
    for (auto& gr : lr.map_list("gemms")) {
      GemmDescription g;
      g.rows_per_sample = gr.get_int_in("rows_per_sample", 1, kMaxFeatures);
      g.n = gr.get_int_in("n", 1, kMaxFeatures);
      g.k = gr.get_int_in("k", 1, kMaxFeatures);
      gr.finish();
      l.gemms.push_back(g);
    }
  if (lr.has("bmms"))
    for (auto& br : lr.map_list("bmms")) {
      BmmDescription b;
      b.count = br.get_int_in("count", 1, kMaxFeatures);
      b.m = br.get_int_in("m", 1, kMaxFeatures);
      b.n = br.get_int_in("n", 1, kMaxFeatures);
      b.k = br.get_int_in("k", 1, kMaxFeatures);
      // Each operand and the product, per sample, within a tensor's bound.
      for (auto [rows, cols] : {std::pair{b.m, b.k}, std::pair{b.k, b.n}, std::pair{b.m, b.n}})
        if (static_cast<double>(b.count) * static_cast<double>(rows) * static_cast<double>(cols) >
            static_cast<double>(kMaxTensorElements))
          br.fail("count", fmt::format("{} products of [{}, {}] x [{}, {}] hold more than {} elements per sample",
                                       b.count, b.m, b.k, b.k, b.n, kMaxTensorElements));
      br.finish();
      l.bmms.push_back(b);
    }
  if (lr.has("sdpa")) {
    MapReader ar = lr.map("sdpa");
    SdpaDescription a;
    a.heads = ar.get_int_in("heads", 1, kMaxFeatures);
    a.query_len = ar.get_int_in("query_len", 1, kMaxFeatures);
    a.key_len = ar.get_int_in("key_len", 1, kMaxFeatures);
    a.head_dim = ar.get_int_in("head_dim", 1, kMaxFeatures);
    a.causal = ar.get_bool("causal");  // stated: a causal kernel runs half the score blocks
    // q, k, v and the output per sample, within a tensor's bound.
    for (auto [what, rows] : {std::pair{"query_len", a.query_len}, std::pair{"key_len", a.key_len}})
      if (static_cast<double>(a.heads) * static_cast<double>(rows) * static_cast<double>(a.head_dim) >
          static_cast<double>(kMaxTensorElements))
        ar.fail(what, fmt::format("{} heads of [{}, {}] hold more than {} elements per sample", a.heads, rows,
                                  a.head_dim, kMaxTensorElements));
    ar.finish();
    if (!l.bmms.empty()) lr.fail("sdpa", "a layer runs its attention as eager bmms or as one fused sdpa kernel, not both");
    l.sdpa = a;
  }
  if (lr.has("convs")) {
    if (!l.conv_io_elements_per_sample)
      lr.fail("convs", "listing the layer's convolutions needs its conv_io_elements_per_sample (their sum)");
    double conv_flops = 0;
    Elements conv_io = 0;
    for (auto& cr : lr.map_list("convs")) {
      ConvDescription c;
      c.flops_per_sample = cr.get_double_in("flops_per_sample", 0, kMaxLayerFlops);
      c.io_elements_per_sample = cr.get_int_in("io_elements_per_sample", 1, kMaxTensorElements);
      cr.finish();
      conv_flops += c.flops_per_sample;
      conv_io += c.io_elements_per_sample;
      l.convs.push_back(c);
    }
    if (conv_io != *l.conv_io_elements_per_sample)
      lr.fail("convs", fmt::format("its convolutions' io_elements_per_sample sum to {}, not the layer's "
                                   "conv_io_elements_per_sample {}",
                                   conv_io, *l.conv_io_elements_per_sample));
    if (conv_flops > l.forward_flops_per_sample * (1 + 1e-12))
      lr.fail("convs", fmt::format("its convolutions' {} FLOPs per sample exceed the layer's forward_flops_per_sample {}",
                                   conv_flops, l.forward_flops_per_sample));
  }
  double gemm_flops = 0;
  for (const auto& g : l.gemms) gemm_flops += 2.0 * static_cast<double>(g.rows_per_sample * g.n) * static_cast<double>(g.k);
  if (gemm_flops > l.forward_flops_per_sample)
    lr.fail("gemms", fmt::format("its GEMMs' {} FLOPs per sample exceed the layer's forward_flops_per_sample {}",
                                 gemm_flops, l.forward_flops_per_sample));
  double bmm_flops = 0;
  for (const auto& b : l.bmms)
    bmm_flops += 2.0 * static_cast<double>(b.count) * static_cast<double>(b.m) * static_cast<double>(b.n) *
                 static_cast<double>(b.k);
  if (l.sdpa)
    bmm_flops += 4.0 * static_cast<double>(l.sdpa->heads) * static_cast<double>(l.sdpa->query_len) *
                 static_cast<double>(l.sdpa->key_len) * static_cast<double>(l.sdpa->head_dim);
  if (gemm_flops + bmm_flops > l.forward_flops_per_sample * (1 + 1e-12))
    lr.fail(l.sdpa ? "sdpa" : "bmms",
            fmt::format("its {} {} FLOPs per sample and its GEMMs' {} exceed the layer's forward_flops_per_sample {}",
                        l.sdpa ? "fused attention's (4 x heads x query_len x key_len x head_dim)" : "batched matmuls'",
                                bmm_flops, gemm_flops, l.forward_flops_per_sample));
  // The file holds the measured batch's times; the description keeps them per sample.
  for (auto [key, field] : {std::pair{"forward_s", &l.measured_forward_s_per_sample},
                            {"backward_s", &l.measured_backward_s_per_sample}})
    if (auto v = lr.opt_double(key)) {
      lr.require_non_negative(key, *v);
      if (!m.measured) lr.fail(key, "measured times need the file's measured block (batch, device)");
      *field = *v / static_cast<double>(m.measured->batch);
    }
  for (auto& pr : lr.map_list("parameters")) l.parameters.push_back(parse_parameter(pr, model_elements));
  lr.finish();
  return l;
}

// Totals guard against a hand-edited layer: they must agree with the sum.
void check_totals(MapReader totals, const ModelDescription& m) {
  const auto params = totals.get_int("parameters");
  if (params != model_parameter_count(m))
    totals.fail("parameters", fmt::format("{} disagrees with the layers' sum {}", params, model_parameter_count(m)));
  const double flops = totals.get_double("forward_flops_per_sample");
  const double sum_flops = model_forward_flops_per_sample(m);
  if (std::fabs(flops - sum_flops) > 1e-9 * std::max(1.0, sum_flops))
    totals.fail("forward_flops_per_sample", fmt::format("{} disagrees with the layers' sum {}", flops, sum_flops));
  const auto acts = totals.get_int("activation_elements_per_sample");
  if (acts != model_activation_elements_per_sample(m))
    totals.fail("activation_elements_per_sample",
                fmt::format("{} disagrees with the layers' sum {}", acts, model_activation_elements_per_sample(m)));
  totals.finish();
}

ModelDescription parse_model_node(const YAML::Node& root, const std::string& file) {
  MapReader top(root, file, "");
  const auto version = top.get_int("schema_version");
  if (version != kModelSchemaVersion)
    top.fail("schema_version", fmt::format("unsupported model schema version {} (this dptwin reads {})", version,
                                           kModelSchemaVersion));
  ModelDescription m;
  m.name = top.get_string("name");
  m.sample = top.get_string("sample");
  m.input_features = top.get_int_in("input_features", 1, kMaxFeatures);
  m.tokens_per_sample = top.opt_double_in("tokens_per_sample", 1, 1e9);
  YAML::Node sources = top.node("sources");
  if (!sources.IsSequence() || sources.size() == 0) top.fail("sources", "expected a non-empty list of sources");
  for (const auto& s : sources) {
    if (!s.IsScalar()) top.fail("sources", "expected a list of strings");
    m.sources.push_back(s.Scalar());
  }
  if (top.has("measured")) m.measured = parse_measured(top.map("measured"));
  std::vector<MapReader> layers = top.map_list("layers");
  if (layers.empty()) top.fail("layers", "expected at least one layer");
  std::int64_t model_elements = 0;
  for (auto& lr : layers) m.layers.push_back(parse_layer(lr, m, model_elements));
  check_totals(top.map("totals"), m);
  top.finish();
  if (m.measured)
    for (const auto& l : m.layers)
      if (!l.measured_forward_s_per_sample || !l.measured_backward_s_per_sample)
        top.fail("layers", fmt::format("layer {} has no forward_s and backward_s, but the file is a measured profile "
                                       "(every layer needs both)",
                                       l.name));
  try {
    validate_model_description(m);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", file, e.what()));
  }
  return m;
}

// A YAML scalar: plain when it is a simple word (names such as "h.0",
// "Conv2d+BatchNorm2d"), otherwise double-quoted with escapes.
std::string yaml_scalar(const std::string& s, bool always_quote = false) {
  bool plain = !always_quote && !s.empty();
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+' || c == '-')) plain = false;
  if (plain && (s[0] == '-' || s[0] == '.')) plain = false;
  for (const char* word : {"null", "Null", "NULL", "true", "True", "false", "False", "yes", "no", "on", "off"})
    if (s == word) plain = false;  // words YAML would read as something other than a string
  if (plain) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + '"';
}

// Whole numbers as integers (as generate.py writes them); others in the shortest
// form that reads back to the same double.
std::string yaml_number(double x) {
  if (std::nearbyint(x) == x && std::fabs(x) < 9.0e15) return fmt::format("{:.0f}", x);
  return fmt::format("{}", x);
}

std::string measured_to_yaml(const MeasuredProfile& p) {
  std::string out = fmt::format("measured:\n  device: {}\n  device_kind: {}\n", yaml_scalar(p.device, true),
                                p.device_kind);
  if (p.gpu_model) out += fmt::format("  gpu_model: {}\n", yaml_scalar(*p.gpu_model, true));
  out += fmt::format("  torch: {}\n  dtype: {}\n  batch: {}\n", yaml_scalar(p.torch, true), p.dtype, p.batch);
  if (p.threads) out += fmt::format("  threads: {}\n", *p.threads);
  out += fmt::format("  optimizer: {}\n  steps: {}\n  warmup_steps: {}\n  step_s: {}\n  forward_s: {}\n"
                     "  backward_s: {}\n  optimizer_step_s: {}\n  frozen_parameters: {}\n  buffer_elements: {}\n",
                     p.optimizer, p.steps, p.warmup_steps, p.step_s, p.forward_s, p.backward_s, p.optimizer_step_s,
                     p.frozen_parameters, p.buffer_elements);
  return out;
}

}  // namespace

std::string model_to_yaml(const ModelDescription& m) {
  std::string out = fmt::format("schema_version: {}\nname: {}\nsample: {}\ninput_features: {}\n",
                                kModelSchemaVersion, yaml_scalar(m.name), yaml_scalar(m.sample, true),
                                m.input_features);
  if (m.tokens_per_sample) out += fmt::format("tokens_per_sample: {}\n", yaml_number(*m.tokens_per_sample));
  out += "sources:\n";
  for (const auto& s : m.sources) out += fmt::format("  - {}\n", yaml_scalar(s, true));
  out += fmt::format(
      "totals:  # checked on load against the sum over layers\n  parameters: {}\n  forward_flops_per_sample: {}\n"
      "  activation_elements_per_sample: {}\n",
      model_parameter_count(m), yaml_number(model_forward_flops_per_sample(m)),
      model_activation_elements_per_sample(m));
  if (m.measured) out += measured_to_yaml(*m.measured);
  out += "layers:\n";
  for (const auto& l : m.layers) {
    out += fmt::format("  - name: {}\n    type: {}\n    forward_flops_per_sample: {}\n"
                       "    activation_elements_per_sample: {}\n    output_features: {}\n",
                       yaml_scalar(l.name), yaml_scalar(l.type), yaml_number(l.forward_flops_per_sample),
                       l.activation_elements_per_sample, l.output_features);
    if (l.memory_bound_forward_elements_per_sample && l.memory_bound_backward_elements_per_sample)
      out += fmt::format("    memory_bound_forward_elements_per_sample: {}\n"
                         "    memory_bound_backward_elements_per_sample: {}\n",
                         *l.memory_bound_forward_elements_per_sample, *l.memory_bound_backward_elements_per_sample);
    if (l.memory_bound_forward_f32_elements_per_sample)
      out += fmt::format("    memory_bound_forward_f32_elements_per_sample: {}\n",
                         *l.memory_bound_forward_f32_elements_per_sample);
    if (l.memory_bound_backward_f32_elements_per_sample)
      out += fmt::format("    memory_bound_backward_f32_elements_per_sample: {}\n",
                         *l.memory_bound_backward_f32_elements_per_sample);
    if (l.autocast_forward_cast_elements_per_sample)
      out += fmt::format("    autocast_forward_cast_elements_per_sample: {}\n",
                         *l.autocast_forward_cast_elements_per_sample);
    if (l.autocast_backward_cast_elements_per_sample)
      out += fmt::format("    autocast_backward_cast_elements_per_sample: {}\n",
                         *l.autocast_backward_cast_elements_per_sample);
    if (l.conv_io_elements_per_sample)
      out += fmt::format("    conv_io_elements_per_sample: {}\n", *l.conv_io_elements_per_sample);
    if (!l.convs.empty()) {
      out += "    convs:\n";
      for (const auto& c : l.convs)
        out += fmt::format("      - {{flops_per_sample: {}, io_elements_per_sample: {}}}\n", yaml_number(c.flops_per_sample),
                           c.io_elements_per_sample);
    }
    if (!l.gemms.empty()) {
      out += "    gemms:\n";
      for (const auto& g : l.gemms)
        out += fmt::format("      - {{rows_per_sample: {}, n: {}, k: {}}}\n", g.rows_per_sample, g.n, g.k);
    }
    if (!l.bmms.empty()) {
      out += "    bmms:\n";
      for (const auto& b : l.bmms)
        out += fmt::format("      - {{count: {}, m: {}, n: {}, k: {}}}\n", b.count, b.m, b.n, b.k);
    }
    if (const auto& a = l.sdpa)
      out += fmt::format("    sdpa: {{heads: {}, query_len: {}, key_len: {}, head_dim: {}, causal: {}}}\n", a->heads,
                         a->query_len, a->key_len, a->head_dim, a->causal ? "true" : "false");
    if (m.measured) {
      const auto batch = static_cast<double>(m.measured->batch);
      if (l.measured_forward_s_per_sample)
        out += fmt::format("    forward_s: {}\n", *l.measured_forward_s_per_sample * batch);
      if (l.measured_backward_s_per_sample)
        out += fmt::format("    backward_s: {}\n", *l.measured_backward_s_per_sample * batch);
    }
    if (l.parameters.empty()) {
      out += "    parameters: []\n";
      continue;
    }
    out += "    parameters:\n";
    for (const auto& p : l.parameters) {
      std::string dims;
      for (size_t i = 0; i < p.shape.size(); ++i) dims += fmt::format("{}{}", i ? ", " : "", p.shape[i]);
      out += fmt::format("      - {{name: {}, shape: [{}]{}}}\n", yaml_scalar(p.name), dims,
                         p.requires_grad ? "" : ", requires_grad: false");
    }
  }
  return out;
}

ModelDescription load_model_file(const std::filesystem::path& path) {
  return parse_model_node(sim::yaml_load_file(path.string()), path.string());
}

ModelDescription parse_model_yaml(const std::string& text, const std::string& file_label) {
  return parse_model_node(sim::yaml_load_string(text, file_label), file_label);
}

std::vector<std::string> list_models(const std::filesystem::path& library_dir) {
  return sim::yaml_file_stems(library_dir);
}

std::string model_relative_to(const std::string& model, const std::filesystem::path& dir) {
  if (model.rfind("mlp:", 0) == 0 || model.rfind("transformer:", 0) == 0) return model;
  const std::string prefix = model.rfind("hf:", 0) == 0 ? "hf:" : "";
  const std::string path = model.substr(prefix.size());
  const bool is_path = path.find('/') != std::string::npos || std::filesystem::path(path).extension() == ".yaml";
  if (!is_path || std::filesystem::path(path).is_absolute() || dir.empty() || dir == ".") return model;
  return prefix + (dir / path).string();
}

ModelDescription load_model(const std::string& name_or_path, const std::filesystem::path& library_dir) {
  if (name_or_path.rfind("mlp:", 0) == 0) return describe_mlp(parse_mlp_spec(name_or_path));
  if (name_or_path.rfind("transformer:", 0) == 0) {
    ModelDescription m = describe_transformer(parse_transformer_spec(name_or_path));
    validate_model_description(m);
    return m;
  }
  if (name_or_path.rfind("hf:", 0) == 0) return load_hf_config(name_or_path.substr(3));
  const std::filesystem::path as_path(name_or_path);
  std::error_code ec;  // a name too long for a file name is just not there
  if (as_path.extension() == ".yaml" || name_or_path.find('/') != std::string::npos) {
    if (!std::filesystem::exists(as_path, ec))
      throw std::invalid_argument(fmt::format("model file {} does not exist", name_or_path));
    return load_model_file(as_path);
  }
  const auto file = library_dir / (name_or_path + ".yaml");
  if (!std::filesystem::exists(file, ec)) {
    std::string known;
    const auto names = list_models(library_dir);
    for (const auto& n : names) known += fmt::format("{}{}", known.empty() ? "" : ", ", n);
    const auto near = closest_name(name_or_path, names);
    throw std::invalid_argument(fmt::format("unknown model '{}'{} (library: {}; or a path to a .yaml file, or "
                                            "mlp:IN-H-...-OUT, "
                                            "transformer:layers=L,hidden=H,heads=A,seq=S,vocab=V[,mlp=F][,tied][,attn=sdpa], "
                                            "hf:PATH/config.json)",
                                            name_or_path, near ? fmt::format("; did you mean '{}'?", *near) : "",
                                            known));
  }
  return load_model_file(file);
}

}  // namespace dpt
