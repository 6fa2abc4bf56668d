#include "engine/core/closest_name.hpp"
#include "engine/io/input_file.hpp"
#include "scenarios/scenario/scenario.hpp"

#include <algorithm>
#include <system_error>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "sim/net/yaml_util.hpp"
#include "scenarios/report/report_format.hpp"

namespace dpt::scenario {
namespace {

using sim::MapReader;

[[noreturn]] void fail_at(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + what);
}

std::string scalar_text(const YAML::Node& v) { return v.IsScalar() ? v.Scalar() : std::string("<not a scalar>"); }

std::int64_t as_int(const YAML::Node& v, const std::string& where) {
  try {
    if (v.IsScalar()) {
      const std::string s = v.Scalar();
      size_t used = 0;
      const long long x = std::stoll(s, &used);
      if (used == s.size()) return x;
    }
  } catch (const std::exception&) {
  }
  fail_at(where, fmt::format("expected an integer, got '{}'", scalar_text(v)));
}

double as_double(const YAML::Node& v, const std::string& where) {
  try {
    if (v.IsScalar()) {
      const std::string s = v.Scalar();
      size_t used = 0;
      const double x = std::stod(s, &used);
      if (used == s.size() && std::isfinite(x)) return x;
    }
  } catch (const std::exception&) {
  }
  fail_at(where, fmt::format("expected a number, got '{}'", scalar_text(v)));
}

std::string as_string(const YAML::Node& v, const std::string& where) {
  if (!v.IsScalar() || v.Scalar().empty()) fail_at(where, "expected a non-empty string");
  return v.Scalar();
}

int positive_count(std::int64_t x, const std::string& where) {
  if (x <= 0) fail_at(where, fmt::format("must be positive, got {}", x));
  if (x > 1'000'000) fail_at(where, fmt::format("must be at most 1000000, got {}", x));
  return static_cast<int>(x);
}

constexpr double kMinBucketCapMb = 1.0 / (1024 * 1024);
constexpr double kMaxBucketCapMb = 1024.0 * 1024;

OptimizerKind optimizer_from_name(const std::string& n, const std::string& where) {
  try {
    return parse_optimizer_kind(n);
  } catch (const std::invalid_argument& e) {
    fail_at(where, e.what());
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += fmt::format("{}{}", out.empty() ? "" : ", ", s);
  return out;
}

Target parse_target(MapReader r) {
  Target t;
  // Plausibility bounds: one sample per hour .. 10^12 samples per second; up to 10^15
  // samples; a deadline of one second .. about 114 years.
  t.samples_per_s = r.opt_double_in("samples_per_s", 1.0 / 3600, 1e12);
  t.samples = r.opt_double_in("samples", 1, 1e15);
  t.within_hours = r.opt_double_in("within_hours", 1.0 / 3600, 1e6);
  t.tokens_per_s = r.opt_double_in("tokens_per_s", 1.0 / 3600, 1e15);
  t.tokens = r.opt_double_in("tokens", 1, 1e18);
  t.tokens_per_sample = r.opt_double_in("tokens_per_sample", 1, 1e9);
  r.finish();
  if (t.samples_per_s && (t.samples || t.within_hours))
    r.fail("samples_per_s", "give samples_per_s, or samples and within_hours, not both");
  const int rates = (t.samples_per_s ? 1 : 0) + (t.tokens_per_s ? 1 : 0) + (t.samples ? 1 : 0) + (t.tokens ? 1 : 0);
  if (rates != 1)
    r.fail(t.samples_per_s ? "samples_per_s" : t.tokens_per_s ? "tokens_per_s" : "samples_per_s",
           rates == 0 ? "missing key (give samples_per_s, tokens_per_s, or samples or tokens with within_hours)"
                      : "give one of samples_per_s, tokens_per_s, samples with within_hours, tokens with within_hours");
  if ((t.samples_per_s || t.tokens_per_s) && t.within_hours)
    r.fail("within_hours", "goes with samples or tokens, not with a rate");
  if ((t.samples || t.tokens) && !t.within_hours) r.fail(t.samples ? "samples" : "tokens", "needs within_hours");
  // It converts a target in tokens and nothing else: with one in samples it would change
  // nothing the file's reader might expect it to.
  if (t.tokens_per_sample && !t.in_tokens())
    r.fail("tokens_per_sample", "converts a target in tokens (tokens_per_s, or tokens with within_hours); this "
                                "target is in samples");
  return t;
}

PlanSpec parse_plan(MapReader r) {
  PlanSpec p;
  for (auto& c : r.map_list("candidates")) {
    PlanCandidate pc;
    pc.where = c.where("hardware");
    pc.hardware = c.get_string("hardware");
    pc.price_per_gpu_hour = c.opt_double_in("price_per_gpu_hour", 0, 1e6);
    c.finish();
    p.candidates.push_back(pc);
  }
  if (p.candidates.empty()) r.fail("candidates", "expected at least one candidate");
  if (r.has("strategies")) {
    const YAML::Node s = r.node("strategies");
    if (!s.IsSequence() || s.size() == 0) r.fail("strategies", "expected a non-empty list of strategies");
    p.strategies.clear();
    for (const auto& v : s) {
      const std::string name = as_string(v, r.where("strategies"));
      strategy_kind_from_name(name);
      if (std::find(p.strategies.begin(), p.strategies.end(), name) != p.strategies.end())
        r.fail("strategies", fmt::format("'{}' given twice; give each strategy once", name));
      p.strategies.push_back(name);
    }
  }
  if (auto m = r.opt_int_in("max_gpus", 1, 65536)) p.max_gpus = static_cast<int>(*m);
  if (r.has("currency")) {
    p.currency = as_string(r.node("currency"), r.where("currency"));
    if (!valid_currency_code(p.currency))
      r.fail("currency", fmt::format("'{}': expected a currency code of 1 to 8 letters such as USD or EUR", p.currency));
  }
  p.train_samples = r.opt_double_in("train_samples", 1, 1e15);
  if (auto m = r.opt_double_in("tie_margin", 0, 1)) p.tie_margin = *m;
  if (auto h = r.opt_double_in("headroom", 0, 10)) p.headroom = *h;
  r.finish();
  return p;
}

}  // namespace

Library Library::at(const std::filesystem::path& scenarios_dir) {
  return {scenarios_dir / "hardware", scenarios_dir / "models"};
}

double Target::required_samples_per_s() const {
  if (samples_per_s) return *samples_per_s;
  if (samples && within_hours) return *samples / (*within_hours * 3600.0);
  throw std::invalid_argument("target: a target in tokens needs the model's tokens per sample (dptwin plan converts it)");
}

std::string Target::describe() const {
  // The user's figures as given (8,192 tokens/s, not 8,190); derived ones to what the
  // twin can claim.
  using report::format_count;
  using report::format_figure;
  if (in_tokens() && tokens_per_sample) {
    const std::string per = fmt::format("{} samples/s of {} tokens", format_figure(required_samples_per_s()),
                                        format_count(*tokens_per_sample));
    if (tokens_per_s) return fmt::format("{} tokens/s ({})", format_count(*tokens_per_s), per);
    return fmt::format("{} tokens in {} h ({})", format_count(*tokens), format_count(*within_hours), per);
  }
  if (in_tokens() && tokens_per_s) return format_count(*tokens_per_s) + " tokens/s";
  if (in_tokens()) return fmt::format("{} tokens in {} h", format_count(*tokens), format_count(*within_hours));
  if (samples_per_s) return format_count(*samples_per_s) + " samples/s";
  return fmt::format("{} samples in {} h ({} samples/s)", format_count(*samples), format_count(*within_hours),
                     format_figure(required_samples_per_s()));
}

Target target_in_samples(Target t, double tokens_per_sample) {
  if (!(tokens_per_sample > 0)) throw std::invalid_argument("target: tokens_per_sample must be positive");
  t.tokens_per_sample = tokens_per_sample;
  if (t.tokens_per_s) t.samples_per_s = *t.tokens_per_s / tokens_per_sample;
  if (t.tokens) t.samples = *t.tokens / tokens_per_sample;
  return t;
}

bool inputs_resident_from_name(const std::string& name) {
  if (name == "host") return false;
  if (name == "device") return true;
  throw std::invalid_argument(fmt::format(
      "unknown inputs '{}' (expected host: each step copies its batch, or device: the batch stays on the GPUs)", name));
}

const std::vector<std::string>& sweepable_fields() {
  static const std::vector<std::string> fields = {"hardware", "model",   "strategy",      "devices",
                                                  "nodes",    "gpus",    "batch",         "batch_per_device",
                                                  "dtype",    "precision", "memory_format", "inputs", "accumulate", "global_batch", "comm_hook",
                                                  "checkpoint",
                                                  "bucket_cap_mb", "optimizer", "optimizer_impl"};
  return fields;
}

void set_point_field(PointConfig& c, const std::string& field, const YAML::Node& v, const std::string& where) {
  if (field.rfind("overrides.", 0) == 0) {
    const std::string path = field.substr(10);
    if (path.empty()) fail_at(where, "an override needs a hardware field path, e.g. overrides.gpu.memory");
    if (!v.IsScalar() && !v.IsSequence()) fail_at(where, "expected a value for the hardware field");
    auto it = std::find_if(c.overrides.begin(), c.overrides.end(), [&](const Override& o) { return o.path == path; });
    if (it != c.overrides.end()) *it = {path, v, where};
    else c.overrides.push_back({path, v, where});
    return;
  }
  // Read the YAML value as the field's type; set_point_value checks it.
  if (field == "devices" || field == "nodes" || field == "gpus" || field == "batch" || field == "batch_per_device" ||
      field == "accumulate" || field == "global_batch")
    set_point_value(c, field, as_int(v, where), where);
  else if (field == "bucket_cap_mb")
    set_point_value(c, field, as_double(v, where), where);
  else if (field == "hardware" || field == "model" || field == "strategy" || field == "dtype" || field == "precision" ||
           field == "memory_format" || field == "inputs" || field == "optimizer" || field == "optimizer_impl" ||
           field == "comm_hook" || field == "checkpoint")
    set_point_value(c, field, as_string(v, where), where);
  else fail_at(where, fmt::format("unknown field (allowed: {}, overrides.<hardware field>)", join(sweepable_fields())));
}

void set_point_value(PointConfig& c, const std::string& field, const PointValue& v, const std::string& where) {
  auto text = [&] {
    const std::string& t = std::get<std::string>(v);
    if (t.empty()) fail_at(where, "expected a non-empty string");
    return t;
  };
  auto count = [&] { return positive_count(std::get<std::int64_t>(v), where); };
  if (field.rfind("overrides.", 0) == 0) {
    // A flag's value is text as the user wrote it ("40 GiB", "false"); one written as a YAML
    // flow list or map ("[]", "[[0, 1, 2]]", "{socket: 0, gpus: [0]}") is read as YAML, as
    // the same value in a scenario file is, so `--override 'nvlink.pairs=[]'` clears a list.
    const std::string& t = text();
    if (t.front() == '[' || t.front() == '{') {
      std::string label = where;
      while (!label.empty() && (label.back() == ' ' || label.back() == ':')) label.pop_back();
      set_point_field(c, field, sim::yaml_load_string(t, label), where);
    } else {
      set_point_field(c, field, YAML::Node(t), where);
    }
    return;
  }
  c.where[field] = where;
  if (field == "hardware") c.hardware = text();
  else if (field == "model") c.model = text();
  else if (field == "strategy") {
    const std::string s = text();
    if (s != "single" && s != "dp" && s != "ddp")
      fail_at(where, fmt::format("unknown strategy '{}' (allowed: single, dp, ddp)", s));
    c.strategy = s;
  } else if (field == "devices") c.devices = count();
  else if (field == "nodes") c.nodes = count();
  else if (field == "gpus") c.gpus = count();
  else if (field == "batch") c.batch = count();
  else if (field == "batch_per_device") c.batch_per_device = count();
  else if (field == "dtype") {
    const std::string s = text();
    if (s != "f32" && s != "f64")
      fail_at(where, fmt::format("unsupported dtype '{}' (allowed: f32, f64; bf16 and f16 training is a precision: "
                                 "bf16-amp, f16-amp, bf16)",
                                 s));
    c.dtype = dtype_from_name(s);
  } else if (field == "precision") {
    try {
      c.precision = precision_from_name(text());
    } catch (const std::invalid_argument& e) {
      fail_at(where, e.what());
    }
  } else if (field == "memory_format") {
    try {
      c.memory_format = memory_format_from_name(text());
    } catch (const std::invalid_argument& e) {
      fail_at(where, e.what());
    }
  } else if (field == "inputs") {
    try {
      c.inputs_resident = inputs_resident_from_name(text());
    } catch (const std::invalid_argument& e) {
      fail_at(where, e.what());
    }
  } else if (field == "accumulate") {
    c.accumulate = static_cast<int>(count());
  } else if (field == "global_batch") {
    c.global_batch = count();
  } else if (field == "checkpoint") {
    // every: each layer its own segment; none; N: N layers per segment.
    const std::string t = text();
    int layers = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), layers);
    if (t == "every") c.checkpoint_layers = 1;
    else if (t == "none") c.checkpoint_layers = 0;
    else if (ec == std::errc() && end == t.data() + t.size() && layers >= 1 && layers <= 1000000) c.checkpoint_layers = layers;
    else fail_at(where, fmt::format("checkpoint '{}' (allowed: none, every, or N layers per segment, 1..1000000)", t));
  } else if (field == "comm_hook") {
    try {
      c.comm_hook = comm_hook_from_name(text());
    } catch (const std::invalid_argument& e) {
      fail_at(where, e.what());
    }
  } else if (field == "bucket_cap_mb") {
    const double mb = std::get<double>(v);
    if (!(mb > 0)) fail_at(where, fmt::format("must be positive, got {}", mb));
    // PyTorch's bucket holds int(mb * 2^20) bytes: at least one byte, and at most 1 TiB here.
    if (!(mb >= kMinBucketCapMb && mb <= kMaxBucketCapMb))
      fail_at(where, fmt::format("{} MiB is outside {} .. {} MiB (1 byte .. 1 TiB)", mb, kMinBucketCapMb, kMaxBucketCapMb));
    c.bucket_cap_mb = mb;
  } else if (field == "optimizer") c.optimizer = optimizer_from_name(text(), where);
  else if (field == "optimizer_impl") {
    // per_parameter is the engine's own kernel, not a PyTorch implementation to predict.
    try {
      c.optimizer_impl = parse_optimizer_impl(text());
    } catch (const std::invalid_argument& e) {
      fail_at(where, e.what());
    }
    if (c.optimizer_impl == OptimizerImpl::per_parameter)
      fail_at(where, "'per_parameter' is dptwin's own kernel; a prediction takes PyTorch's: foreach (2.0 and later), "
                     "for_loop (before 2.0) or fused (fused=True, apex)");
  }
  else fail_at(where, fmt::format("unknown field (allowed: {}, overrides.<hardware field>)", join(sweepable_fields())));
}

