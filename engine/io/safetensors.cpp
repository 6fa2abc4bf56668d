#include "engine/io/input_file.hpp"
#include "engine/io/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dpt {

// The format is little-endian; dptwin copies bytes as they are, so the host must be too.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const SafetensorsTensor& SafetensorsFile::at(const std::string& name) const {
  if (const auto* t = find(name)) return *t;
  throw std::invalid_argument(fmt::format("{}: no tensor named '{}'", path, name));
}

namespace {

// Ordered, so tensors at the same offset (empty ones) keep the header's order.
using json = nlohmann::ordered_json;

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

// Reads a JSON integer >= 0 that fits in int64; nullopt for anything else.
std::optional<std::int64_t> json_nonnegative_int(const json& v) {
  if (v.is_number_unsigned()) {
    auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) {
    auto i = v.get<std::int64_t>();
    if (i < 0) return std::nullopt;
    return i;
  }
  return std::nullopt;
}

Entry parse_entry(const std::string& path, const std::string& name, const json& v, std::uint64_t buffer_bytes) {
  auto bad = [&](const std::string& what) {
    return std::invalid_argument(fmt::format("{}: tensor '{}': {}", path, name, what));
  };
  if (!v.is_object()) throw bad("header entry is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key)) throw bad(fmt::format("header entry lacks \"{}\"", key));

  Entry e{name, DType::f32, {}, 0, 0};
  const json& dt = v["dtype"];
  if (!dt.is_string()) throw bad("\"dtype\" is not a string");
  try {
    e.dtype = dtype_from_safetensors_name(dt.get<std::string>());
  } catch (const std::invalid_argument& err) {
    throw bad(err.what());
  }

  const json& sh = v["shape"];
  if (!sh.is_array()) throw bad("\"shape\" is not an array");
  // Element count times element size must fit in int64 bytes; check before multiplying.
  std::int64_t bytes = dtype_size_bytes(e.dtype);
  for (const auto& d : sh) {
    auto dim = json_nonnegative_int(d);
    if (!dim) throw bad(fmt::format("\"shape\" has an entry that is not a non-negative integer: {}", d.dump()));
    e.shape.push_back(*dim);
    if (*dim != 0 && bytes > std::numeric_limits<std::int64_t>::max() / *dim)
      throw bad(fmt::format("shape {} is too large", sh.dump()));
    bytes *= *dim;
  }

  const json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2) throw bad("\"data_offsets\" is not an array of two integers");
  auto b = json_nonnegative_int(off[0]), en = json_nonnegative_int(off[1]);
  if (!b || !en) throw bad(fmt::format("\"data_offsets\" {} are not non-negative integers", off.dump()));
  e.begin = static_cast<std::uint64_t>(*b);
  e.end = static_cast<std::uint64_t>(*en);
  if (e.begin > e.end) throw bad(fmt::format("data_offsets [{}, {}] end before they begin", e.begin, e.end));
  if (e.end > buffer_bytes)
    throw bad(fmt::format("data_offsets [{}, {}] run past the data buffer of {} bytes (truncated file?)", e.begin,
                          e.end, buffer_bytes));
  if (e.end - e.begin != static_cast<std::uint64_t>(bytes))
    throw bad(fmt::format("data_offsets [{}, {}] hold {} bytes but {} {} needs {} bytes", e.begin, e.end,
                          e.end - e.begin, dtype_safetensors_name(e.dtype), shape_to_string(e.shape), bytes));
  return e;
}

// The header's JSON object. nlohmann keeps the last of duplicate keys silently; a
// duplicate tensor name is corruption, so the parser callback records it (one key
// set per open object).
json parse_header(std::string_view header, const std::string& path) {
  auto bad = [&](const std::string& what) { return std::invalid_argument(fmt::format("{}: {}", path, what)); };
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  auto watch = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    else if (event == json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
    else if (event == json::parse_event_t::key && !open_objects.empty() && !duplicate) {
      auto k = parsed.get<std::string>();
      if (!open_objects.back().insert(k).second) duplicate = k;
    }
    return true;
  };
  json h;
  try {
    h = json::parse(header.begin(), header.end(), watch);
  } catch (const json::exception& err) {
    throw bad(fmt::format("header is not valid JSON ({})", err.what()));
  }
  if (duplicate) throw bad(fmt::format("header names '{}' twice", *duplicate));
  if (!h.is_object()) throw bad("header is not a JSON object");
  return h;
}

