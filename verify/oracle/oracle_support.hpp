// Running PyTorch (verify/oracle/torch_oracle.py under Debian's /usr/bin/python3)
// as the oracle of the C++ tests: the tests batch their jobs into one safetensors
// file, the script answers with another, and these helpers compare the results.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/io/safetensors.hpp"

namespace dpt::oracle {

// The interpreter that has Debian's python3-torch: /usr/bin/python3, or $DPT_TORCH_PYTHON.
std::string torch_python();
// Why PyTorch cannot serve as the oracle here (the interpreter cannot import torch),
// or nullopt when it can. Checked once per process.
std::optional<std::string> torch_unavailable_reason();

// Jobs for one run of the oracle script (see torch_oracle.py for the job kinds).
struct JobSet {
  std::vector<nlohmann::json> jobs;
  std::vector<SafetensorsTensor> tensors;
  void add(const std::string& name, const Tensor& t);
  void add(SafetensorsTensor t) { tensors.push_back(std::move(t)); }
};

struct Results {
  SafetensorsFile file;
  nlohmann::json errors;  // job name -> PyTorch's exception text (jobs that raised)
  nlohmann::json tables;  // job name -> JSON result (chunk tables)
  std::string torch_version;
};

// Writes the jobs under `work_dir`, runs the script once, reads its results.
// Throws std::runtime_error with the script's output when it fails.
Results run_oracle(const JobSet& jobs, const std::string& work_dir);

// One PyTorch run per test binary (Python and torch take seconds to start). Each
// test file registers, at static initialisation, a function that adds its jobs and
// writes any files they read under `work_dir`; the first oracle_session() call runs
// every registered provider, then the script once.
using JobProvider = std::function<void(JobSet& jobs, const std::string& work_dir)>;
bool register_job_provider(JobProvider provider);

struct Session {
  std::optional<std::string> skip;   // torch cannot be imported: tests skip, saying this
  std::optional<std::string> error;  // building the jobs or running the script failed: tests fail
  Results results;
  std::string dir;                   // where the jobs' files are
};
const Session& oracle_session();

// A fresh directory below the build tree for one test's files.
std::string oracle_work_dir(const std::string& name);

// Any numeric safetensors tensor as doubles.
std::vector<double> values_of(const SafetensorsTensor& t);
// Largest absolute difference relative to the reference's largest magnitude
// (a per-tensor norm-wise error, as llm.c's test compares with PyTorch); infinity on
// a length mismatch.
double max_rel_error(const std::vector<double>& got, const std::vector<double>& want);

// The "model" entry of a job: what torch_oracle.build_mlp builds.
nlohmann::json model_json(const MlpSpec& spec, DType dtype);
// "mse" | "ce", and "mean" | "sum", as the jobs name them.
const char* loss_name(LossKind k);
const char* reduction_name(Reduction r);
nlohmann::json sgd_json(const SgdOptions& o);
nlohmann::json adamw_json(const AdamWOptions& o);

// Tolerance for one dtype: 1e-10 for f64, 1e-5 for f32 (the oracle's stated bounds).
double tolerance_for(DType dtype);

}  // namespace dpt::oracle
