// Validated YAML reading: see yaml_util.hpp.
#include "engine/io/input_file.hpp"
#include "sim/net/yaml_util.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "engine/core/closest_name.hpp"

namespace dpt::sim {

namespace {

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// Splits "25.5 GB/s" into 25.5 and "GB/s"; the unit may be empty.
std::pair<double, std::string> split_number_unit(std::string_view text, const std::string& where) {
  const std::string t = trim(text);
  size_t i = 0;
  // Longest prefix that parses as a number (digits, sign, dot, exponent).
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.' || t[i] == '+' ||
                          t[i] == '-' || ((t[i] == 'e' || t[i] == 'E') && i + 1 < t.size() &&
                                          (std::isdigit(static_cast<unsigned char>(t[i + 1])) ||
                                           t[i + 1] == '-' || t[i + 1] == '+'))))
    ++i;
  const std::string num = t.substr(0, i);
  double value = 0;
  auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
  if (num.empty() || ec != std::errc() || ptr != num.data() + num.size() || !std::isfinite(value))
    throw std::invalid_argument(where + fmt::format("expected a number and a unit, got '{}'", t));
  return {value, trim(std::string_view(t).substr(i))};
}

// The factor of `unit` in `table`. A missing unit is an error: a bare "10" could be
// seconds or microseconds, bytes or GiB, and a typo then costs a factor of a million.
double unit_factor(const std::string& unit, std::initializer_list<std::pair<const char*, double>> table,
                   const std::string& where, const std::string& text, const char* kind) {
  std::string allowed;
  for (auto& [name, factor] : table) {
    if (unit == name) return factor;
    allowed += allowed.empty() ? name : std::string(", ") + name;
  }
  if (unit.empty())
    throw std::invalid_argument(
        where + fmt::format("'{}' has no unit; a {} needs one (allowed: {})", trim(text), kind, allowed));
  throw std::invalid_argument(
      where + fmt::format("unknown {} unit '{}' in '{}' (allowed: {})", kind, unit, trim(text), allowed));
}

// A bound printed in the largest unit of `units` (ascending factors) that keeps it >= 1.
std::string format_bound(double v, std::initializer_list<std::pair<const char*, double>> units) {
  if (v == 0) return fmt::format("0 {}", units.begin()->first);
  auto chosen = *units.begin();
  for (const auto& u : units)
    if (std::fabs(v) >= u.second * (1 - 1e-12)) chosen = u;
  return fmt::format("{:g} {}", v / chosen.second, chosen.first);
}

constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxNodes = 1'000'000;

bool allowed_tag(const std::string& tag) {
  static const char* const ok[] = {"",
                                   "?",
                                   "!",
                                   "tag:yaml.org,2002:str",
                                   "tag:yaml.org,2002:int",
                                   "tag:yaml.org,2002:float",
                                   "tag:yaml.org,2002:bool",
                                   "tag:yaml.org,2002:null",
                                   "tag:yaml.org,2002:map",
                                   "tag:yaml.org,2002:seq"};
  for (const char* t : ok)
    if (tag == t) return true;
  return false;
}

std::string shown_tag(const std::string& tag) {
  const std::string core = "tag:yaml.org,2002:";
  return tag.rfind(core, 0) == 0 ? "!!" + tag.substr(core.size()) : tag;
}

