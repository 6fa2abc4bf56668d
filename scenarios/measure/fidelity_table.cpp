// Reading the public fidelity table (fidelity.hpp): one YAML file per source,
// validated on load, every error naming the file, the line and the key.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "engine/core/closest_name.hpp"
#include "engine/io/input_file.hpp"
#include "engine/core/precision.hpp"
#include "scenarios/measure/fidelity.hpp"
#include "sim/net/yaml_util.hpp"

namespace dpt::fidelity {
namespace {

// Where a node was written: "FILE:LINE: KEY: ".
struct Reader {
  std::string file;

  std::string at(const YAML::Node& n, const std::string& key) const {
    const int line = n.Mark().line >= 0 ? n.Mark().line + 1 : 0;
    return fmt::format("{}:{}: {}: ", file, line, key);
  }
  [[noreturn]] void fail(const YAML::Node& n, const std::string& key, const std::string& what) const {
    throw std::invalid_argument(at(n, key) + what);
  }
  void require_map(const YAML::Node& n, const std::string& key) const {
    if (!n.IsMap()) fail(n, key, "expected a mapping of keys");
  }
  // Unknown keys are errors, listing the ones allowed here. Every key is a plain scalar
  // (sim::yaml_load_string checked the whole document).
  void check_keys(const YAML::Node& n, const std::string& key, const std::vector<std::string>& allowed) const {
    for (const auto& kv : n) {
      const auto name = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        const auto near = closest_name(name, allowed);
        fail(kv.first, key.empty() ? name : key + "." + name,
             fmt::format("unknown key{} (allowed: {})", near ? fmt::format("; did you mean '{}'?", *near) : "", list));
      }
    }
  }
  YAML::Node required(const YAML::Node& parent, const std::string& name, const std::string& key) const {
    const YAML::Node n = parent[name];
    if (!n) fail(parent, key, fmt::format("missing key '{}'", name));
    return n;
  }
  std::string text(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar() || n.Scalar().empty()) fail(n, key, "expected a non-empty text");
    return n.Scalar();
  }
  double number(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) fail(n, key, "expected a number");
    try {
      size_t pos = 0;
      const double v = std::stod(n.Scalar(), &pos);
      if (pos != n.Scalar().size() || !std::isfinite(v)) throw std::invalid_argument("");
      return v;
    } catch (const std::exception&) {
      fail(n, key, fmt::format("'{}' is not a number (units go in the key's name)", n.Scalar()));
    }
  }
  double positive(const YAML::Node& n, const std::string& key) const {
    const double v = number(n, key);
    if (!(v > 0)) fail(n, key, fmt::format("must be positive, got {}", n.Scalar()));
    return v;
  }
  std::int64_t whole(const YAML::Node& n, const std::string& key, std::int64_t lo, std::int64_t hi) const {
    const double v = number(n, key);
    if (v != std::floor(v) || v < static_cast<double>(lo) || v > static_cast<double>(hi))
      fail(n, key, fmt::format("must be a whole number in {}..{}, got {}", lo, hi, n.Scalar()));
    return static_cast<std::int64_t>(v);
  }
};

Bytes element_bytes_of(const Reader& r, const YAML::Node& n, const std::string& name, const std::string& key) {
  if (name == "float" || name == "float32" || name == "int32") return 4;
  if (name == "double" || name == "float64" || name == "int64") return 8;
  if (name == "half" || name == "float16" || name == "bfloat16") return 2;
  if (name == "int8" || name == "uint8") return 1;
  r.fail(n, key, fmt::format("unknown nccl-tests type '{}' (float, double, half, bfloat16, int8, int32, int64)", name));
}