void check_scenario_fields(const Scenario& s) {
  // Cross-field rules that need no library.
  auto swept = [&](const std::string& f) {
    return std::any_of(s.sweep.begin(), s.sweep.end(), [&](const SweepAxis& a) { return a.name == f; });
  };
  auto present = [&](const std::string& f, bool in_base) { return in_base || swept(f); };
  for (const char* f : {"hardware", "model", "strategy"})
    // A plan names its hardware and strategies in its own section.
    if (!present(f, s.base.where.count(f) > 0) && !(s.plan && std::string(f) != "model"))
      fail_at(fmt::format("{}: {}: ", s.file, f), "missing key (give it at the top level or as a sweep axis)");
  const bool batch = present("batch", s.base.batch.has_value());
  const bool per_device = present("batch_per_device", s.base.batch_per_device.has_value());
  if (batch && per_device)
    fail_at(s.base.where.count("batch") ? s.base.where.at("batch") : fmt::format("{}: batch: ", s.file),
            "give batch (global) or batch_per_device, not both");
  if (!batch && !per_device) fail_at(fmt::format("{}: batch_per_device: ", s.file), "missing key (or batch)");
  const bool gpus = present("gpus", s.base.gpus.has_value());
  for (const char* f : {"devices", "nodes"})
    if (gpus && present(f, s.base.where.count(f) > 0))
      fail_at(s.base.where.count(f) ? s.base.where.at(f) : fmt::format("{}: {}: ", s.file, f),
              "give gpus (total) or devices and nodes, not both");
}