// Walks the whole document once: duplicate keys, non-scalar keys, unsupported tags,
// nesting depth and node count (see the header comment).
void check_document(const YAML::Node& n, const std::string& file, const std::string& path, int depth,
                    std::size_t& nodes) {
  const std::string name = path.empty() ? "document" : path;
  if (++nodes > kMaxNodes)
    throw std::invalid_argument(
        fmt::format("{}{}: more than {} YAML nodes (aliases counted each time they are used)", yaml_where(file, n),
                    name, kMaxNodes));
  if (depth > kMaxDepth)
    throw std::invalid_argument(fmt::format("{}{}: nested deeper than {} levels", yaml_where(file, n), name, kMaxDepth));
  if (!allowed_tag(n.Tag()))
    throw std::invalid_argument(fmt::format("{}{}: YAML tag '{}' is not supported (plain values only)",
                                            yaml_where(file, n), name, shown_tag(n.Tag())));
  if (n.IsSequence()) {
    for (std::size_t i = 0; i < n.size(); ++i)
      check_document(n[i], file, fmt::format("{}[{}]", path, i), depth + 1, nodes);
  } else if (n.IsMap()) {
    std::map<std::string, int> first_line;  // key -> 1-based line of its first occurrence
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar())
        throw std::invalid_argument(
            fmt::format("{}{}: a key must be a plain string, not a list or mapping", yaml_where(file, it->first), name));
      const std::string key = it->first.Scalar();
      const std::string key_path = path.empty() ? key : path + "." + key;
      const int line = it->first.Mark().is_null() ? 0 : it->first.Mark().line + 1;
      if (const auto seen = first_line.find(key); seen != first_line.end())
        throw std::invalid_argument(fmt::format("{}{}: duplicate key (first given at line {})",
                                                yaml_where(file, it->first), key_path, seen->second));
      first_line.emplace(key, line);
      check_document(it->first, file, key_path, depth + 1, nodes);
      check_document(it->second, file, key_path, depth + 1, nodes);
    }
  }
}

}  // namespace

YAML::Node yaml_load_file(const std::string& path) {
  require_regular_input(path, path);
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot open file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return yaml_load_string(ss.str(), path);
}

YAML::Node yaml_load_string(const std::string& text, const std::string& file_label) {
  // A second document ('---') was ignored without a word (an outside-user review). Found in
  // the text, before loading: YAML::LoadAll builds every document first, which a fuzzed file
  // of many aliased documents made take minutes. A marker starts a line; the first may open
  // the file's one document (after comments and blank lines).
  {
    std::istringstream lines(text);
    bool content = false;
    int number = 0;
    for (std::string l; std::getline(lines, l);) {
      ++number;
      const bool marker = (l.rfind("---", 0) == 0 || l.rfind("...", 0) == 0) &&
                          (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
      if (marker && l[0] == '-' && !content) {
        content = true;  // the explicit start of the first document
        continue;
      }
      if (marker) {
        // "..." ends the document: only what follows it makes a second.
        if (l[0] == '.') {
          for (std::string rest; std::getline(lines, rest);)
            if (rest.find_first_not_of(" \t\r") != std::string::npos && rest[rest.find_first_not_of(" \t\r")] != '#')
              throw std::invalid_argument(
                  fmt::format("{}:{}: a second YAML document (after '...'): a dptwin file holds one", file_label, number));
          break;
        }
        throw std::invalid_argument(
            fmt::format("{}:{}: a second YAML document ('---'): a dptwin file holds one", file_label, number));
      }
      const size_t first = l.find_first_not_of(" \t\r");
      if (first != std::string::npos && l[first] != '#') content = true;
    }
  }
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw std::invalid_argument(fmt::format("{}:{}: YAML syntax error: {}", file_label, e.mark.line + 1, e.msg));
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(fmt::format("{}: YAML error: {}", file_label, e.msg));
  }
  std::size_t nodes = 0;
  check_document(doc, file_label, "", 0, nodes);
  return doc;
}

std::string format_time_bound(Seconds s) {
  return format_bound(s, {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}});
}
std::string format_bandwidth_bound(BytesPerSecond b) {
  return format_bound(b, {{"B/s", 1.0}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12}, {"PB/s", 1e15}});
}
std::string format_bytes_bound(Bytes b) {
  const double k = 1024.0;
  return format_bound(static_cast<double>(b), {{"B", 1.0}, {"KiB", k}, {"MiB", k * k}, {"GiB", k * k * k},
                                               {"TiB", k * k * k * k}, {"PiB", k * k * k * k * k}});
}
std::string format_flops_bound(FlopsPerSecond f) {
  return format_bound(f, {{"FLOPS", 1.0}, {"GFLOPS", 1e9}, {"TFLOPS", 1e12}, {"PFLOPS", 1e15}, {"EFLOPS", 1e18}});
}