CollectiveConfig parse_collective(const Reader& r, const YAML::Node& n, const std::string& key) {
  r.require_map(n, key);
  r.check_keys(n, key, {"op", "bytes", "dtype", "gpus", "nodes", "algorithm", "gpus_per_thread", "iters"});
  CollectiveConfig c;
  const YAML::Node op = r.required(n, "op", key);
  try {
    c.op = sim::parse_collective_op(r.text(op, key + ".op"));
  } catch (const std::invalid_argument& e) {
    r.fail(op, key + ".op", e.what());
  }
  c.bytes = r.whole(r.required(n, "bytes", key), key + ".bytes", 1, Bytes{1} << 50);
  if (n["dtype"]) c.dtype = r.text(n["dtype"], key + ".dtype");
  c.element_bytes = element_bytes_of(r, n["dtype"] ? n["dtype"] : n, c.dtype, key + ".dtype");
  c.gpus = static_cast<int>(r.whole(r.required(n, "gpus", key), key + ".gpus", 1, 1 << 20));
  if (n["nodes"]) c.nodes = static_cast<int>(r.whole(n["nodes"], key + ".nodes", 1, 4096));
  if (c.gpus % c.nodes != 0)
    r.fail(n, key + ".gpus", fmt::format("{} GPUs do not fill {} nodes evenly", c.gpus, c.nodes));
  if (n["gpus_per_thread"]) {
    c.gpus_per_thread = static_cast<int>(r.whole(n["gpus_per_thread"], key + ".gpus_per_thread", 1, 1 << 20));
    if ((c.gpus / c.nodes) % c.gpus_per_thread != 0)
      r.fail(n["gpus_per_thread"], key + ".gpus_per_thread",
             fmt::format("{} GPUs per thread do not divide the {} GPUs of a node evenly", c.gpus_per_thread,
                         c.gpus / c.nodes));
  }
  if (n["iters"]) c.iters = static_cast<int>(r.whole(n["iters"], key + ".iters", 1, 1000));
  if (c.bytes % c.element_bytes != 0)
    r.fail(n["bytes"], key + ".bytes", fmt::format("{} bytes is not a whole number of {} elements", c.bytes, c.dtype));
  if (n["algorithm"]) {
    const std::string a = r.text(n["algorithm"], key + ".algorithm");
    try {
      (void)sim::parse_collective_algorithm(a);
    } catch (const std::invalid_argument& e) {
      r.fail(n["algorithm"], key + ".algorithm", e.what());
    }
    c.algorithm = a;
  }
  return c;
}

