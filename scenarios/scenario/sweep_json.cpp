// The sweep result file ("dptwin.sweep/1"): writing, reading and validating it.
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "scenarios/scenario/sweep.hpp"
#include "sim/twin/json_file.hpp"

namespace dpt::scenario {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& key, const std::string& what) {
  throw std::invalid_argument(fmt::format("sweep result {}: key '{}' {}", where, key, what));
}

// Reads a key of an object, checking its type with `ok`.
template <typename Check>
const json& field(const json& j, const std::string& key, const std::string& where, Check ok, const char* type) {
  auto it = j.find(key);
  if (it == j.end()) bad(where, key, "is missing");
  if (!ok(*it)) bad(where, key, fmt::format("must be {}", type));
  return *it;
}
std::string str(const json& j, const std::string& k, const std::string& w) {
  return field(j, k, w, [](const json& v) { return v.is_string(); }, "a string").get<std::string>();
}
std::int64_t integer(const json& j, const std::string& k, const std::string& w) {
  return field(j, k, w, [](const json& v) { return v.is_number_integer(); }, "an integer").get<std::int64_t>();
}
// An integer in lo..hi, checked before any narrowing (a count of 4294967299 must not become 3).
std::int64_t integer_in(const json& j, const std::string& k, const std::string& w, std::int64_t lo, std::int64_t hi) {
  const json& v = field(j, k, w, [](const json& x) { return x.is_number_integer(); }, "an integer");
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    bad(w, k, fmt::format("{} is not in {}..{}", v.get<std::uint64_t>(), lo, hi));
  const std::int64_t x = v.get<std::int64_t>();
  if (x < lo || x > hi) bad(w, k, fmt::format("{} is not in {}..{}", x, lo, hi));
  return x;
}
double number(const json& j, const std::string& k, const std::string& w) {
  return field(j, k, w, [](const json& v) { return v.is_number(); }, "a number").get<double>();
}
void only_keys(const json& j, const std::set<std::string>& allowed, const std::string& where) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!allowed.count(it.key())) bad(where, it.key(), "is not a known key");
}

PointStatus status_from_name(const std::string& s, const std::string& where) {
  for (auto st : {PointStatus::ok, PointStatus::out_of_memory, PointStatus::skipped, PointStatus::failed})
    if (s == point_status_name(st)) return st;
  bad(where, "status", fmt::format("'{}' is not one of ok, out_of_memory, skipped, failed", s));
}

json target_json(const std::optional<Target>& t) {
  if (!t) return nullptr;
  json j = json::object();
  if (t->samples_per_s) j["samples_per_s"] = *t->samples_per_s;
  if (t->samples) j["samples"] = *t->samples;
  if (t->within_hours) j["within_hours"] = *t->within_hours;
  // A target given in tokens keeps them, so a report of these results states it as asked.
  if (t->tokens_per_s) j["tokens_per_s"] = *t->tokens_per_s;
  if (t->tokens) j["tokens"] = *t->tokens;
  if (t->tokens_per_sample) j["tokens_per_sample"] = *t->tokens_per_sample;
  return j;
}

std::optional<Target> target_from(const json& j, const std::string& where) {
  if (j.is_null()) return std::nullopt;
  if (!j.is_object()) bad(where, "target", "must be an object or null");
  only_keys(j, {"samples_per_s", "samples", "within_hours", "tokens_per_s", "tokens", "tokens_per_sample"},
            where + " target");
  Target t;
  if (j.contains("samples_per_s")) t.samples_per_s = number(j, "samples_per_s", where);
  if (j.contains("samples")) t.samples = number(j, "samples", where);
  if (j.contains("within_hours")) t.within_hours = number(j, "within_hours", where);
  if (j.contains("tokens_per_s")) t.tokens_per_s = number(j, "tokens_per_s", where);
  if (j.contains("tokens")) t.tokens = number(j, "tokens", where);
  if (j.contains("tokens_per_sample")) t.tokens_per_sample = number(j, "tokens_per_sample", where);
  if (t.in_tokens() && !t.tokens_per_sample) bad(where, "target", "in tokens needs tokens_per_sample");
  if (!t.samples_per_s && !(t.samples && t.within_hours)) bad(where, "target", "needs samples_per_s or samples and within_hours");
  return t;
}

}  // namespace

const char* point_status_name(PointStatus s) {
  switch (s) {
    case PointStatus::ok: return "ok";
    case PointStatus::out_of_memory: return "out_of_memory";
    case PointStatus::skipped: return "skipped";
    case PointStatus::failed: return "failed";
  }
  return "?";
}

json sweep_result_to_json(const SweepResult& r) {
  json points = json::array();
  for (const auto& p : r.points) {
    json axes = json::array();
    for (const auto& [k, v] : p.axes) axes.push_back({{"axis", k}, {"value", v}});
    points.push_back({{"index", p.index},
                      {"axes", axes},
                      {"hardware", p.hardware},
                      {"gpu_name", p.gpu_name},
                      {"model", p.model},
                      {"strategy", p.strategy},
                      {"devices", p.devices},
                      {"nodes", p.nodes},
                      {"batch_global", p.batch_global},
                      {"batch_per_device", p.batch_per_device},
                      {"dtype", p.dtype},
                      {"precision", p.precision},
                      {"bucket_cap_mb", p.bucket_cap_mb},
                      {"optimizer", p.optimizer},
                      {"status", point_status_name(p.status)},
                      {"reason", p.reason},
                      {"wall_s", p.wall_s},
                      {"report", p.report ? step_report_to_json(*p.report) : json(nullptr)}});
  }
  return {{"schema", kSweepSchema},
          {"scenario", {{"name", r.scenario_name}, {"file", r.scenario_file}, {"question", r.question},
                        {"digest", r.scenario_digest}, {"run_digest", r.run_digest},
                        {"overrides", r.overrides}, {"target", target_json(r.target)}}},
          {"total_points", r.total_points},
          {"shard", {{"index", r.shard_index}, {"count", r.shard_count}}},
          {"points", points}};
}