std::string yaml_where(const std::string& file, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.is_null()) return file + ": ";
  return fmt::format("{}:{}: ", file, m.line + 1);
}

Bytes parse_bytes_quantity(std::string_view text, const std::string& where) {
  auto [value, unit] = split_number_unit(text, where);
  const double f = unit_factor(unit,
                               {{"B", 1.0}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
                                {"KiB", 1024.0}, {"MiB", 1024.0 * 1024}, {"GiB", 1024.0 * 1024 * 1024},
                                {"TiB", 1024.0 * 1024 * 1024 * 1024}},
                               where, std::string(text), "size");
  const double bytes = value * f;
  if (bytes > 9.2e18 || bytes < -9.2e18) throw std::invalid_argument(where + fmt::format("size '{}' is too large", trim(text)));
  if (bytes != std::floor(bytes))
    throw std::invalid_argument(where + fmt::format("size '{}' is not a whole number of bytes", trim(text)));
  return static_cast<Bytes>(bytes);
}

BytesPerSecond parse_bandwidth_quantity(std::string_view text, const std::string& where) {
  auto [value, unit] = split_number_unit(text, where);
  // Gb/s etc. are bits per second (network line rates): divide by 8.
  const double f = unit_factor(unit,
                               {{"B/s", 1.0}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9},
                                {"TB/s", 1e12}, {"KiB/s", 1024.0}, {"MiB/s", 1024.0 * 1024},
                                {"GiB/s", 1024.0 * 1024 * 1024}, {"Mb/s", 1e6 / 8}, {"Gb/s", 1e9 / 8},
                                {"Tb/s", 1e12 / 8}},
                               where, std::string(text), "bandwidth");
  return value * f;
}

FlopsPerSecond parse_flops_quantity(std::string_view text, const std::string& where) {
  auto [value, unit] = split_number_unit(text, where);
  const double f = unit_factor(unit, {{"FLOPS", 1.0}, {"GFLOPS", 1e9}, {"TFLOPS", 1e12}, {"PFLOPS", 1e15}},
                               where, std::string(text), "flop rate");
  return value * f;
}

Seconds parse_time_quantity(std::string_view text, const std::string& where) {
  auto [value, unit] = split_number_unit(text, where);
  const double f =
      unit_factor(unit, {{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}}, where, std::string(text), "time");
  return value * f;
}

// ---- MapReader ---------------------------------------------------------------------------

MapReader::MapReader(const YAML::Node& node, std::string file, std::string path)
    : node_(node), file_(std::move(file)), path_(std::move(path)) {
  if (!node_.IsMap())
    throw std::invalid_argument(
        fmt::format("{}{}: expected a mapping", yaml_where(file_, node_), path_.empty() ? "document" : path_));
}

std::string MapReader::key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

std::string MapReader::where(const std::string& key) const {
  const YAML::Node v = node_[key];
  // A key written with no value: its own line (an empty value's mark is the next token's).
  if (v.IsDefined() && v.IsNull())
    for (auto it = node_.begin(); it != node_.end(); ++it)
      if (it->first.IsScalar() && it->first.Scalar() == key) return yaml_where(file_, it->first) + key_path(key) + ": ";
  return yaml_where(file_, v.IsDefined() ? v : node_) + key_path(key) + ": ";
}

void MapReader::fail(const std::string& key, const std::string& message) const {
  throw std::invalid_argument(where(key) + message);
}

bool MapReader::has(const std::string& key) {
  asked_.insert(key);
  return node_[key].IsDefined() && !node_[key].IsNull();
}

