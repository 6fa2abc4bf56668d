#include "verify/oracle/oracle_support.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace dpt::oracle {

std::string torch_python() {
  const char* env = std::getenv("DPT_TORCH_PYTHON");
  return env && *env ? env : "/usr/bin/python3";
}

std::optional<std::string> torch_unavailable_reason() {
  static const std::optional<std::string> reason = []() -> std::optional<std::string> {
    std::string cmd = fmt::format("'{}' -c 'import torch' > /dev/null 2>&1", torch_python());
    int rc = std::system(cmd.c_str());
    if (rc == 0) return std::nullopt;
    return fmt::format("PyTorch oracle unavailable: '{}' cannot import torch (exit status {}); install Debian's "
                       "python3-torch with ci/install-deps",
                       torch_python(), WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
  }();
  return reason;
}

void JobSet::add(const std::string& name, const Tensor& t) { tensors.push_back(safetensors_tensor_from(name, t)); }

std::string oracle_work_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path d = fs::path(DPT_BINARY_DIR) / "test-tmp" / "oracle" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

Results run_oracle(const JobSet& jobs, const std::string& work_dir) {
  std::set<std::string> names;
  for (const auto& j : jobs.jobs)
    if (!names.insert(j.at("name").get<std::string>()).second)
      throw std::invalid_argument(fmt::format("oracle jobs: the name '{}' is used twice", j.at("name").dump()));
  const std::string in = work_dir + "/jobs.safetensors", out = work_dir + "/results.safetensors",
                    log = work_dir + "/oracle.log";
  write_file_atomic(in, encode_safetensors(jobs.tensors, {{"jobs", nlohmann::json(jobs.jobs).dump()}}));
  const std::string script = std::string(DPT_SOURCE_DIR) + "/verify/oracle/torch_oracle.py";
  std::string cmd = fmt::format("'{}' '{}' '{}' '{}' > '{}' 2>&1", torch_python(), script, in, out, log);
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream l(log);
    std::stringstream text;
    text << l.rdbuf();
    throw std::runtime_error(fmt::format("{} failed (exit status {}):\n{}", cmd,
                                         WIFEXITED(rc) ? WEXITSTATUS(rc) : rc, text.str()));
  }
  Results r;
  r.file = read_safetensors(out);
  r.errors = nlohmann::json::parse(r.file.metadata.at("errors"));
  r.tables = nlohmann::json::parse(r.file.metadata.at("tables"));
  r.torch_version = r.file.metadata.at("torch_version");
  return r;
}

static std::vector<JobProvider>& providers() {
  static std::vector<JobProvider> p;
  return p;
}

bool register_job_provider(JobProvider provider) {
  providers().push_back(std::move(provider));
  return true;
}

const Session& oracle_session() {
  static const Session session = [] {
    Session s;
    s.skip = torch_unavailable_reason();
    if (s.skip) return s;
    try {
      s.dir = oracle_work_dir("session");
      JobSet jobs;
      for (const auto& add : providers()) add(jobs, s.dir);
      s.results = run_oracle(jobs, s.dir);
    } catch (const std::exception& e) {
      s.error = e.what();
    }
    return s;
  }();
  return session;
}

template <typename T>
static void append_as_double(const SafetensorsTensor& t, std::vector<double>& out) {
  size_t n = t.data.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, t.data.data() + i * sizeof(T), sizeof(T));
    out.push_back(static_cast<double>(v));
  }
}

std::vector<double> values_of(const SafetensorsTensor& t) {
  std::vector<double> out;
  switch (t.dtype) {
    case DType::f32: append_as_double<float>(t, out); break;
    case DType::f64: append_as_double<double>(t, out); break;
    case DType::i64: append_as_double<std::int64_t>(t, out); break;
    case DType::i32: append_as_double<std::int32_t>(t, out); break;
    case DType::bf16:
    case DType::f16: throw std::invalid_argument("oracle: no host values for a bf16/f16 tensor");
  }
  return out;
}

double max_rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i])) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  if (diff == 0) return 0;
  return diff / std::max(scale, std::numeric_limits<double>::min());
}

nlohmann::json model_json(const MlpSpec& spec, DType dtype) {
  return {{"widths", spec.widths},
          {"activation", spec.activation == Activation::relu ? "relu" : "gelu"},
          {"layernorm", spec.layernorm},
          {"dtype", std::string(dtype_name(dtype))}};
}

const char* loss_name(LossKind k) { return k == LossKind::mse ? "mse" : "ce"; }
const char* reduction_name(Reduction r) { return r == Reduction::mean ? "mean" : "sum"; }

nlohmann::json sgd_json(const SgdOptions& o) {
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov}};
}

nlohmann::json adamw_json(const AdamWOptions& o) {
  return {{"lr", o.lr}, {"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps}, {"weight_decay", o.weight_decay}};
}

double tolerance_for(DType dtype) { return dtype == DType::f64 ? 1e-10 : 1e-5; }

}  // namespace dpt::oracle