Scenario parse_scenario(const std::string& text, const std::string& file_label, const std::filesystem::path& dir) {
  Scenario s;
  s.file = file_label;
  s.dir = dir;
  s.text = text;
  const YAML::Node root = sim::yaml_load_string(text, file_label);
  MapReader top(root, file_label, "");
  const auto version = top.get_int("schema_version");
  if (version != kScenarioSchemaVersion)
    top.fail("schema_version",
             fmt::format("unsupported scenario schema version {} (this dptwin reads {})", version, kScenarioSchemaVersion));
  s.name = top.opt_string("name").value_or(std::filesystem::path(file_label).stem().string());
  s.question = top.opt_string("question").value_or("");
  for (const auto& field : sweepable_fields())
    if (top.has(field)) set_point_field(s.base, field, top.node(field), top.where(field));
  if (top.has("overrides")) {
    const YAML::Node ov = top.node("overrides");
    if (!ov.IsMap()) top.fail("overrides", "expected a mapping of hardware field paths to values");
    for (auto it = ov.begin(); it != ov.end(); ++it) {
      const std::string path = it->first.as<std::string>();
      set_point_field(s.base, "overrides." + path, it->second,
                      sim::yaml_where(file_label, it->second) + "overrides." + path + ": ");
    }
  }
  if (top.has("target")) s.target = parse_target(top.map("target"));
  if (top.has("plan")) s.plan = parse_plan(top.map("plan"));
  if (top.has("sweep")) {
    const YAML::Node sw = top.node("sweep");
    if (!sw.IsMap() || sw.size() == 0) top.fail("sweep", "expected a mapping of axis names to lists of values");
    for (auto it = sw.begin(); it != sw.end(); ++it) {
      SweepAxis axis;
      axis.name = it->first.as<std::string>();
      const std::string key_where = sim::yaml_where(file_label, it->first) + "sweep." + axis.name + ": ";
      const bool known = axis.name.rfind("overrides.", 0) == 0 ||
                         std::find(sweepable_fields().begin(), sweepable_fields().end(), axis.name) !=
                             sweepable_fields().end();
      if (!known)
        fail_at(key_where, fmt::format("unknown sweep axis (allowed: {}, overrides.<hardware field>)",
                                       join(sweepable_fields())));
      if (!it->second.IsSequence() || it->second.size() == 0) fail_at(key_where, "expected a non-empty list of values");
      for (size_t i = 0; i < it->second.size(); ++i) {
        const YAML::Node v = it->second[i];
        const std::string where = sim::yaml_where(file_label, v) + fmt::format("sweep.{}[{}]: ", axis.name, i);
        // Check the value's type now, on a scratch config, so a bad value fails at load.
        PointConfig scratch;
        set_point_field(scratch, axis.name, v, where);
        // A value given twice ran twice, the same point under two indices (an outside-user
        // review): scalars are compared as written.
        if (v.IsScalar())
          for (size_t k = 0; k < axis.values.size(); ++k)
            if (axis.values[k].IsScalar() && axis.values[k].Scalar() == v.Scalar())
              fail_at(where, fmt::format("'{}' is already {}[{}]; give each value once", v.Scalar(), axis.name, k));
        axis.values.push_back(v);
        axis.where.push_back(where);
      }
      for (const auto& other : s.sweep)
        if (other.name == axis.name) fail_at(key_where, "axis given twice");
      s.sweep.push_back(std::move(axis));
    }
  }
  top.finish();
  check_scenario_fields(s);
  return s;
}