YAML::Node MapReader::child(const std::string& key) {
  asked_.insert(key);
  const YAML::Node v = node_[key];
  if (!v.IsDefined()) {
    // A misspelled key is the likelier mistake than a forgotten one: name the line the
    // author wrote (kernel_launch_latancy for kernel_launch_latency), not the map's.
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      if (!it->first.IsScalar() || asked_.count(it->first.Scalar())) continue;
      if (closest_name(it->first.Scalar(), {key}))
        throw std::invalid_argument(yaml_where(file_, it->first) + key_path(it->first.Scalar()) +
                                    fmt::format(": unknown key; did you mean '{}'? ({} is required)", key,
                                                key_path(key)));
    }
    // A typo too far from the key to suggest (peer2peer for peer_to_peer) is still on the
    // page: name what the map holds so the reader sees it beside the key asked for.
    std::string present;
    if (node_.IsMap())
      for (auto it = node_.begin(); it != node_.end(); ++it)
        if (it->first.IsScalar()) present += (present.empty() ? "" : ", ") + it->first.Scalar();
    throw std::invalid_argument(yaml_where(file_, node_) + key_path(key) + ": missing key" +
                                (present.empty() ? std::string() : fmt::format(" (this map has: {})", present)));
  }
  read_.insert(key);
  return v;
}

YAML::Node MapReader::node(const std::string& key) { return child(key); }

MapReader MapReader::map(const std::string& key) {
  const YAML::Node v = child(key);
  if (!v.IsMap()) fail(key, "expected a mapping");
  return MapReader(v, file_, key_path(key));
}

std::vector<MapReader> MapReader::map_list(const std::string& key) {
  const YAML::Node v = child(key);
  if (!v.IsSequence()) fail(key, "expected a list");
  std::vector<MapReader> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", key_path(key), i);
    if (!v[i].IsMap()) throw std::invalid_argument(yaml_where(file_, v[i]) + p + ": expected a mapping");
    out.emplace_back(v[i], file_, p);
  }
  return out;
}

namespace {
std::string scalar_text(const YAML::Node& v) {
  if (v.IsScalar()) return v.Scalar();
  if (v.IsSequence()) return "a list";
  if (v.IsMap()) return "a mapping";
  return "nothing";
}
}  // namespace

std::string MapReader::get_string(const std::string& key) {
  const YAML::Node v = child(key);
  if (!v.IsScalar()) fail(key, fmt::format("expected a string, got {}", scalar_text(v)));
  return v.Scalar();
}

std::int64_t MapReader::get_int(const std::string& key) {
  const YAML::Node v = child(key);
  if (!v.IsScalar()) fail(key, fmt::format("expected an integer, got {}", scalar_text(v)));
  const std::string& s = v.Scalar();
  std::int64_t out = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
    fail(key, fmt::format("expected an integer, got '{}'", s));
  return out;
}

double MapReader::get_double(const std::string& key) {
  const YAML::Node v = child(key);
  if (!v.IsScalar()) fail(key, fmt::format("expected a number, got {}", scalar_text(v)));
  const std::string& s = v.Scalar();
  double out = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(out))
    fail(key, fmt::format("expected a number, got '{}'", s));
  return out;
}

std::optional<bool> parse_yaml_bool(std::string_view s) {
  if (s == "true" || s == "True" || s == "yes") return true;
  if (s == "false" || s == "False" || s == "no") return false;
  return std::nullopt;
}

bool MapReader::get_bool(const std::string& key) {
  const YAML::Node v = child(key);
  if (!v.IsScalar()) fail(key, fmt::format("expected a boolean, got {}", scalar_text(v)));
  if (const auto b = parse_yaml_bool(v.Scalar())) return *b;
  fail(key, fmt::format("expected a boolean: true or false (True, False, yes and no are read too), got '{}'",
                        v.Scalar()));
}

std::vector<std::int64_t> MapReader::get_int_list(const std::string& key) {
  const YAML::Node v = child(key);
  if (!v.IsSequence()) fail(key, fmt::format("expected a list of integers, got {}", scalar_text(v)));
  std::vector<std::int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string s = v[i].IsScalar() ? v[i].Scalar() : std::string();
    std::int64_t x = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
      throw std::invalid_argument(yaml_where(file_, v[i]) + fmt::format("{}[{}]: expected an integer, got {}",
                                                                        key_path(key), i,
                                                                        s.empty() ? scalar_text(v[i]) : "'" + s + "'"));
    out.push_back(x);
  }
  return out;
}