TrainingConfig parse_training(const Reader& r, const YAML::Node& n, const std::string& key) {
  r.require_map(n, key);
  r.check_keys(n, key, {"model", "strategy", "gpus", "nodes", "batch_per_device", "measured_precision", "precision",
                        "twin_dtype", "memory_format", "inputs",
                        "optimizer", "optimizer_impl", "accumulation_steps", "dp_loss"});
  TrainingConfig t;
  t.model = r.text(r.required(n, "model", key), key + ".model");
  t.strategy = r.text(r.required(n, "strategy", key), key + ".strategy");
  if (t.strategy != "single" && t.strategy != "dp" && t.strategy != "ddp")
    r.fail(n["strategy"], key + ".strategy", fmt::format("'{}' is not single, dp or ddp", t.strategy));
  t.gpus = static_cast<int>(r.whole(r.required(n, "gpus", key), key + ".gpus", 1, 1024));
  if (n["nodes"]) t.nodes = static_cast<int>(r.whole(n["nodes"], key + ".nodes", 1, 4096));
  t.batch_per_device = r.whole(r.required(n, "batch_per_device", key), key + ".batch_per_device", 1, 1 << 24);
  t.measured_precision = r.text(r.required(n, "measured_precision", key), key + ".measured_precision");
  if (n["precision"] && n["twin_dtype"])
    r.fail(n["twin_dtype"], key + ".twin_dtype", "give precision or twin_dtype, not both");
  // A named choice, checked by its parser (which throws naming the value and the choices).
  auto named = [&](const char* field, std::string& out, auto parse) {
    if (!n[field]) return;
    out = r.text(n[field], key + "." + field);
    try {
      (void)parse(out);
    } catch (const std::invalid_argument& e) {
      r.fail(n[field], key + "." + field, e.what());
    }
  };
  named("precision", t.precision, [](const std::string& v) { return precision_from_name(v); });
  if (n["twin_dtype"]) {  // older key: a plain dtype run is PyTorch's defaults in that dtype
    t.precision = r.text(n["twin_dtype"], key + ".twin_dtype");
    if (t.precision != "f32" && t.precision != "f64")
      r.fail(n["twin_dtype"], key + ".twin_dtype", fmt::format("'{}' is not f32 or f64 (use precision:)", t.precision));
  }
  named("memory_format", t.memory_format, [](const std::string& v) { return memory_format_from_name(v); });
  named("inputs", t.inputs, [](const std::string& v) { return scenario::inputs_resident_from_name(v); });
  if (n["optimizer"]) t.optimizer = r.text(n["optimizer"], key + ".optimizer");
  named("optimizer_impl", t.optimizer_impl, [](const std::string& v) {
    const auto impl = parse_optimizer_impl(v);
    if (impl == OptimizerImpl::per_parameter)
      throw std::invalid_argument("'per_parameter' is dptwin's own kernel: give foreach, for_loop or fused");
    return impl;
  });
  if (n["accumulation_steps"])
    t.accumulation_steps = static_cast<int>(r.whole(n["accumulation_steps"], key + ".accumulation_steps", 1, 1 << 16));
  if (n["dp_loss"]) {
    t.dp_loss = r.text(n["dp_loss"], key + ".dp_loss");
    if (t.dp_loss != "gathered" && t.dp_loss != "per_replica")
      r.fail(n["dp_loss"], key + ".dp_loss", fmt::format("'{}' is not gathered or per_replica", t.dp_loss));
    if (t.strategy != "dp") r.fail(n["dp_loss"], key + ".dp_loss", "dp_loss applies to strategy dp only");
  }
  if (t.strategy == "single" && (t.gpus != 1 || t.nodes != 1))
    r.fail(n["strategy"], key + ".strategy", "single runs on 1 GPU of 1 node");
  return t;
}

void parse_measured(const Reader& r, const YAML::Node& n, const std::string& key, Entry& e) {
  r.require_map(n, key);
  r.check_keys(n, key, {"busbw_GB_per_s", "algbw_GB_per_s", "time_us", "samples_per_s"});
  if (n.size() != 1) r.fail(n, key, "give exactly one measured figure");
  const auto name = n.begin()->first.Scalar();  // check_keys took it as one of the four names
  if (name == "busbw_GB_per_s") e.metric = Metric::busbw_GB_per_s;
  else if (name == "algbw_GB_per_s") e.metric = Metric::algbw_GB_per_s;
  else if (name == "time_us") e.metric = Metric::time_us;
  else e.metric = Metric::samples_per_s;
  e.measured = r.positive(n.begin()->second, key + "." + name);
  const bool training_metric = e.metric == Metric::samples_per_s;
  if (training_metric != e.training.has_value())
    r.fail(n.begin()->first, key + "." + name,
           e.training ? "a training entry measures samples_per_s"
                      : "a collective entry measures busbw_GB_per_s, algbw_GB_per_s or time_us");
}

