// Validated YAML reading for dptwin's configuration files (hardware, scenarios).
//
// Every error is a std::invalid_argument whose message starts with
// "FILE:LINE: " (LINE is 1-based, from yaml-cpp's Mark) and names the key by its
// full dotted path, e.g.
//   "scenarios/hardware/x.yaml:12: pcie.lanes: must be positive, got 0".
// Unknown keys are rejected: a MapReader remembers which keys were read and
// finish() names the first key that was not, with that key's own line.
//
// Quantities carry units so files say what they mean:
//   bytes:      80 GiB, 48 GB, 512 KiB, 4096 B        (KiB/MiB/GiB/TiB = 1024^k, KB/MB/GB/TB = 1000^k)
//   bandwidth:  25 GB/s, 2 TB/s, 24.5 GiB/s, 200 Gb/s (Gb/s are bits: 200 Gb/s = 25e9 B/s)
//   flops:      989.4 TFLOPS, 1.4e12 FLOPS            (FLOPS, GFLOPS, TFLOPS, PFLOPS = 1000^k per second)
//   time:       5 us, 1.5 ms, 700 ns, 0.001 s
// A plain number without a unit is an error: "10" could be seconds or microseconds.
//
// Loading checks the whole document first: a key given twice in one mapping, a key that
// is not a plain scalar, and an explicit tag other than YAML's core ones (!!str, !!int,
// !!float, !!bool, !!null, !!map, !!seq; e.g. !!binary) are errors naming file, line and
// key path. Documents nest at most 64 levels and hold at most 1,000,000 nodes (aliases
// counted each time they are used), so a hostile file cannot exhaust the stack or memory.
//
// Ranges: the *_in getters check a value against a plausibility range with physical
// meaning and name both in the error, in the quantity's units:
//   "x.yaml:23: pcie.latency: 1e300 s is outside 1 ns .. 1 s".
// Integers are range-checked as 64-bit values before any narrowing to int.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "engine/core/units.hpp"

namespace dpt::sim {

// Parses one YAML document from a file. Throws std::invalid_argument naming the file
// (and line for syntax errors) when it cannot be read or parsed.
YAML::Node yaml_load_file(const std::string& path);
// Parses YAML text; `file_label` is used in error messages in place of a path.
YAML::Node yaml_load_string(const std::string& text, const std::string& file_label);

// "FILE:LINE: " for a node (LINE 1-based); "FILE: " when the node has no mark.
std::string yaml_where(const std::string& file, const YAML::Node& node);

// Bounds as they read in errors: "1 ns", "25 GB/s", "80 GiB", "1 PFLOPS".
std::string format_time_bound(Seconds s);
std::string format_bandwidth_bound(BytesPerSecond b);
std::string format_bytes_bound(Bytes b);
std::string format_flops_bound(FlopsPerSecond f);

// Unit-carrying quantity parsers (see the header comment). `where` ("FILE:LINE: key: ")
// is prepended to the std::invalid_argument message on a malformed value.
Bytes parse_bytes_quantity(std::string_view text, const std::string& where);
BytesPerSecond parse_bandwidth_quantity(std::string_view text, const std::string& where);
FlopsPerSecond parse_flops_quantity(std::string_view text, const std::string& where);
Seconds parse_time_quantity(std::string_view text, const std::string& where);

// A YAML boolean as the readers take one: true, True, yes / false, False, no; else nullopt.
std::optional<bool> parse_yaml_bool(std::string_view text);

// Reads one YAML mapping with checking. `path` is the dotted key path of this map
// ("" at the top level; "pcie.switches[1]" for an element of a list), used to name
// keys in errors. Every getter marks its key as read.
class MapReader {
 public:
  // Throws "FILE:LINE: PATH: expected a mapping" if `node` is not a mapping.
  MapReader(const YAML::Node& node, std::string file, std::string path);

  bool has(const std::string& key);  // also records the key as allowed
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  // "PATH.key" (or "key" at the top level).
  std::string key_path(const std::string& key) const;
  // "FILE:LINE: PATH.key: " pointing at the key's value, or at this map when absent.
  std::string where(const std::string& key) const;
  // Throws std::invalid_argument "FILE:LINE: PATH.key: message" (value's line).
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

