#include "engine/io/checkpoint.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
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

bool widens_exactly(DType from, DType to) {
  return (from == DType::f16 || from == DType::bf16) && (to == DType::f32 || to == DType::f64);
}

double half_bits_to_double(std::uint16_t bits, DType t) {
  if (t == DType::bf16) {
    const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;  // bf16 is f32's upper half
    float f;
    std::memcpy(&f, &wide, sizeof f);
    return f;
  }
  if (t != DType::f16) throw std::invalid_argument("half_bits_to_double: not f16 or bf16");
  // IEEE binary16: 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits.
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1f;
  const int fraction = bits & 0x3ff;
  if (exponent == 0x1f) return fraction ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
  if (exponent == 0) return sign * std::ldexp(fraction, -24);  // zero and subnormals: fraction x 2^-24
  return sign * std::ldexp(1024 + fraction, exponent - 25);
}

SafetensorsTensor widened(const SafetensorsTensor& st, DType to) {
  if (!widens_exactly(st.dtype, to))
    throw std::invalid_argument(fmt::format("tensor '{}': {} does not widen exactly to {}", st.name,
                                            dtype_safetensors_name(st.dtype), dtype_safetensors_name(to)));
  SafetensorsTensor out;
  out.name = st.name;
  out.dtype = to;
  out.shape = st.shape;
  const size_t n = st.data.size() / 2;
  out.data.resize(n * static_cast<size_t>(dtype_size_bytes(to)));
  for (size_t i = 0; i < n; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, st.data.data() + 2 * i, 2);  // little-endian, as the file and this host
    const double v = half_bits_to_double(bits, st.dtype);
    if (to == DType::f32) {
      const float f = static_cast<float>(v);  // exact: every f16 and bf16 value is an f32 value
      std::memcpy(out.data.data() + 4 * i, &f, 4);
    } else {
      std::memcpy(out.data.data() + 8 * i, &v, 8);
    }
  }
  return out;
}

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
    else if (st.dtype != v.dtype() && !widens_exactly(st.dtype, v.dtype()))
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
    Tensor& v = np.param->value;
    if (v.numel() == 0 || !v.device().computes()) continue;
    // f16/bf16 into an f32/f64 parameter: widened on the host, then copied as any other.
    std::optional<SafetensorsTensor> wide;
    if (it->second->dtype != v.dtype()) wide = widened(*it->second, v.dtype());
    const SafetensorsTensor& st = wide ? *wide : *it->second;
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
