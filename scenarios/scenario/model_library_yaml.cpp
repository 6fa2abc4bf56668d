#include "scenarios/scenario/model_library_yaml.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/net/yaml_util.hpp"

namespace dpt {
namespace {

using sim::MapReader;

ModelDescription parse_model_node(const YAML::Node& root, const std::string& file) {
  MapReader top(root, file, "");
  const auto version = top.get_int("schema_version");
  if (version != kModelSchemaVersion)
    top.fail("schema_version", fmt::format("unsupported model schema version {} (this dptwin reads {})", version,
                                           kModelSchemaVersion));
  ModelDescription m;
  m.name = top.get_string("name");
  m.sample = top.get_string("sample");
  // Plausibility bounds: a per-sample size of 10^12 elements is 4 TB of input per sample;
  // a layer of 10^18 flops per sample is 1,000x GPT-3's whole forward per sequence.
  constexpr std::int64_t kMaxFeatures = 1'000'000'000'000;
  constexpr double kMaxLayerFlops = 1e18;
  constexpr std::int64_t kMaxTensorElements = 10'000'000'000'000;  // 10^13 per tensor
  constexpr std::int64_t kMaxModelElements = 100'000'000'000'000;  // 10^14 parameters in all
  m.input_features = top.get_int_in("input_features", 1, kMaxFeatures);
  YAML::Node sources = top.node("sources");
  if (!sources.IsSequence() || sources.size() == 0) top.fail("sources", "expected a non-empty list of sources");
  for (const auto& s : sources) {
    if (!s.IsScalar()) top.fail("sources", "expected a list of strings");
    m.sources.push_back(s.Scalar());
  }
  std::int64_t model_elements = 0;

  std::vector<MapReader> layers = top.map_list("layers");
  if (layers.empty()) top.fail("layers", "expected at least one layer");
  for (auto& lr : layers) {
    LayerDescription l;
    l.name = lr.get_string("name");
    l.type = lr.get_string("type");
    l.forward_flops_per_sample = lr.get_double_in("forward_flops_per_sample", 0, kMaxLayerFlops);
    l.activation_elements_per_sample = lr.get_int_in("activation_elements_per_sample", 0, kMaxTensorElements);
    l.output_features = lr.get_int_in("output_features", 1, kMaxFeatures);
    for (auto& pr : lr.map_list("parameters")) {
      ParameterDescription p;
      p.name = pr.get_string("name");
      p.shape = pr.get_int_list("shape");
      if (p.shape.empty()) pr.fail("shape", "expected at least one dimension");
      // Checked as the product grows, so no multiplication can overflow.
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
      l.parameters.push_back(std::move(p));
    }
    lr.finish();
    m.layers.push_back(std::move(l));
  }

  // Totals guard against a hand-edited layer: they must agree with the sum.
  MapReader totals = top.map("totals");
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
  top.finish();
  try {
    validate_model_description(m);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", file, e.what()));
  }
  return m;
}

}  // namespace

ModelDescription load_model_file(const std::filesystem::path& path) {
  return parse_model_node(sim::yaml_load_file(path.string()), path.string());
}

ModelDescription parse_model_yaml(const std::string& text, const std::string& file_label) {
  return parse_model_node(sim::yaml_load_string(text, file_label), file_label);
}

std::vector<std::string> list_models(const std::filesystem::path& library_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(library_dir, ec))
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

ModelDescription load_model(const std::string& name_or_path, const std::filesystem::path& library_dir) {
  if (name_or_path.rfind("mlp:", 0) == 0) return describe_mlp(parse_mlp_spec(name_or_path));
  const std::filesystem::path as_path(name_or_path);
  if (as_path.extension() == ".yaml" || name_or_path.find('/') != std::string::npos) {
    if (!std::filesystem::exists(as_path))
      throw std::invalid_argument(fmt::format("model file {} does not exist", name_or_path));
    return load_model_file(as_path);
  }
  const auto file = library_dir / (name_or_path + ".yaml");
  if (!std::filesystem::exists(file)) {
    std::string known;
    for (const auto& n : list_models(library_dir)) known += fmt::format("{}{}", known.empty() ? "" : ", ", n);
    throw std::invalid_argument(fmt::format("unknown model '{}' (library: {}; or a path to a .yaml file, or "
                                            "mlp:IN-H-...-OUT)",
                                            name_or_path, known));
  }
  return load_model_file(file);
}

}  // namespace dpt
