#include "sim/twin/step_report.hpp"

#include "engine/core/device.hpp"
#include "engine/io/safetensors.hpp"

#include <cmath>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/twin/json_file.hpp"

namespace dpt {
namespace {

using json = nlohmann::json;

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }
json optional_bytes(const std::optional<Bytes>& v) { return v ? json(*v) : json(nullptr); }

// Reading with the key's path in every error, so a bad file says where it is bad.
class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) fail("", "must be a JSON object");
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw std::invalid_argument(
        fmt::format("step report {}: {}{}", where_, key.empty() ? "" : fmt::format("key '{}' ", key), what));
  }
  const json& at(const std::string& key) {
    seen_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end()) fail(key, "is missing");
    return *it;
  }
  bool has(const std::string& key) const { return j_.contains(key); }
  std::string str(const std::string& key) {
    const json& v = at(key);
    if (!v.is_string()) fail(key, "must be a string");
    return v.get<std::string>();
  }
  double num(const std::string& key) {
    const json& v = at(key);
    if (!v.is_number()) fail(key, "must be a number");
    return v.get<double>();
  }
  std::int64_t integer(const std::string& key) {
    const json& v = at(key);
    if (!v.is_number_integer()) fail(key, "must be an integer");
    return v.get<std::int64_t>();
  }
  std::optional<double> opt_num(const std::string& key) {
    const json& v = at(key);
    if (v.is_null()) return std::nullopt;
    if (!v.is_number()) fail(key, "must be a number or null");
    return v.get<double>();
  }
  std::optional<Bytes> opt_bytes(const std::string& key) {
    const json& v = at(key);
    if (v.is_null()) return std::nullopt;
    if (!v.is_number_integer()) fail(key, "must be an integer number of bytes or null");
    return v.get<Bytes>();
  }
  const json& array(const std::string& key) {
    const json& v = at(key);
    if (!v.is_array()) fail(key, "must be an array");
    return v;
  }
  std::map<std::string, Bytes> byte_map(const std::string& key) {
    const json& v = at(key);
    if (!v.is_object()) fail(key, "must be an object of category: bytes");
    std::map<std::string, Bytes> out;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it->is_number_integer()) fail(key + "." + it.key(), "must be an integer number of bytes");
      out[it.key()] = it->get<Bytes>();
    }
    return out;
  }
  // An object of name: seconds, each a finite number >= 0.
  std::map<std::string, Seconds> seconds_map(const std::string& key) {
    const json& v = at(key);
    if (!v.is_object()) fail(key, "must be an object of op class: seconds");
    std::map<std::string, Seconds> out;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
        fail(key + "." + it.key(), "must be a finite number of seconds >= 0");
      out[it.key()] = it->get<double>();
    }
    return out;
  }
  // Rejects keys this schema version does not define (a typo must not pass silently).
  void reject_unknown() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!seen_.count(it.key())) fail(it.key(), "is not part of " + std::string(kStepReportSchema));
  }
  const std::string& where() const { return where_; }

 private:
  const json& j_;
  std::string where_;
  std::set<std::string> seen_;
};

}  // namespace

DeviceReport device_memory_report(Device& device) {
  DeviceReport dr;
  dr.device = device.name();
  dr.peak_memory_bytes = device.memory().peak_bytes();
  const auto at_peak = device.memory().breakdown_at_peak();
  for (int k = 0; k < kMemoryCategoryCount; ++k)
    if (at_peak[static_cast<size_t>(k)] > 0)
      dr.memory_breakdown_bytes[memory_category_name(static_cast<MemoryCategory>(k))] = at_peak[static_cast<size_t>(k)];
  dr.capacity_bytes = device.capacity_bytes();
  return dr;
}