std::optional<std::string> MapReader::opt_string(const std::string& key) {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}
std::optional<std::int64_t> MapReader::opt_int(const std::string& key) {
  if (!has(key)) return std::nullopt;
  return get_int(key);
}
std::optional<double> MapReader::opt_double(const std::string& key) {
  if (!has(key)) return std::nullopt;
  return get_double(key);
}
std::optional<bool> MapReader::opt_bool(const std::string& key) {
  asked_.insert(key);
  const YAML::Node v = node_[key];
  if (!v.IsDefined()) return std::nullopt;
  // `key:` with nothing after it is a slip, not "default": refused as get_bool refuses it.
  if (v.IsNull()) fail(key, "expected a boolean (true or false), got nothing");
  return get_bool(key);
}

Bytes MapReader::get_bytes(const std::string& key) {
  const YAML::Node v = child(key);
  if (!v.IsScalar()) fail(key, fmt::format("expected a size, got {}", scalar_text(v)));
  return parse_bytes_quantity(v.Scalar(), where(key));
}
BytesPerSecond MapReader::get_bandwidth(const std::string& key) {
  const YAML::Node v = child(key);
  if (!v.IsScalar()) fail(key, fmt::format("expected a bandwidth, got {}", scalar_text(v)));
  return parse_bandwidth_quantity(v.Scalar(), where(key));
}
FlopsPerSecond MapReader::get_flops(const std::string& key) {
  const YAML::Node v = child(key);
  if (!v.IsScalar()) fail(key, fmt::format("expected a flop rate, got {}", scalar_text(v)));
  return parse_flops_quantity(v.Scalar(), where(key));
}
Seconds MapReader::get_time(const std::string& key) {
  const YAML::Node v = child(key);
  if (!v.IsScalar()) fail(key, fmt::format("expected a duration, got {}", scalar_text(v)));
  return parse_time_quantity(v.Scalar(), where(key));
}
std::optional<Bytes> MapReader::opt_bytes(const std::string& key) {
  if (!has(key)) return std::nullopt;
  return get_bytes(key);
}
std::optional<BytesPerSecond> MapReader::opt_bandwidth(const std::string& key) {
  if (!has(key)) return std::nullopt;
  return get_bandwidth(key);
}
std::optional<FlopsPerSecond> MapReader::opt_flops(const std::string& key) {
  if (!has(key)) return std::nullopt;
  return get_flops(key);
}
std::optional<Seconds> MapReader::opt_time(const std::string& key) {
  if (!has(key)) return std::nullopt;
  return get_time(key);
}

void MapReader::check_in(const std::string& key, double value, double lo, double hi, const std::string& lo_text,
                         const std::string& hi_text) {
  if (value >= lo && value <= hi) return;
  const YAML::Node v = node_[key];
  const std::string text = v.IsDefined() && v.IsScalar() ? trim(v.Scalar()) : fmt::format("{:g}", value);
  fail(key, fmt::format("{} is outside {} .. {}", text, lo_text, hi_text));
}