Entry parse_entry(const Reader& r, const YAML::Node& n, const std::string& key) {
  r.require_map(n, key);
  r.check_keys(n, key, {"id", "hardware_file", "overrides", "nccl_version", "collective", "training", "measured", "note"});
  Entry e;
  e.file = r.file;
  e.line = n.Mark().line + 1;
  e.id = r.text(r.required(n, "id", key), key + ".id");
  e.hardware_file = r.text(r.required(n, "hardware_file", key), key + ".hardware_file");
  if (const YAML::Node o = n["overrides"]) {
    r.require_map(o, key + ".overrides");
    for (const auto& kv : o) {
      const auto path = kv.first.Scalar();
      e.overrides.push_back({path, kv.second, r.at(kv.first, key + ".overrides." + path)});
    }
  }
  // The NCCL release the source ran: the hardware's nccl_version (checked when the hardware loads).
  if (const YAML::Node v = n["nccl_version"])
    e.overrides.push_back({"nccl_version", v, r.at(v, key + ".nccl_version")});
  if (n["collective"] && n["training"]) r.fail(n, key, "give collective or training, not both");
  if (n["collective"]) e.collective = parse_collective(r, n["collective"], key + ".collective");
  else if (n["training"]) e.training = parse_training(r, n["training"], key + ".training");
  else r.fail(n, key, "missing key 'collective' or 'training'");
  parse_measured(r, r.required(n, "measured", key), key + ".measured", e);
  if (n["note"]) e.note = r.text(n["note"], key + ".note");
  return e;
}

}  // namespace

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::busbw_GB_per_s: return "busbw_GB_per_s";
    case Metric::algbw_GB_per_s: return "algbw_GB_per_s";
    case Metric::time_us: return "time_us";
    case Metric::samples_per_s: return "samples_per_s";
  }
  return "?";
}

Source parse_source(const std::string& text, const std::string& file) {
  const Reader r{file};
  // The shared loader: syntax errors, keys that are not plain scalars (YAML's `? [a]: 1`),
  // duplicate keys, unsupported tags, depth and size, each named by file, line and key path.
  const YAML::Node root = sim::yaml_load_string(text, file);
  if (!root.IsMap()) throw std::invalid_argument(fmt::format("{}:1: expected a mapping (schema_version, source, entries)", file));
  // Every top-level YAML of the folder is read as a source; a hardware file placed beside
  // the sources (it has gpu: and nodes:) gets told where it belongs.
  if (root["gpu"] && root["gpus_per_node"] && !root["entries"])
    throw std::invalid_argument(fmt::format(
        "{}:1: this is a hardware file, not a fidelity source: every .yaml at the top of the folder is read as a "
        "source (schema_version, source, entries); put hardware files in a subfolder (as hardware/ in "
        "scenarios/measured/public/) and name them in an entry's hardware_file (hardware/NAME.yaml)",
        file));
  r.check_keys(root, "", {"schema_version", "source", "entries"});
  if (r.whole(r.required(root, "schema_version", "schema_version"), "schema_version", 1, 1000) != 1)
    r.fail(root["schema_version"], "schema_version", "only schema_version 1 is known");
  Source s;
  s.file = file;
  const YAML::Node src = r.required(root, "source", "source");
  r.require_map(src, "source");
  r.check_keys(src, "source", {"url", "title", "date", "hardware", "software", "notes"});
  s.url = r.text(r.required(src, "url", "source"), "source.url");
  if (s.url.rfind("https://", 0) != 0 && s.url.rfind("http://", 0) != 0)
    r.fail(src["url"], "source.url", fmt::format("'{}' is not an http(s) URL", s.url));
  s.date = r.text(r.required(src, "date", "source"), "source.date");
  s.hardware = r.text(r.required(src, "hardware", "source"), "source.hardware");
  s.software = r.text(r.required(src, "software", "source"), "source.software");
  if (src["title"]) s.title = r.text(src["title"], "source.title");
  if (src["notes"]) s.notes = r.text(src["notes"], "source.notes");
  const YAML::Node entries = r.required(root, "entries", "entries");
  if (!entries.IsSequence() || entries.size() == 0) r.fail(entries, "entries", "expected a non-empty list of entries");
  for (std::size_t i = 0; i < entries.size(); ++i)
    s.entries.push_back(parse_entry(r, entries[i], fmt::format("entries[{}]", i)));
  return s;
}

Source load_source(const std::filesystem::path& path) {
  require_regular_input(path, path.string());
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot be read", path.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_source(ss.str(), path.string());
}