json step_report_to_json(const StepReport& r) {
  json devices = json::array();
  for (const auto& d : r.devices_detail)
    devices.push_back({{"device", d.device},
                       {"peak_memory_bytes", d.peak_memory_bytes},
                       {"memory_breakdown_bytes", d.memory_breakdown_bytes},
                       {"capacity_bytes", optional_bytes(d.capacity_bytes)},
                       {"busy_s", d.busy_s},
                       {"kernel_time_by_class_s", d.kernel_time_by_class_s}});
  json links = json::array();
  for (const auto& l : r.links)
    links.push_back({{"name", l.name}, {"bytes", l.bytes}, {"busy_s", l.busy_s}, {"utilisation", l.utilisation}});
  json oom = nullptr;
  if (r.out_of_memory)
    oom = {{"device", r.out_of_memory->device},
           {"message", r.out_of_memory->message},
           {"requested_bytes", r.out_of_memory->requested_bytes},
           {"memory_breakdown_bytes", r.out_of_memory->memory_breakdown_bytes},
           {"capacity_bytes", optional_bytes(r.out_of_memory->capacity_bytes)}};
  return json{{"schema", kStepReportSchema},
              {"source", r.source},
              {"backend", r.backend},
              {"hardware", r.hardware},
              {"model", r.model},
              {"strategy", r.strategy},
              {"devices", r.devices},
              {"nodes", r.nodes},
              {"dtype", r.dtype},
              {"precision", r.precision ? json(*r.precision) : json(nullptr)},
              {"memory_format", r.memory_format ? json(*r.memory_format) : json(nullptr)},
              {"optimizer", r.optimizer ? json(*r.optimizer) : json(nullptr)},
              {"optimizer_impl", r.optimizer_impl ? json(*r.optimizer_impl) : json(nullptr)},
              {"inputs", r.inputs ? json(*r.inputs) : json(nullptr)},
              {"accumulate", r.accumulate ? json(*r.accumulate) : json(nullptr)},
              {"comm_hook", r.comm_hook ? json(*r.comm_hook) : json(nullptr)},
              {"checkpoint_layers", r.checkpoint_layers ? json(*r.checkpoint_layers) : json(nullptr)},
              {"bucket_cap_mb", r.bucket_cap_mb ? json(*r.bucket_cap_mb) : json(nullptr)},
              {"hardware_overrides", r.hardware_overrides ? json(*r.hardware_overrides) : json(nullptr)},
              {"batch_global", r.batch_global},
              {"batch_per_device", r.batch_per_device},
              {"step_time_s", optional_number(r.step_time_s)},
              {"breakdown_s",
               {{"compute", r.breakdown_s.compute},
                {"exposed_communication", r.breakdown_s.exposed_communication},
                {"dispatch", r.breakdown_s.dispatch},
                {"optimizer", r.breakdown_s.optimizer},
                {"interference", r.breakdown_s.interference},
                {"exposed_host_copy", r.breakdown_s.exposed_host_copy}}},
              {"throughput_samples_per_s", optional_number(r.throughput_samples_per_s)},
              {"tokens_per_sample", optional_number(r.tokens_per_sample)},
              {"single_device_step_time_s", optional_number(r.single_device_step_time_s)},
              {"scaling_efficiency", optional_number(r.scaling_efficiency)},
              {"devices_detail", devices},
              {"simulated_devices", r.simulated_devices ? json(*r.simulated_devices) : json(nullptr)},
              {"links", links},
              {"trace", r.trace},
              {"out_of_memory", oom},
              {"warnings", r.warnings}};
}