std::int64_t MapReader::get_int_in(const std::string& key, std::int64_t lo, std::int64_t hi) {
  const std::int64_t v = get_int(key);
  if (v < lo || v > hi) fail(key, fmt::format("{} is outside {} .. {}", v, lo, hi));
  return v;
}
std::optional<std::int64_t> MapReader::opt_int_in(const std::string& key, std::int64_t lo, std::int64_t hi) {
  if (!has(key)) return std::nullopt;
  return get_int_in(key, lo, hi);
}
double MapReader::get_double_in(const std::string& key, double lo, double hi) {
  const double v = get_double(key);
  check_in(key, v, lo, hi, fmt::format("{:g}", lo), fmt::format("{:g}", hi));
  return v;
}
std::optional<double> MapReader::opt_double_in(const std::string& key, double lo, double hi) {
  if (!has(key)) return std::nullopt;
  return get_double_in(key, lo, hi);
}
Bytes MapReader::get_bytes_in(const std::string& key, Bytes lo, Bytes hi) {
  const Bytes v = get_bytes(key);
  check_in(key, static_cast<double>(v), static_cast<double>(lo), static_cast<double>(hi), format_bytes_bound(lo),
           format_bytes_bound(hi));
  return v;
}
BytesPerSecond MapReader::get_bandwidth_in(const std::string& key, BytesPerSecond lo, BytesPerSecond hi) {
  const BytesPerSecond v = get_bandwidth(key);
  check_in(key, v, lo, hi, format_bandwidth_bound(lo), format_bandwidth_bound(hi));
  return v;
}
BytesPerSecond MapReader::get_byte_bandwidth_in(const std::string& key, BytesPerSecond lo, BytesPerSecond hi) {
  const YAML::Node v = child(key);
  if (v.IsScalar()) {
    const std::string text = trim(v.Scalar());
    for (const char* bits : {"Mb/s", "Gb/s", "Tb/s"}) {
      const std::string_view unit(bits);
      if (text.size() > unit.size() && text.compare(text.size() - unit.size(), unit.size(), unit) == 0)
        fail(key, fmt::format("'{}' is in bits per second ({} GB/s); this bandwidth is quoted in bytes per "
                              "second (GB/s, TB/s): write the datasheet's byte figure",
                              text, fmt::format("{:.6g}", parse_bandwidth_quantity(text, where(key)) / 1e9)));
    }
  }
  return get_bandwidth_in(key, lo, hi);
}
FlopsPerSecond MapReader::get_flops_in(const std::string& key, FlopsPerSecond lo, FlopsPerSecond hi) {
  const FlopsPerSecond v = get_flops(key);
  check_in(key, v, lo, hi, format_flops_bound(lo), format_flops_bound(hi));
  return v;
}
std::optional<FlopsPerSecond> MapReader::opt_flops_in(const std::string& key, FlopsPerSecond lo, FlopsPerSecond hi) {
  if (!has(key)) return std::nullopt;
  return get_flops_in(key, lo, hi);
}
Seconds MapReader::get_time_in(const std::string& key, Seconds lo, Seconds hi) {
  const Seconds v = get_time(key);
  check_in(key, v, lo, hi, format_time_bound(lo), format_time_bound(hi));
  return v;
}

void MapReader::require_positive(const std::string& key, double value) const {
  if (!(value > 0)) fail(key, fmt::format("must be positive, got {}", value));
}
void MapReader::require_non_negative(const std::string& key, double value) const {
  if (!(value >= 0)) fail(key, fmt::format("must not be negative, got {}", value));
}
void MapReader::require_range(const std::string& key, double value, double lo, double hi) const {
  if (!(value >= lo && value <= hi)) fail(key, fmt::format("must be in [{}, {}], got {}", lo, hi, value));
}
std::int64_t MapReader::get_positive_int(const std::string& key) {
  const std::int64_t v = get_int(key);
  require_positive(key, static_cast<double>(v));
  return v;
}
double MapReader::get_positive_double(const std::string& key) {
  const double v = get_double(key);
  require_positive(key, v);
  return v;
}

void MapReader::finish() const {
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string key = it->first.Scalar();
    if (read_.count(key) || asked_.count(key)) continue;
    std::string allowed;
    for (const auto& a : asked_) allowed += allowed.empty() ? a : ", " + a;
    const auto near = closest_name(key, std::vector<std::string>(asked_.begin(), asked_.end()));
    throw std::invalid_argument(yaml_where(file_, it->first) + key_path(key) + ": unknown key" +
                                (near ? fmt::format("; did you mean '{}'?", *near) : std::string()) +
                                fmt::format(" (allowed: {})", allowed));
  }
}

}  // namespace dpt::sim