std::vector<Source> load_table(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw std::invalid_argument(fmt::format("{}: not a directory of fidelity sources", dir.string()));
  std::vector<std::filesystem::path> files;
  for (const auto& f : std::filesystem::directory_iterator(dir))
    if (f.path().extension() == ".yaml") files.push_back(f.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::invalid_argument(fmt::format("{}: no *.yaml source files", dir.string()));
  std::vector<Source> out;
  std::map<std::string, std::string> seen;  // id -> FILE:LINE
  for (const auto& f : files) {
    out.push_back(load_source(f));
    for (const auto& e : out.back().entries) {
      const std::string here = fmt::format("{}:{}", e.file, e.line);
      if (auto [it, fresh] = seen.emplace(e.id, here); !fresh)
        throw std::invalid_argument(fmt::format("{}: id: '{}' is already used at {}", here, e.id, it->second));
    }
  }
  return out;
}

const char* entry_class_name(EntryClass c) {
  switch (c) {
    case EntryClass::collective_small: return "collective small (<= 64 KiB)";
    case EntryClass::collective_mid: return "collective mid";
    case EntryClass::collective_large: return "collective large (>= 256 MiB)";
    case EntryClass::training: return "training";
    case EntryClass::training_shm: return "training, NCCL via host memory";
  }
  return "?";
}

bool is_training(EntryClass c) { return c == EntryClass::training || c == EntryClass::training_shm; }

EntryClass classify(const Entry& e) {
  if (!e.collective) {
    const bool several = e.training && e.training->gpus > 1;  // GPUs of one node: SHM is within a node
    // The override read as the hardware file's reader reads it (`yes` is true there too).
    const bool shm = e.nccl_p2p_disable ||
                     std::any_of(e.overrides.begin(), e.overrides.end(), [](const scenario::Override& o) {
                       return o.path == "nccl_p2p_disable" && o.value.IsScalar() &&
                              sim::parse_yaml_bool(o.value.Scalar()).value_or(false);
                     });
    return several && shm ? EntryClass::training_shm : EntryClass::training;
  }
  if (e.collective->bytes <= 64 * kKiB) return EntryClass::collective_small;
  if (e.collective->bytes >= 256 * kMiB) return EntryClass::collective_large;
  return EntryClass::collective_mid;
}

sim::HardwareSpec entry_hardware(const Entry& e, const scenario::Library& lib, const std::filesystem::path& source_dir) {
  const std::string where = fmt::format("{}:{}: hardware_file: ", e.file, e.line);
  return scenario::load_hardware_with_overrides(e.hardware_file, e.overrides, lib, source_dir, where);
}

namespace {
// What an entry's hardware is cached under: its file, and its own id where it overrides it.
std::pair<std::filesystem::path, std::string> hardware_key(const Entry& e, const std::filesystem::path& source_dir) {
  return {source_dir, e.hardware_file + (e.overrides.empty() ? "" : "+" + e.id)};
}
}  // namespace

const std::string& EntryGpuNames::of(const Entry& e, const std::filesystem::path& source_dir) {
  auto key = hardware_key(e, source_dir);
  auto it = names_.find(key);
  if (it == names_.end()) it = names_.emplace(std::move(key), entry_gpu_name(e, lib_, source_dir)).first;
  return it->second;
}

void resolve_run_settings(std::vector<Source>& sources, const scenario::Library& lib,
                          const std::function<bool(const Entry&)>& which) {
  std::map<std::pair<std::filesystem::path, std::string>, bool> seen;
  for (auto& s : sources) {
    const auto source_dir = std::filesystem::path(s.file).parent_path();
    for (auto& e : s.entries) {
      if (which && !which(e)) continue;
      auto key = hardware_key(e, source_dir);
      auto it = seen.find(key);
      if (it == seen.end())
        it = seen.emplace(std::move(key), entry_hardware(e, lib, source_dir).nccl_p2p_disable).first;
      e.nccl_p2p_disable = it->second;
    }
  }
}

std::string entry_gpu_name(const Entry& e, const scenario::Library& lib, const std::filesystem::path& source_dir) {
  return entry_hardware(e, lib, source_dir).gpu.name;
}

}  // namespace dpt::fidelity