namespace {

// An array of objects, each read by read_one with its index in the errors
// ("WHERE: links[3]: key 'bytes' ...") and checked for unknown keys.
template <typename T, typename F> std::vector<T> read_objects(Reader& in, const std::string& key, F read_one) {
  const json& items = in.array(key);
  std::vector<T> out;
  for (size_t i = 0; i < items.size(); ++i) {
    Reader item(items[i], fmt::format("{}: {}[{}]", in.where(), key, i));
    out.push_back(read_one(item));
    item.reject_unknown();
  }
  return out;
}

StepBreakdown read_breakdown(Reader& in) {
  Reader b(in.at("breakdown_s"), in.where() + ": breakdown_s");
  StepBreakdown out;
  out.compute = b.num("compute");
  out.exposed_communication = b.num("exposed_communication");
  out.dispatch = b.num("dispatch");
  out.optimizer = b.num("optimizer");
  // Absent from reports written before the interference model (and from measured ones).
  if (b.has("interference")) out.interference = b.num("interference");
  // Absent from reports written before host copies were told apart.
  if (b.has("exposed_host_copy")) out.exposed_host_copy = b.num("exposed_host_copy");
  b.reject_unknown();
  for (const auto& [key, v] : {std::pair{"compute", out.compute}, {"exposed_communication", out.exposed_communication},
                               {"dispatch", out.dispatch}, {"optimizer", out.optimizer},
                               {"interference", out.interference}, {"exposed_host_copy", out.exposed_host_copy}})
    if (!(v >= 0) || !std::isfinite(v)) b.fail(key, fmt::format("is {} s; a part of a step is a time >= 0", v));
  return out;
}

DeviceReport read_device(Reader& d) {
  DeviceReport out;
  out.device = d.str("device");
  out.peak_memory_bytes = d.integer("peak_memory_bytes");
  out.memory_breakdown_bytes = d.byte_map("memory_breakdown_bytes");
  out.capacity_bytes = d.opt_bytes("capacity_bytes");
  out.busy_s = d.num("busy_s");
  // Absent from measured reports written before it and from reports before the op classes.
  if (d.has("kernel_time_by_class_s")) out.kernel_time_by_class_s = d.seconds_map("kernel_time_by_class_s");
  return out;
}

LinkReport read_link(Reader& l) {
  LinkReport out;
  out.name = l.str("name");
  out.bytes = l.integer("bytes");
  out.busy_s = l.num("busy_s");
  out.utilisation = l.num("utilisation");
  return out;
}

std::optional<OutOfMemoryReport> read_out_of_memory(Reader& in) {
  const json& oom = in.at("out_of_memory");
  if (oom.is_null()) return std::nullopt;
  Reader o(oom, in.where() + ": out_of_memory");
  OutOfMemoryReport out;
  out.device = o.str("device");
  out.message = o.str("message");
  out.requested_bytes = o.integer("requested_bytes");
  out.memory_breakdown_bytes = o.byte_map("memory_breakdown_bytes");
  out.capacity_bytes = o.opt_bytes("capacity_bytes");
  o.reject_unknown();
  return out;
}

// The identity of the run: what ran where, on how many devices, in which dtype.
void read_configuration(Reader& in, StepReport& r) {
  r.source = in.str("source");
  if (r.source != "predicted" && r.source != "measured")
    in.fail("source", fmt::format("is '{}'; expected 'predicted' or 'measured'", r.source));
  r.backend = in.str("backend");
  r.hardware = in.str("hardware");
  r.model = in.str("model");
  r.strategy = in.str("strategy");
  r.devices = static_cast<int>(in.integer("devices"));
  r.nodes = static_cast<int>(in.integer("nodes"));
  if (r.devices < 1) in.fail("devices", "must be at least 1");
  if (r.nodes < 1) in.fail("nodes", "must be at least 1");
  r.dtype = in.str("dtype");
  if (in.has("precision") && !in.at("precision").is_null()) {
    if (!in.at("precision").is_string()) in.fail("precision", "must be null or a string");
    r.precision = in.at("precision").get<std::string>();
  }
  if (in.has("optimizer") && !in.at("optimizer").is_null()) {
    if (!in.at("optimizer").is_string()) in.fail("optimizer", "must be null or a string");
    r.optimizer = in.at("optimizer").get<std::string>();
  }
  if (in.has("optimizer_impl") && !in.at("optimizer_impl").is_null()) {
    if (!in.at("optimizer_impl").is_string()) in.fail("optimizer_impl", "must be null or a string");
    r.optimizer_impl = in.at("optimizer_impl").get<std::string>();
  }
  if (in.has("memory_format") && !in.at("memory_format").is_null()) {
    if (!in.at("memory_format").is_string()) in.fail("memory_format", "must be null or a string");
    r.memory_format = in.at("memory_format").get<std::string>();
  }
  if (in.has("inputs") && !in.at("inputs").is_null()) {
    if (!in.at("inputs").is_string() || in.at("inputs").get<std::string>() != "device")
      in.fail("inputs", "must be null or \"device\"");
    r.inputs = in.at("inputs").get<std::string>();
  }
  if (in.has("accumulate") && !in.at("accumulate").is_null()) {
    if (!in.at("accumulate").is_number_integer() || in.at("accumulate").get<int>() < 2)
      in.fail("accumulate", "must be null or an integer >= 2");
    r.accumulate = in.at("accumulate").get<int>();
  }
  if (in.has("comm_hook") && !in.at("comm_hook").is_null()) {
    if (!in.at("comm_hook").is_string()) in.fail("comm_hook", "must be null or a string");
    r.comm_hook = in.at("comm_hook").get<std::string>();
  }
  if (in.has("checkpoint_layers") && !in.at("checkpoint_layers").is_null()) {
    if (!in.at("checkpoint_layers").is_number_integer() || in.at("checkpoint_layers").get<std::int64_t>() < 1)
      in.fail("checkpoint_layers", "must be null or an integer >= 1");
    r.checkpoint_layers = in.at("checkpoint_layers").get<std::int64_t>();
  }
  if (in.has("bucket_cap_mb") && !in.at("bucket_cap_mb").is_null()) {
    if (!in.at("bucket_cap_mb").is_number() || !(in.at("bucket_cap_mb").get<double>() > 0))
      in.fail("bucket_cap_mb", "must be null or a positive number");
    r.bucket_cap_mb = in.at("bucket_cap_mb").get<double>();
  }
  if (in.has("hardware_overrides") && !in.at("hardware_overrides").is_null()) {
    const json& o = in.at("hardware_overrides");
    if (!o.is_array() || !std::all_of(o.begin(), o.end(), [](const json& v) { return v.is_string(); }))
      in.fail("hardware_overrides", "must be null or an array of strings");
    r.hardware_overrides = o.get<std::vector<std::string>>();
  }
  r.batch_global = in.integer("batch_global");
  r.batch_per_device = in.integer("batch_per_device");
  if (r.batch_global < 1) in.fail("batch_global", fmt::format("is {}; a step trains at least one sample", r.batch_global));
  if (r.batch_per_device < 0) in.fail("batch_per_device", fmt::format("is {}; must be >= 0", r.batch_per_device));
}

// The figures a report states must be ones a run could give: an edited file with a
// negative step time or 1e308 samples/s was compared and reported as if measured (an
// outside-user review). Throughput is the step's samples over its time.
void check_figures(Reader& in, const StepReport& r) {
  for (const auto& [key, v] : {std::pair{"step_time_s", r.step_time_s},
                               {"single_device_step_time_s", r.single_device_step_time_s}})
    if (v && (!(*v > 0) || !std::isfinite(*v))) in.fail(key, fmt::format("is {}; a step takes a time > 0 s", *v));
  if (r.throughput_samples_per_s && (!(*r.throughput_samples_per_s >= 0) || !std::isfinite(*r.throughput_samples_per_s)))
    in.fail("throughput_samples_per_s", fmt::format("is {}; must be >= 0", *r.throughput_samples_per_s));
  if (r.scaling_efficiency && (!(*r.scaling_efficiency >= 0) || !std::isfinite(*r.scaling_efficiency)))
    in.fail("scaling_efficiency", fmt::format("is {}; must be >= 0", *r.scaling_efficiency));
  if (r.step_time_s && r.throughput_samples_per_s) {
    const double expected = static_cast<double>(r.batch_global) / *r.step_time_s;
    if (std::abs(*r.throughput_samples_per_s - expected) > 0.01 * expected)
      in.fail("throughput_samples_per_s",
              fmt::format("is {:.6g}, but batch_global {} over step_time_s {:.6g} is {:.6g} samples/s",
                          *r.throughput_samples_per_s, r.batch_global, *r.step_time_s, expected));
  }
}

}  // namespace

