// The model library on disk: scenarios/models/*.yaml (see generate.py there),
// loaded into ModelDescription and validated. A model is named by its library
// name ("resnet50"), a path to a YAML file, or an MLP spec ("mlp:784-256-10",
// the same form `dptwin train --model` takes).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "engine/nn/model_library.hpp"

namespace dpt {

inline constexpr int kModelSchemaVersion = 1;

// Loads and validates a model file. Errors are std::invalid_argument
// "FILE:LINE: key: what" (unknown keys, wrong types, non-positive sizes, totals
// that disagree with the layers).
ModelDescription load_model_file(const std::filesystem::path& path);
// Same from YAML text; `file_label` names the source in errors.
ModelDescription parse_model_yaml(const std::string& text, const std::string& file_label);
// NAME (library_dir/NAME.yaml), a path to a .yaml file, "mlp:..." (described by
// describe_mlp), "transformer:..." (describe_transformer) or "hf:PATH" (a Hugging
// Face config.json, "hf:PATH:seq=N" with N tokens per sample, load_hf_config). An
// unknown name throws listing the library's names.
ModelDescription load_model(const std::string& name_or_path, const std::filesystem::path& library_dir);
// A model reference as written in a file in `dir`: a relative model file (a path with a
// '/' or ending in .yaml, as a hardware file is told apart; or hf:PATH's config.json) made
// relative to `dir`; names and specs unchanged.
std::string model_relative_to(const std::string& model, const std::filesystem::path& dir);
// The model file text in the library schema (what load_model_file reads back to
// an equal description): header, totals, layers in order.
std::string model_to_yaml(const ModelDescription& m);
// Stems of library_dir/*.yaml, sorted.
std::vector<std::string> list_models(const std::filesystem::path& library_dir);

}  // namespace dpt