Scenario load_scenario_file(const std::filesystem::path& path) {
  require_regular_input(path, path.string());
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot open scenario file", path.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_scenario(ss.str(), path.string(), path.parent_path().empty() ? "." : path.parent_path());
}

sim::HardwareSpec load_hardware_with_overrides(const std::string& name_or_path, const std::vector<Override>& overrides,
                                               const Library& lib, const std::filesystem::path& dir,
                                               const std::string& where) {
  namespace fs = std::filesystem;
  const bool is_path = name_or_path.find('/') != std::string::npos || fs::path(name_or_path).extension() == ".yaml";
  fs::path file;
  std::error_code ec;  // a name too long for a file name is just not there
  if (is_path) {
    // Relative to the working directory: as given (joined to "." it read "././bad.yaml").
    file = fs::path(name_or_path).is_absolute() || dir == "." ? fs::path(name_or_path) : dir / name_or_path;
    const bool there = fs::exists(file, ec);
    // A path that cannot be looked at (a link loop, a component that is a file) says why.
    if (!there && ec && ec != std::errc::no_such_file_or_directory)
      fail_at(where, fmt::format("hardware file '{}' cannot be read: {}", name_or_path, ec.message()));
    if (!there)
      fail_at(where, fmt::format("hardware file {} does not exist{}", name_or_path,
                                 file.string() == name_or_path || dir == "." ? ""
                                                                             : fmt::format(" (looked for {})", file.string())));
  } else {
    // The library's file, else the fidelity table's machine of that name.
    const auto found = sim::find_hardware_file(name_or_path, lib.hardware_dir);
    if (!found)
      fail_at(where,
              fmt::format("unknown hardware '{}'{}", name_or_path,
                          sim::unknown_hardware_hint(name_or_path, lib.hardware_dir, false, "; or a path to a .yaml file")));
    file = *found;
  }
  // The file on its own first, so its own errors cite its own lines.
  sim::HardwareSpec hw = sim::load_hardware_file(file);
  if (overrides.empty()) return hw;
  YAML::Node root = sim::yaml_load_file(file.string());
  for (const auto& o : overrides) {
    // The node count a point runs on is the scenario's (nodes, gpus, --nodes): the
    // hardware is resized to it, so an override of the file's would change nothing.
    if (o.path == "nodes")
      fail_at(o.where, "the nodes a point runs on are the scenario's `nodes` (or `gpus`, --nodes, --gpus), which "
                       "resize the hardware: an override of the file's node count has no effect");
    // Walk the dotted path; the leaf may be new (the hardware parser then judges it).
    std::vector<std::string> parts;
    std::stringstream ps(o.path);
    for (std::string part; std::getline(ps, part, '.');) parts.push_back(part);
    YAML::Node node = root;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      YAML::Node next = node[parts[i]];
      if (!next.IsDefined() || !next.IsMap())
        fail_at(o.where, fmt::format("hardware {} has no section '{}'", hw.name,
                                     fmt::join(parts.begin(), parts.begin() + static_cast<long>(i) + 1, ".")));
      node.reset(next);  // rebinding (operator= would overwrite the parent's content)
    }
    node[parts.back()] = YAML::Clone(o.value);
    YAML::Emitter out;
    out << root;
    const std::string label = file.string();
    try {
      hw = sim::parse_hardware_yaml(out.c_str(), label);
    } catch (const std::invalid_argument& e) {
      // The parser cites lines of the re-emitted text; cite the override instead,
      // keeping the parser's "key: what".
      std::string msg = e.what();
      if (msg.rfind(label, 0) == 0)
        if (const auto p = msg.find(": ", label.size()); p != std::string::npos) msg = msg.substr(p + 2);
      if (msg.rfind(o.path + ": ", 0) == 0) msg = msg.substr(o.path.size() + 2);  // the override already names it
      fail_at(o.where, msg);
    }
  }
  return hw;
}

}  // namespace dpt::scenario