// Sorts the entries by offset and checks, as the reference reader requires, that the
// tensors tile the data buffer exactly: no overlap, no gap, nothing after the last one.
void check_tiling(std::vector<Entry>& entries, std::uint64_t buffer_bytes, const std::string& path) {
  auto bad = [&](const std::string& what) { return std::invalid_argument(fmt::format("{}: {}", path, what)); };
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.begin < expected)
      throw bad(fmt::format("tensor '{}': data_offsets [{}, {}] overlap tensor '{}' (which ends at {})", e.name,
                            e.begin, e.end, entries[i - 1].name, expected));
    if (e.begin > expected)
      throw bad(fmt::format("tensor '{}': data_offsets [{}, {}] leave a gap after byte {}", e.name, e.begin, e.end,
                            expected));
    expected = e.end;
  }
  if (expected != buffer_bytes)
    throw bad(fmt::format("the tensors cover {} bytes but the data buffer has {} bytes", expected, buffer_bytes));
}

}  // namespace

SafetensorsFile parse_safetensors(const std::vector<std::byte>& bytes, const std::string& path) {
  auto bad = [&](const std::string& what) { return std::invalid_argument(fmt::format("{}: {}", path, what)); };
  if (bytes.size() < 8)
    throw bad(fmt::format("truncated: {} bytes, too short for the 8-byte header length", bytes.size()));
  // torch.save's file (a zip archive since PyTorch 1.6; pickle before) read as safetensors
  // gave only "header length 578712552184433488 bytes exceeds the limit" (an outside-user review).
  const auto starts_with = [&](std::initializer_list<unsigned char> magic) {
    size_t i = 0;
    for (unsigned char c : magic)
      if (std::to_integer<unsigned char>(bytes[i++]) != c) return false;
    return true;
  };
  // Only a file that is no safetensors anyway (whose header does not open with '{').
  const bool not_json = bytes.size() < 9 || bytes[8] != std::byte{'{'};
  if (not_json && (starts_with({'P', 'K', 3, 4}) || starts_with({0x80, 0x02})))
    throw bad("a torch.save file (zip or pickle), not safetensors: write the state dict with safetensors' "
              "save_file, or verify/oracle/torch_oracle.py's write_safetensors (README, Training on the host)");
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  if (header_bytes > static_cast<std::uint64_t>(kSafetensorsMaxHeaderBytes))
    throw bad(fmt::format("header length {} bytes exceeds the limit of {} bytes (corrupt file?)", header_bytes,
                          kSafetensorsMaxHeaderBytes));
  if (header_bytes > bytes.size() - 8)
    throw bad(fmt::format("truncated: the header claims {} bytes but only {} follow the length", header_bytes,
                          bytes.size() - 8));
  const std::uint64_t buffer_bytes = bytes.size() - 8 - header_bytes;
  const char* header_begin = reinterpret_cast<const char*>(bytes.data()) + 8;
  const json h = parse_header(std::string_view(header_begin, header_bytes), path);

  SafetensorsFile f;
  f.path = path;
  std::vector<Entry> entries;
  for (const auto& [key, value] : h.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) throw bad("\"__metadata__\" is not a JSON object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) throw bad(fmt::format("\"__metadata__\" value for '{}' is not a string", mk));
        f.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, key, value, buffer_bytes));
  }
  check_tiling(entries, buffer_bytes, path);

  const std::byte* data = bytes.data() + 8 + header_bytes;
  f.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    SafetensorsTensor t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.data.assign(data + e.begin, data + e.end);
    f.tensors.push_back(std::move(t));
  }
  return f;
}

SafetensorsFile read_safetensors(const std::string& path) {
  require_regular_input(path, path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw std::invalid_argument(fmt::format("{}: is a directory", path));
  std::vector<std::byte> bytes;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    auto got = static_cast<size_t>(in.gcount());
    const auto* p = reinterpret_cast<const std::byte*>(buf);
    bytes.insert(bytes.end(), p, p + got);
  }
  if (in.bad()) throw std::invalid_argument(fmt::format("{}: read error", path));
  return parse_safetensors(bytes, path);
}