SweepResult sweep_result_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) throw std::invalid_argument(fmt::format("sweep result {}: must be a JSON object", where));
  require_document_kind(j, kSweepSchema, where, "a sweep result");
  only_keys(j, {"schema", "scenario", "total_points", "shard", "points", "dptwin"}, where);  // dptwin: the build (--json)
  const std::string schema = str(j, "schema", where);
  if (schema != kSweepSchema) bad(where, "schema", fmt::format("is '{}', expected '{}'", schema, kSweepSchema));
  SweepResult r;
  const json& sc = field(j, "scenario", where, [](const json& v) { return v.is_object(); }, "an object");
  only_keys(sc, {"name", "file", "question", "digest", "run_digest", "overrides", "target"}, where + " scenario");
  r.scenario_name = str(sc, "name", where);
  r.scenario_file = str(sc, "file", where);
  r.question = str(sc, "question", where);
  r.scenario_digest = str(sc, "digest", where);
  if (sc.contains("run_digest")) r.run_digest = str(sc, "run_digest", where);  // absent before 2026-12-07
  if (sc.contains("overrides")) {  // absent before 2026-12-07
    const json& ov = sc.at("overrides");
    if (!ov.is_array()) bad(where, "scenario.overrides", "must be an array of strings");
    for (const auto& o : ov) {
      if (!o.is_string()) bad(where, "scenario.overrides", "must be an array of strings");
      r.overrides.push_back(o.get<std::string>());
    }
  }
  r.target = target_from(sc.contains("target") ? sc.at("target") : json(nullptr), where);
  constexpr auto kMax = static_cast<std::int64_t>(kMaxSweepPoints);
  r.total_points = static_cast<std::size_t>(integer_in(j, "total_points", where, 1, kMax));
  const json& sh = field(j, "shard", where, [](const json& v) { return v.is_object(); }, "an object");
  r.shard_index = static_cast<int>(integer_in(sh, "index", where + " shard", 0, kMax));
  r.shard_count = static_cast<int>(integer_in(sh, "count", where + " shard", 1, kMax));
  if (r.shard_count < 1 || r.shard_index < 0 || r.shard_index >= r.shard_count)
    bad(where, "shard", fmt::format("{}/{} is not a valid shard", r.shard_index, r.shard_count));
  const json& pts = field(j, "points", where, [](const json& v) { return v.is_array(); }, "an array");
  for (size_t i = 0; i < pts.size(); ++i) {
    const json& pj = pts[i];
    const std::string pw = fmt::format("{} points[{}]", where, i);
    if (!pj.is_object()) throw std::invalid_argument(fmt::format("sweep result {}: must be an object", pw));
    only_keys(pj, {"index", "axes", "hardware", "gpu_name", "model", "strategy", "devices", "nodes", "batch_global",
                   "batch_per_device", "dtype", "precision", "bucket_cap_mb", "optimizer", "status", "reason", "wall_s",
                   "report"},
              pw);
    PointResult p;
    p.index = static_cast<std::size_t>(integer_in(pj, "index", pw, 0, kMax));
    if (p.index >= r.total_points) bad(pw, "index", fmt::format("{} is not below total_points {}", p.index, r.total_points));
    for (const auto& a : field(pj, "axes", pw, [](const json& v) { return v.is_array(); }, "an array"))
      p.axes.emplace_back(str(a, "axis", pw), str(a, "value", pw));
    p.hardware = str(pj, "hardware", pw);
    p.gpu_name = str(pj, "gpu_name", pw);
    p.model = str(pj, "model", pw);
    p.strategy = str(pj, "strategy", pw);
    p.devices = static_cast<int>(integer_in(pj, "devices", pw, 0, 1'000'000));
    p.nodes = static_cast<int>(integer_in(pj, "nodes", pw, 0, 1'000'000));
    p.batch_global = integer(pj, "batch_global", pw);
    p.batch_per_device = integer(pj, "batch_per_device", pw);
    p.dtype = str(pj, "dtype", pw);
    if (pj.contains("precision")) p.precision = str(pj, "precision", pw);  // absent before 2026-12-07
    p.bucket_cap_mb = number(pj, "bucket_cap_mb", pw);
    p.optimizer = str(pj, "optimizer", pw);
    p.status = status_from_name(str(pj, "status", pw), pw);
    p.reason = str(pj, "reason", pw);
    p.wall_s = number(pj, "wall_s", pw);
    const json& rep = field(pj, "report", pw, [](const json& v) { return v.is_null() || v.is_object(); },
                            "an object or null");
    if (!rep.is_null()) p.report = step_report_from_json(rep, pw + " report");
    if (p.status == PointStatus::ok && !p.report) bad(pw, "report", "is null for a point with status ok");
    r.points.push_back(std::move(p));
  }
  return r;
}

void write_sweep_result(const SweepResult& r, const std::string& path) {
  write_file_atomic(path, sweep_result_to_json(r).dump(1) + "\n", {.create_parent_dirs = true});
}

SweepResult read_sweep_result(const std::string& path) {
  return sweep_result_from_json(read_json_file(path, "sweep result"), path);
}

}  // namespace dpt::scenario
