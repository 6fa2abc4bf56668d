// State dicts and checkpoints: a model's parameters by PyTorch name, saved to and
// loaded from safetensors with PyTorch's load_state_dict semantics.
//
// The work is done on named-parameter lists, so anything that has PyTorch names
// (a Sequential, a strategy's replicas) can be saved and loaded; the Sequential
// overloads are thin inline wrappers.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/backend.hpp"
#include "engine/nn/model.hpp"
#include "engine/io/safetensors.hpp"

namespace dpt {

using StateDict = std::vector<std::pair<std::string, Tensor>>;

struct LoadOptions {
  // As torch's load_state_dict(strict=True): every model key must be in the file and
  // every file key in the model; otherwise the error lists missing and unexpected keys.
  bool strict = true;
  // Removed from the start of every file key that has it before matching (as
  // torch.nn.modules.utils.consume_prefix_in_state_dict_if_present): "module." loads
  // a DataParallel/DDP checkpoint into an unwrapped model.
  std::string strip_prefix;
  // The class name in the error text ("Error(s) in loading state_dict for Sequential").
  std::string module_name = "Sequential";
  // Loading through a wrapper (DataParallel, DDP: module_name says which): the model's keys
  // are named with this prefix ("module.") in the error text, and the file's as the file has
  // them, as the wrapper's load_state_dict names both.
  std::string report_prefix;
};

// (prefix + name, parameter value) in registration order; tensors share the parameters' storage.
StateDict state_dict_of(const std::vector<NamedParameter>& params, const std::string& prefix = "");

// Whether a file tensor of dtype `from` loads into a parameter of dtype `to` by widening,
// exactly: f16 or bf16 into f32 or f64 (torch's load_state_dict copies with a cast; every
// half value is an f32 value). f64 into f32 rounds and stays a dtype mismatch here.
bool widens_exactly(DType from, DType to);
// One f16 (IEEE binary16) or bf16 value from its bits; zero, subnormals, inf and NaN kept.
double half_bits_to_double(std::uint16_t bits, DType t);
// The tensor in dtype `to` (widens_exactly(st.dtype, to) must hold; throws otherwise).
SafetensorsTensor widened(const SafetensorsTensor& st, DType to);

// Copies the file's tensors into the parameters (f16/bf16 ones widened, widens_exactly). Everything is checked before any
// parameter is written, so a failed load leaves the model as it was. Throws
// std::invalid_argument with PyTorch's text for missing/unexpected keys (strict)
// followed by a line naming the file, and naming the file and tensor for a shape or
// dtype that differs from the model's. Parameters the CPU cannot write (CUDA) are
// filled through backend->copy.
void load_state_dict(const std::vector<NamedParameter>& params, const SafetensorsFile& file,
                     const LoadOptions& options = {}, Backend* backend = nullptr);

inline StateDict model_state_dict(Sequential& model, const std::string& prefix = "") {
  return state_dict_of(model.named_parameters(), prefix);
}

inline void load_state_dict(Sequential& model, const SafetensorsFile& file, const LoadOptions& options = {},
                            Backend* backend = nullptr) {
  load_state_dict(model.named_parameters(), file, options, backend);
}

// Saves a model's state dict atomically (see write_safetensors_atomic).
inline void save_checkpoint(Sequential& model, const std::string& path, Backend* backend = nullptr,
                            const std::string& prefix = "") {
  write_safetensors_atomic(path, model_state_dict(model, prefix), backend);
}

}  // namespace dpt
