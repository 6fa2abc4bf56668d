// dptwin hardware: the library's hardware files. `list` names each with its
// size and one-line description; `show NAME` prints the file as it is (its
// sources in comments), after checking that it loads.
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/cli/library_dir.hpp"
#include "sim/net/hardware.hpp"
#include "hardware_schema_text.hpp"  // generated: kHardwareSchemaText

namespace dpt::cli::cmd_hardware {  // a namespace per command: unity batches join anonymous ones
namespace {

namespace fs = std::filesystem;

// One table per folder: the library's files, then the fidelity table's machines (single GPUs
// and servers of published measurements), which --hardware also takes by name.
int run_list(bool json) {
  const fs::path dir = scenarios_dir() / "hardware";
  const fs::path measured = sim::measured_hardware_dir(dir);
  auto rows_of = [&](const std::vector<std::string>& names, const fs::path& folder) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& name : names) {
      const sim::HardwareSpec hw = sim::load_hardware_file(folder / (name + ".yaml"));
      if (json) {
        rows.push_back({{"name", name}, {"nodes", hw.nodes}, {"gpus_per_node", hw.gpus_per_node},
                        {"gpu", hw.gpu.name}, {"description", hw.description},
                        {"file", (folder / (name + ".yaml")).string()}});
      } else {
        std::cout << fmt::format("{:<28} {:>5} {:>6}  {:<20} {}\n", name, hw.nodes, hw.gpu_count(), hw.gpu.name,
                                 hw.description);
      }
    }
    return rows;
  };
  const auto library_names = sim::list_hardware(dir);
  const auto measured_names = sim::list_measured_hardware(dir);
  if (!json)
    std::cout << fmt::format("{:<28} {:>5} {:>6}  {:<20} {}\n", "hardware", "nodes", "GPUs", "GPU", "description");
  const nlohmann::json library_rows = rows_of(library_names, dir);
  if (!json && !measured_names.empty())
    std::cout << fmt::format("\nthe fidelity table's machines ({}):\n", measured.string());
  const nlohmann::json measured_rows = rows_of(measured_names, measured);
  if (json) {
    nlohmann::json out = {{"library", dir.string()}, {"hardware", library_rows}, {"measured_machines", measured_rows}};
    if (!measured_names.empty()) out["measured_machines_dir"] = measured.string();
    print_json(out);
  } else {
    std::cout << "\nlibrary: " << dir.string() << "\n(dptwin hardware show NAME prints a file; --hardware takes "
              << (measured_names.empty() ? "a NAME" : "a NAME of either table") << " or a path to your own file)\n";
  }
  return kExitOk;
}

int run_show(const std::string& name) {
  const fs::path dir = scenarios_dir() / "hardware";
  const sim::HardwareSpec hw = sim::load_hardware(name, dir);  // validates; names the library on a typo
  std::ifstream in(hw.source_file);
  if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", hw.source_file));
  std::ostringstream text;
  text << in.rdbuf();
  std::cout << "# " << hw.source_file << "\n" << text.str();
  return kExitOk;
}

// The schema as the loader documents it (sim/net/hardware.hpp's opening comment).
int run_schema() {
  std::cout << kHardwareSchemaText;
  return kExitOk;
}

RunFn setup(CLI::App& parent) {
  auto name = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* app = parent.add_subcommand("hardware", "The hardware files the twin predicts for: list them or print one.");
  app->require_subcommand(1);
  CLI::App* list = app->add_subcommand("list", "List the library's hardware files: name, size, GPU and description.");
  list->add_flag("--json", *json, "print the list as JSON");
  CLI::App* show = app->add_subcommand("show", "Print a hardware file (a name of `hardware list` or a path) with its sources.");
  show->add_option("name", *name, "a name of `hardware list` (dgx-h100, h100-pcie-1x) or a path to a hardware YAML file")->required();
  CLI::App* schema = app->add_subcommand(
      "schema", "Print the hardware file schema: every key, its unit, whether it is optional, and its default.");
  app->footer("Examples:\n  dptwin hardware list\n  dptwin hardware schema\n  dptwin hardware show dgx-h100 > my-node.yaml   "
              "# edit, then --hardware my-node.yaml\n\n" +
              exit_codes_help());
  return [list, show, schema, name, json] {
    if (list->parsed()) return run_list(*json);
    if (show->parsed()) return run_show(*name);
    if (schema->parsed()) return run_schema();
    return static_cast<int>(kExitUsage);
  };
}

Registration reg{"hardware", setup};

}  // namespace
}  // namespace dpt::cli::cmd_hardware