  // The raw child node. Throws "missing key" if absent.
  YAML::Node node(const std::string& key);
  // A child mapping as a reader. Throws if missing or not a mapping.
  MapReader map(const std::string& key);
  // A child sequence of mappings as readers (paths "key[i]"). Throws if missing or not a sequence.
  std::vector<MapReader> map_list(const std::string& key);

  // Required scalars. Throw "missing key" or "expected an integer|number|boolean|string, got 'x'".
  std::string get_string(const std::string& key);
  std::int64_t get_int(const std::string& key);
  double get_double(const std::string& key);
  bool get_bool(const std::string& key);
  std::vector<std::int64_t> get_int_list(const std::string& key);

  // Optional scalars: std::nullopt when the key is absent (opt_bool: a key written with no
  // value is refused, not taken as absent).
  std::optional<std::string> opt_string(const std::string& key);
  std::optional<std::int64_t> opt_int(const std::string& key);
  std::optional<double> opt_double(const std::string& key);
  std::optional<bool> opt_bool(const std::string& key);

  // Unit-carrying quantities (strings like "25 GB/s" or plain numbers).
  Bytes get_bytes(const std::string& key);
  BytesPerSecond get_bandwidth(const std::string& key);
  FlopsPerSecond get_flops(const std::string& key);
  Seconds get_time(const std::string& key);
  std::optional<Bytes> opt_bytes(const std::string& key);
  std::optional<BytesPerSecond> opt_bandwidth(const std::string& key);
  std::optional<FlopsPerSecond> opt_flops(const std::string& key);
  std::optional<Seconds> opt_time(const std::string& key);

  // Checked reads: the value must lie in [lo, hi] (see the header comment).
  std::int64_t get_int_in(const std::string& key, std::int64_t lo, std::int64_t hi);
  std::optional<std::int64_t> opt_int_in(const std::string& key, std::int64_t lo, std::int64_t hi);
  double get_double_in(const std::string& key, double lo, double hi);
  std::optional<double> opt_double_in(const std::string& key, double lo, double hi);
  Bytes get_bytes_in(const std::string& key, Bytes lo, Bytes hi);
  BytesPerSecond get_bandwidth_in(const std::string& key, BytesPerSecond lo, BytesPerSecond hi);
  // A bandwidth datasheets quote in bytes per second (memory, NVLink, NVSwitch, PCIe, CPU
  // links): a value in bits per second (Mb/s, Gb/s, Tb/s) is refused as the likely typo it
  // is ("2 Tb/s" of HBM is 250 GB/s), naming the byte figure; NIC line rates keep bits.
  BytesPerSecond get_byte_bandwidth_in(const std::string& key, BytesPerSecond lo, BytesPerSecond hi);
  FlopsPerSecond get_flops_in(const std::string& key, FlopsPerSecond lo, FlopsPerSecond hi);
  std::optional<FlopsPerSecond> opt_flops_in(const std::string& key, FlopsPerSecond lo, FlopsPerSecond hi);
  Seconds get_time_in(const std::string& key, Seconds lo, Seconds hi);

  // Range checks on a value already read; they throw naming the key and the value.
  void require_positive(const std::string& key, double value) const;      // value > 0
  void require_non_negative(const std::string& key, double value) const;  // value >= 0
  void require_range(const std::string& key, double value, double lo, double hi) const;  // lo <= value <= hi
  // Reads and checks in one go.
  std::int64_t get_positive_int(const std::string& key);
  double get_positive_double(const std::string& key);

  // Throws "FILE:LINE: PATH.key: unknown key (allowed: a, b, c)" for the first key of
  // this map that no getter read. Call once all keys were read.
  void finish() const;

 private:
  YAML::Node child(const std::string& key);  // marks the key asked and read; throws "missing key"
  // Throws "VALUE is outside LO .. HI" at the key when !(lo <= value <= hi).
  void check_in(const std::string& key, double value, double lo, double hi, const std::string& lo_text,
                const std::string& hi_text);
  YAML::Node node_;
  std::string file_;
  std::string path_;
  std::set<std::string> asked_;  // every key a getter or has() looked for: the allowed keys
  std::set<std::string> read_;   // keys whose values were read
};

}  // namespace dpt::sim
