#include "engine/io/checkpoint.hpp"

#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

namespace dpt {

StateDict state_dict_of(const std::vector<NamedParameter>& params, const std::string& prefix) {
  StateDict out;
  out.reserve(params.size());
  for (const auto& np : params) out.emplace_back(prefix + np.name, np.param->value);
  return out;
}

namespace {

// PyTorch prints shapes as torch.Size([3, 4]); the error text keeps its form.
std::string torch_size(const Shape& s) { return "torch.Size(" + shape_to_string(s) + ")"; }

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", \"" : "\"") + keys[i] + "\"";
  return out;
}

}  // namespace

void load_state_dict(const std::vector<NamedParameter>& params, const SafetensorsFile& file,
                     const LoadOptions& options, Backend* backend) {
  // File keys after prefix stripping, in file order.
  std::map<std::string, const SafetensorsTensor*> by_key;
  std::vector<std::string> file_keys;
  for (const auto& t : file.tensors) {
    std::string key = t.name;
    if (!options.strip_prefix.empty() && key.starts_with(options.strip_prefix))
      key = key.substr(options.strip_prefix.size());
    auto [it, fresh] = by_key.emplace(key, &t);
    if (!fresh)
      throw std::invalid_argument(fmt::format("{}: tensors '{}' and '{}' both load as '{}' after removing prefix '{}'",
                                              file.path, it->second->name, t.name, key, options.strip_prefix));
    file_keys.push_back(key);
  }

  std::set<std::string> model_keys;
  std::vector<std::string> missing, unexpected, mismatches;
  bool needs_backend = false;
  for (const auto& np : params) {
    model_keys.insert(np.name);
    auto it = by_key.find(np.name);
    if (it == by_key.end()) {
      missing.push_back(options.report_prefix + np.name);
      continue;
    }
    const SafetensorsTensor& st = *it->second;
    const Tensor& v = np.param->value;
    if (st.shape != v.shape())
      mismatches.push_back(fmt::format(
          "size mismatch for {}: copying a param with shape {} from checkpoint, the shape in current model is {}.",
          options.report_prefix + np.name, torch_size(st.shape), torch_size(v.shape())));
    else if (st.dtype != v.dtype())
      mismatches.push_back(fmt::format("dtype mismatch for {}: the checkpoint holds {} (tensor '{}'), the parameter "
                                       "in current model is {}.",
                                       options.report_prefix + np.name, dtype_safetensors_name(st.dtype), st.name,
                                       dtype_safetensors_name(v.dtype())));
    else if (v.numel() > 0 && v.device().computes() && !device_is_cpu_readable(v.device()))
      needs_backend = true;
  }
  for (const auto& k : file_keys)
    if (!model_keys.count(k)) unexpected.push_back(options.report_prefix.empty() ? k : by_key.at(k)->name);

  // torch.nn.Module.load_state_dict's order: missing, unexpected, then per-tensor errors.
  std::vector<std::string> errors;
  if (options.strict && !missing.empty())
    errors.push_back(fmt::format("Missing key(s) in state_dict: {}. ", quoted_list(missing)));
  if (options.strict && !unexpected.empty())
    errors.push_back(fmt::format("Unexpected key(s) in state_dict: {}. ", quoted_list(unexpected)));
  errors.insert(errors.end(), mismatches.begin(), mismatches.end());
  if (!errors.empty()) {
    std::string msg = fmt::format("Error(s) in loading state_dict for {}:", options.module_name);
    for (const auto& e : errors) msg += "\n\t" + e;
    msg += fmt::format("\n\t(checkpoint file: {})", file.path);
    throw std::invalid_argument(msg);
  }
  if (needs_backend && !backend)
    throw std::invalid_argument(fmt::format(
        "{}: the model's parameters are on a device the CPU cannot write; pass the backend to load them", file.path));

  for (const auto& np : params) {
    auto it = by_key.find(np.name);
    if (it == by_key.end()) continue;
    const SafetensorsTensor& st = *it->second;
    Tensor& v = np.param->value;
    if (v.numel() == 0 || !v.device().computes()) continue;
    if (device_is_cpu_readable(v.device())) {
      v.device().synchronize();
      std::memcpy(v.data(), st.data.data(), st.data.size());
    } else {
      Tensor host = tensor_from_safetensors(st, backend->host_memory(), MemoryCategory::workspace);
      backend->copy(host, v);
    }
  }
}

}  // namespace dpt