StepReport step_report_from_json(const json& j, const std::string& where) {
  Reader in(j, where);
  const std::string schema = in.str("schema");
  if (schema != kStepReportSchema)
    in.fail("schema", fmt::format("is '{}'; this dptwin reads '{}'", schema, kStepReportSchema));
  StepReport r;
  read_configuration(in, r);
  r.step_time_s = in.opt_num("step_time_s");
  r.breakdown_s = read_breakdown(in);
  r.throughput_samples_per_s = in.opt_num("throughput_samples_per_s");
  // Absent from reports written before it (and null for a model whose sample is no sequence).
  if (in.has("tokens_per_sample")) r.tokens_per_sample = in.opt_num("tokens_per_sample");
  r.single_device_step_time_s = in.opt_num("single_device_step_time_s");
  r.scaling_efficiency = in.opt_num("scaling_efficiency");
  check_figures(in, r);
  r.devices_detail = read_objects<DeviceReport>(in, "devices_detail", read_device);
  if (in.has("simulated_devices")) {
    const json& v = in.at("simulated_devices");
    if (!v.is_null()) {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > r.devices)
        in.fail("simulated_devices", fmt::format("must be null or an integer in 1..devices ({})", r.devices));
      r.simulated_devices = v.get<int>();
    }
  }
  r.links = read_objects<LinkReport>(in, "links", read_link);
  r.trace = in.str("trace");
  r.out_of_memory = read_out_of_memory(in);
  for (const auto& w : in.array("warnings")) {
    if (!w.is_string()) in.fail("warnings", "must be an array of strings");
    r.warnings.push_back(w.get<std::string>());
  }
  // The command line's --json output names the dptwin build that wrote it; any
  // build reads it back.
  if (in.has("dptwin")) in.at("dptwin");
  in.reject_unknown();
  return r;
}

void write_step_report(const StepReport& r, const std::string& path) {
  write_file_atomic(path, step_report_to_json(r).dump(2) + "\n", {.create_parent_dirs = true});
}

StepReport read_step_report(const std::string& path) {
  return step_report_from_json(read_json_file(path, "step report"), path);
}

}  // namespace dpt
