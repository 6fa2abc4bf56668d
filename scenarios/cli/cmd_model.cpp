// dptwin model: the models the twin can predict. `list` names the library's
// models, the parametric and config forms and the sample configs; `show NAME`
// prints any of them (library name, file, mlp:, transformer:, hf:) as a model
// file in the library schema, which `--model FILE.yaml` reads back.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/cli/library_dir.hpp"
#include "scenarios/scenario/model_library_yaml.hpp"

namespace dpt::cli::cmd_model {  // a namespace per command: unity batches join anonymous ones
namespace {

namespace fs = std::filesystem;

// The library's models as JSON: name, parameters, forward GFLOP per sample, sample.
int run_list_json(const fs::path& models) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& name : list_models(models)) {
    const ModelDescription m = load_model(name, models);
    rows.push_back({{"name", name}, {"parameters", model_parameter_count(m)},
                    {"forward_flops_per_sample", model_forward_flops_per_sample(m)}, {"sample", m.sample},
                    {"file", (models / (name + ".yaml")).string()}});
  }
  print_json({{"library", models.string()}, {"models", rows}});
  return kExitOk;
}

int run_list(bool json) {
  const fs::path models = scenarios_dir() / "models";
  if (json) return run_list_json(models);
  // The name column as wide as the longest name (bert-large-dle-phase2 pushed its row out).
  const auto names = list_models(models);
  size_t width = std::string("library model").size();
  for (const auto& name : names) width = std::max(width, name.size());
  std::cout << fmt::format("{:<{}} {:>16} {:>18}  {}\n", "library model", width, "parameters", "GFLOP fwd/sample",
                           "sample");
  for (const auto& name : names) {
    const ModelDescription m = load_model(name, models);
    std::cout << fmt::format("{:<{}} {:>16} {:>18.2f}  {}\n", name, width, model_parameter_count(m),
                             model_forward_flops_per_sample(m) / 1e9, m.sample);
  }
  std::cout << "\nHugging Face config.json samples (--model hf:PATH):\n";
  std::vector<std::string> configs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(models / "hf", ec))
    if (fs::exists(e.path() / "config.json")) configs.push_back(fs::proximate(e.path() / "config.json").string());
  std::sort(configs.begin(), configs.end());
  for (const auto& c : configs) std::cout << "  hf:" << c << "\n";
  std::cout << "\nAlso accepted wherever a model is named:\n"
               "  FILE.yaml                      a model file (dptwin model show writes one; so does dptwin_profile)\n"
               "  mlp:IN-H1-...-OUT              the MLP dptwin train runs\n"
               "  transformer:layers=L,hidden=H,heads=A,seq=S,vocab=V[,mlp=F][,tied][,attn=sdpa]\n"
               "                                 a GPT-2-style decoder (mlp default 4H; tied: LM head shares wte;\n"
               "                                 attention eager, as the library files, unless attn=sdpa)\n"
               "  hf:PATH/config.json            a Hugging Face config of the gpt2, llama, bert or vit family, with\n"
               "                                 sdpa attention (transformers' default) unless the config says eager\n"
               "  hf:PATH/config.json:seq=N      the same, training N-token sequences (not max_position_embeddings)\n"
               "  hf:PATH/config.json:attn=eager the same with eager attention (also :attn=sdpa; with :seq=N too)\n";
  return kExitOk;
}

int run_show(const std::string& name) {
  const ModelDescription m = load_model(name, scenarios_dir() / "models");
  std::cout << fmt::format("# dptwin model show {}\n# {} parameters, {:.2f} GFLOP forward per sample\n", name,
                           model_parameter_count(m), model_forward_flops_per_sample(m) / 1e9)
            << model_to_yaml(m);
  return kExitOk;
}

RunFn setup(CLI::App& parent) {
  auto name = std::make_shared<std::string>();
  CLI::App* app = parent.add_subcommand(
      "model", "The models the twin predicts: the library, parametric transformers, Hugging Face configs and "
               "profiled model files.");
  app->require_subcommand(1);
  auto json = std::make_shared<bool>(false);
  CLI::App* list = app->add_subcommand("list", "List the library's models and the other ways to name a model.");
  list->add_flag("--json", *json, "print the library's models as JSON");
  CLI::App* show = app->add_subcommand(
      "show", "Print a model (library name, FILE.yaml, mlp:..., transformer:..., hf:PATH) as a model file in the "
              "library schema.");
  show->add_option("name", *name, "the model: a library name, FILE.yaml, mlp:..., transformer:...[,attn=sdpa] or hf:PATH/config.json[:seq=N][:attn=eager|sdpa] (dptwin model list)")->required();
  app->footer("Examples:\n  dptwin model list\n"
              "  dptwin model show transformer:layers=24,hidden=1024,heads=16,seq=1024,vocab=50257,tied > my.yaml\n"
              "  dptwin model show hf:scenarios/models/hf/vit-base-patch16-224/config.json\n\n" +
              exit_codes_help());
  return [list, show, name, json] {
    if (list->parsed()) return run_list(*json);
    if (show->parsed()) return run_show(*name);
    return static_cast<int>(kExitUsage);
  };
}

Registration reg{"model", setup};

}  // namespace
}  // namespace dpt::cli::cmd_model