std::vector<std::byte> encode_safetensors(const std::vector<SafetensorsTensor>& tensors,
                                          const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = m;
  }
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      throw std::invalid_argument(fmt::format("safetensors: invalid tensor name '{}'", t.name));
    if (!seen.insert(t.name).second)
      throw std::invalid_argument(fmt::format("safetensors: tensor name '{}' given twice", t.name));
    Bytes want = shape_numel(t.shape) * dtype_size_bytes(t.dtype);
    if (static_cast<Bytes>(t.data.size()) != want)
      throw std::invalid_argument(fmt::format("safetensors: tensor '{}' has {} bytes of data but {} {} needs {}",
                                              t.name, t.data.size(), dtype_safetensors_name(t.dtype),
                                              shape_to_string(t.shape), want));
    h[t.name] = {{"dtype", std::string(dtype_safetensors_name(t.dtype))},
                 {"shape", t.shape},
                 {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string header;
  try {
    header = h.dump();
  } catch (const nlohmann::json::exception& err) {
    throw std::invalid_argument(fmt::format("safetensors: tensor names and metadata must be valid UTF-8 ({})", err.what()));
  }
  // The data buffer starts on an 8-byte boundary (the format pads with spaces).
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<std::byte> out(8 + header.size() + offset);
  std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  std::byte* p = out.data() + 8 + header.size();
  for (const auto& t : tensors) {
    if (!t.data.empty()) std::memcpy(p, t.data.data(), t.data.size());
    p += t.data.size();
  }
  return out;
}

bool device_is_cpu_readable(const Device& device) { return device.host_readable() && device.computes(); }

SafetensorsTensor safetensors_tensor_from(const std::string& name, const Tensor& t, Backend* backend) {
  if (!t.defined()) throw std::invalid_argument(fmt::format("tensor '{}' is undefined", name));
  SafetensorsTensor st;
  st.name = name;
  st.dtype = t.dtype();
  st.shape = t.shape();
  st.data.resize(static_cast<size_t>(t.size_bytes()));
  if (st.data.empty()) return st;
  Device& dev = t.device();
  if (!dev.computes())
    throw std::invalid_argument(
        fmt::format("tensor '{}' on {} has no data (shape-only mode) and cannot be saved", name, dev.name()));
  if (device_is_cpu_readable(dev)) {
    dev.synchronize();
    std::memcpy(st.data.data(), t.data(), st.data.size());
    return st;
  }
  if (!backend)
    throw std::invalid_argument(fmt::format(
        "tensor '{}' is on {}, which the CPU cannot read; pass the backend to copy it to host memory", name,
        dev.name()));
  Tensor host = Tensor::empty(backend->host_memory(), t.shape(), t.dtype(), MemoryCategory::workspace);
  backend->copy(t, host);
  std::memcpy(st.data.data(), host.data(), st.data.size());
  return st;
}

void write_safetensors_atomic(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                              Backend* backend, const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsTensor> host;
  host.reserve(tensors.size());
  for (const auto& [name, t] : tensors) host.push_back(safetensors_tensor_from(name, t, backend));
  write_file_atomic(path, encode_safetensors(host, metadata), WriteOptions{.kind = OutputKind::replaceable});
}

Tensor tensor_from_safetensors(const SafetensorsTensor& st, Device& device, MemoryCategory category,
                               Backend* backend) {
  Tensor t = Tensor::empty(device, st.shape, st.dtype, category);
  if (st.data.empty() || !device.computes()) return t;  // nothing to copy, or shape-only
  if (static_cast<Bytes>(st.data.size()) != t.size_bytes())
    throw std::invalid_argument(fmt::format("tensor '{}': {} bytes of data for {} {}", st.name, st.data.size(),
                                            dtype_safetensors_name(st.dtype), shape_to_string(st.shape)));
  if (device_is_cpu_readable(device)) {
    device.synchronize();
    std::memcpy(t.data(), st.data.data(), st.data.size());
    return t;
  }
  if (!backend)
    throw std::invalid_argument(fmt::format(
        "tensor '{}': {} is not CPU-writable; pass the backend to copy the data there", st.name, device.name()));
  Tensor host = Tensor::empty(backend->host_memory(), st.shape, st.dtype, MemoryCategory::workspace);
  std::memcpy(host.data(), st.data.data(), st.data.size());
  backend->copy(host, t);
  return t;
}

}  // namespace dpt
