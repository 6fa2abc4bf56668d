// dptwin fidelity: the twin against published measurements of real machines.
//
//   dptwin fidelity                     # the library's scenarios/measured/public
//   dptwin fidelity DIR --json
//   dptwin fidelity --max-abs-error 60  # exit 1 when an entry misses by more than 60 %
//   dptwin fidelity --max-abs-error shm=150   # ... a limit of that class's own
//   dptwin fidelity --max-median-error large=15   # ... or a class's median |error| exceeds 15 %
//   dptwin fidelity --jobs 4            # 4 entries at a time (default: one per CPU)
//
// Each entry of each source file (scenarios/measure/fidelity.hpp) is predicted as
// `dptwin bench --backend sim` (collectives) or `dptwin predict` (training) would
// predict it; the table shows measured, predicted and the signed error, then the
// median and max |error| per class.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/cli/whatif_flags.hpp"
#include "scenarios/measure/fidelity.hpp"
#include "scenarios/scenario/progress_bar.hpp"

namespace dpt::cli::cmd_fidelity {  // a namespace per command: unity batches join anonymous ones
namespace {

struct FidelityArgs {
  std::string dir;                      // default: the library's measured/public
  bool json = false;
  std::vector<std::string> max_abs_error;     // PCT (every class without its own), or CLASS=PCT
  std::vector<std::string> max_median_error;  // CLASS=PCT, CLASS one of small, mid, large, training, shm
  std::string only;                     // run the entries whose id contains this
  std::string hardware;                 // run the entries of this hardware file (its name)
  std::string gpu;                      // run the entries on this GPU model (gpu.name), in any hardware file
  int jobs = whatif::default_jobs();    // entries predicted at once, each in its own process
};

std::filesystem::path default_table_dir() { return scenarios_dir() / "measured" / "public"; }

std::string class_key(fidelity::EntryClass c);  // below, with the limits' class names

std::string config_text(const fidelity::Entry& e) {
  if (e.collective) {
    const auto& c = *e.collective;
    return fmt::format("{} {} B {} GPUs{}{}", sim::collective_op_name(c.op), c.bytes, c.gpus,
                       c.nodes > 1 ? fmt::format(" {} nodes", c.nodes) : "",
                       c.algorithm ? " algo " + *c.algorithm : "");
  }
  const auto& t = *e.training;
  // The memory format where it is not the default: NCHW and NHWC rows of one source read alike;
  // and a run through host memory (NCCL_P2P_DISABLE=1), which its class alone had said.
  return fmt::format("{} {} {}x{} b{} {}{}{}{}", t.model, t.strategy, t.nodes, t.gpus, t.batch_per_device,
                     t.measured_precision, t.memory_format == "contiguous" ? "" : " " + t.memory_format,
                     t.accumulation_steps > 1 ? fmt::format(" acc{}", t.accumulation_steps) : "",
                     fidelity::classify(e) == fidelity::EntryClass::training_shm ? " P2P disabled" : "");
}

// The precision the twin ran a training entry in (the source's label is in the configuration:
// an "fp32" BERT row runs tf32, NGC's TF32 override; an outside-user review found it nowhere);
// null for a collective.
nlohmann::json twin_precision(const fidelity::Entry& e) {
  return e.training ? nlohmann::json(e.training->precision) : nlohmann::json(nullptr);
}

void print_table(const std::vector<fidelity::Result>& results, const std::vector<fidelity::ClassSummary>& sums) {
  fmt::print("# dptwin fidelity: the twin against published measurements (error = (predicted - measured) / measured)\n");
  fmt::print("{:<38} {:<27} {:<46} {:<15} {:>10} {:>10} {:>8}  {}\n", "id", "hardware", "configuration", "metric",
             "measured", "predicted", "error", "twin");
  for (const auto& r : results) {
    const auto& e = *r.entry;
    // A hardware file given as a path shows as its name (the file's stem).
    fmt::print("{:<38} {:<27} {:<46} {:<15} {:>10.4g} {:>10.4g} {:>+7.1f}%  {}\n", e.id,
               std::filesystem::path(e.hardware_file).stem().string(), config_text(e), fidelity::metric_name(e.metric),
               e.measured, r.predicted, r.error * 100, r.detail);
  }
  // The signed median says which way a class leans (a throughput predicted high is > 0).
  fmt::print("\n{:<32} {:>7} {:>14} {:>11} {:>12}  {}\n", "class", "entries", "median |error|", "max |error|",
             "median error", "worst");
  for (const auto& s : sums)
    fmt::print("{:<32} {:>7} {:>13.1f}% {:>10.1f}% {:>+11.1f}%  {}\n", fidelity::entry_class_name(s.cls), s.count,
               s.median_abs_error * 100, s.max_abs_error * 100, s.median_error * 100, s.worst_id);
  // Training by hardware file: which machines the twin reads high or low on, for a planner
  // choosing between them (`--hardware NAME` shows one file's rows).
  std::map<std::string, std::vector<double>> by_hardware;
  for (const auto& r : results)
    if (fidelity::is_training(fidelity::classify(*r.entry)))
      by_hardware[std::filesystem::path(r.entry->hardware_file).stem().string()].push_back(r.error);
  if (by_hardware.size() < 2) return;
  fmt::print("\n{:<32} {:>7} {:>14} {:>12}\n", "training by hardware", "entries", "median |error|", "median error");
  for (const auto& [name, errors] : by_hardware) {
    std::vector<double> abs_errors;
    for (double e : errors) abs_errors.push_back(std::abs(e));
    fmt::print("{:<32} {:>7} {:>13.1f}% {:>+11.1f}%\n", name, errors.size(), fidelity::median(abs_errors) * 100,
               fidelity::median(errors) * 100);
  }
}

nlohmann::json to_json(const std::vector<fidelity::Source>& sources, const std::vector<fidelity::Result>& results,
                       const std::vector<fidelity::ClassSummary>& sums) {
  nlohmann::json j;
  j["schema"] = "dptwin.fidelity/1";
  j["entries"] = nlohmann::json::array();
  for (const auto& r : results) {
    const auto& e = *r.entry;
    std::string url;
    for (const auto& s : sources)
      if (s.file == e.file) url = s.url;
    j["entries"].push_back({{"id", e.id},
                            {"file", e.file},
                            {"line", e.line},
                            {"url", url},
                            {"hardware_file", e.hardware_file},
                            {"class", fidelity::entry_class_name(fidelity::classify(e))},
                            {"class_key", class_key(fidelity::classify(e))},
                            {"configuration", config_text(e)},
                            {"twin_precision", twin_precision(e)},
                            {"metric", fidelity::metric_name(e.metric)},
                            {"measured", e.measured},
                            {"predicted", r.predicted},
                            {"error", r.error},
                            {"twin", r.detail}});
  }
  j["classes"] = nlohmann::json::array();
  for (const auto& s : sums)
    j["classes"].push_back({{"class", fidelity::entry_class_name(s.cls)},
                            {"class_key", class_key(s.cls)},
                            {"entries", s.count},
                            {"median_abs_error", s.median_abs_error},
                            {"median_error", s.median_error},
                            {"max_abs_error", s.max_abs_error},
                            {"worst", s.worst_id}});
  return j;
}

// --max-median-error's and --max-abs-error's class names (shm: training with NCCL_P2P_DISABLE=1).
const std::map<std::string, fidelity::EntryClass>& median_limit_classes() {
  static const std::map<std::string, fidelity::EntryClass> names = {{"small", fidelity::EntryClass::collective_small},
                                                                    {"mid", fidelity::EntryClass::collective_mid},
                                                                    {"large", fidelity::EntryClass::collective_large},
                                                                    {"training", fidelity::EntryClass::training},
                                                                    {"shm", fidelity::EntryClass::training_shm}};
  return names;
}

// Per-class limits from the CLASS=PCT specs of `flag`. Given `bare`, a plain PCT (at most one)
// goes there: the limit of every class without its own; without it a plain PCT is refused.
// The class's short name in the limits (small, mid, large, training, shm).
std::string class_key(fidelity::EntryClass c) {
  for (const auto& [name, cls] : median_limit_classes())
    if (cls == c) return name;
  return "?";
}

std::map<fidelity::EntryClass, double> parse_class_limits(const std::string& flag, const std::vector<std::string>& specs,
                                                          std::optional<double>* bare = nullptr) {
  const auto& names = median_limit_classes();
  std::map<fidelity::EntryClass, double> out;
  const auto number = [&](const std::string& spec, const std::string& text) {
    double pct = 0;
    try {
      size_t pos = 0;
      pct = std::stod(text, &pos);
      if (pos != text.size()) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw std::invalid_argument(fmt::format("{} {}: '{}' is not a number", flag, spec, text));
    }
    if (!(pct > 0)) throw std::invalid_argument(fmt::format("{} {}: must be a positive percentage", flag, spec));
    return pct;
  };
  for (const auto& s : specs) {
    const auto eq = s.find('=');
    if (eq == std::string::npos && bare) {
      if (*bare)
        throw std::invalid_argument(fmt::format("{} {}: a limit for every class is given already ({:g}); give one", flag,
                                                s, **bare));
      *bare = number(s, s);
      continue;
    }
    const auto it = eq == std::string::npos ? names.end() : names.find(s.substr(0, eq));
    if (it == names.end())
      throw std::invalid_argument(fmt::format("{} {}: expected {}CLASS=PCT, CLASS one of small, mid, large, training, shm",
                                              flag, s, bare ? "PCT or " : ""));
    const double pct = number(s, s.substr(eq + 1));
    // A class given twice would keep the last limit, and a gate reads as the first.
    if (out.count(it->second))
      throw std::invalid_argument(fmt::format("{} {}: {} has a limit already ({:g}); give one per class", flag, s,
                                              it->first, out.at(it->second)));
    out[it->second] = pct;
  }
  return out;
}

int run_fidelity(const FidelityArgs& a) {
  if (a.jobs < 1) throw std::invalid_argument(fmt::format("--jobs {}: must be at least 1", a.jobs));
  std::optional<double> abs_limit_all;
  const auto abs_limits = parse_class_limits("--max-abs-error", a.max_abs_error, &abs_limit_all);
  const auto median_limits = parse_class_limits("--max-median-error", a.max_median_error);
  const std::filesystem::path dir = a.dir.empty() ? default_table_dir() : std::filesystem::path(a.dir);
  auto sources = fidelity::load_table(dir);
  const auto lib = whatif::library();
  std::vector<fidelity::Job> jobs;
  // A hardware file given as a path stands for its name (entries name files by stem).
  const std::string hardware =
      a.hardware.find('/') != std::string::npos || std::filesystem::path(a.hardware).extension() == ".yaml"
          ? std::filesystem::path(a.hardware).stem().string()
          : a.hardware;
  // --gpu: the GPU model each entry's hardware file names (one load per distinct file).
  fidelity::EntryGpuNames gpu_names(lib);
  std::set<std::string> gpus;
  const auto gpu_name = [&](const fidelity::Entry& e, const std::filesystem::path& source_dir) {
    return gpu_names.of(e, source_dir);
  };
  // GPU models compared without case ("a10-24gb" is A10-24GB: an outside-user review).
  const auto lower = [](std::string v) {
    for (char& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return v;
  };
  const std::string wanted_gpu = lower(a.gpu);
  for (const auto& s : sources)
    for (const auto& e : s.entries) {
      const auto source_dir = std::filesystem::path(s.file).parent_path();
      if (!a.gpu.empty()) gpus.insert(gpu_name(e, source_dir));
      if ((a.only.empty() || e.id.find(a.only) != std::string::npos) &&
          (hardware.empty() || std::filesystem::path(e.hardware_file).stem().string() == hardware) &&
          (a.gpu.empty() || lower(gpu_name(e, source_dir)) == wanted_gpu))
        jobs.push_back({&e, source_dir, fidelity::cost_hint(e)});
    }
  if (jobs.empty() && !a.gpu.empty())
    throw std::invalid_argument(fmt::format("--gpu {}: no entry{} runs on it; the table's GPUs: {}", a.gpu,
                                            a.only.empty() && hardware.empty() ? "" : " matching --only/--hardware",
                                            fmt::join(gpus, ", ")));
  if (jobs.empty() && !hardware.empty()) {
    // Name the hardware files the table has, so a planner sees what was measured.
    std::set<std::string> names;
    for (const auto& s : sources)
      for (const auto& e : s.entries) names.insert(std::filesystem::path(e.hardware_file).stem().string());
    throw std::invalid_argument(fmt::format("--hardware {}: no entry{} runs on it; the table's hardware: {}", a.hardware,
                                            a.only.empty() ? "" : " with '" + a.only + "' in its id",
                                            fmt::join(names, ", ")));
  }
  if (jobs.empty()) throw std::invalid_argument(fmt::format("--only {}: no entry id contains it", a.only));
  // The class of a run whose hardware file itself sets nccl_p2p_disable (a user's table):
  // the jobs' files are loaded once here (the entries stay where the jobs point).
  std::set<const fidelity::Entry*> chosen;
  for (const auto& j : jobs) chosen.insert(j.entry);
  fidelity::resolve_run_settings(sources, lib, [&](const fidelity::Entry& e) { return chosen.count(&e) > 0; });
  // A gate on a class with no entry would pass whatever the model does (a typo in --only).
  for (const auto* limits : {&median_limits, &abs_limits})
    for (const auto& [cls, pct] : *limits)
      if (std::none_of(jobs.begin(), jobs.end(), [&, c = cls](const fidelity::Job& j) { return fidelity::classify(*j.entry) == c; }))
        throw std::invalid_argument(fmt::format(
            "{} {}={:g}: no {} entry {}, so the limit would check nothing",
            limits == &median_limits ? "--max-median-error" : "--max-abs-error", class_key(cls), pct,
            fidelity::entry_class_name(cls),
            a.only.empty() && hardware.empty() && a.gpu.empty()
                ? std::string("in the table")
                : fmt::format("among those --only/--hardware/--gpu chose ({}{}{})",
                              a.only.empty() ? "" : "--only " + a.only,
                              hardware.empty() ? "" : std::string(a.only.empty() ? "" : ", ") + "--hardware " + hardware,
                              a.gpu.empty() ? "" : std::string(a.only.empty() && hardware.empty() ? "" : ", ") + "--gpu " + a.gpu)));
  // A progress bar on a terminal (the table takes half a minute on two cores).
  scenario::ProgressBar bar(whatif::stderr_is_terminal() && !a.json, jobs.size(), "entries");
  const auto results = fidelity::predict_entries(
      jobs, std::min<int>(a.jobs, static_cast<int>(jobs.size())),
      [&lib](const fidelity::Entry& e, const std::filesystem::path& source_dir) {
        return fidelity::predict_entry(e, lib, source_dir);
      },
      [&bar] { bar.advance(); });
  bar.finish();
  const auto sums = fidelity::summarise(results);
  if (a.json) print_json(to_json(sources, results, sums));
  else print_table(results, sums);
  int over = 0;
  for (const auto& r : results) {
    const auto cls = fidelity::classify(*r.entry);
    const auto own = abs_limits.find(cls);
    const std::optional<double> limit = own != abs_limits.end() ? std::optional<double>(own->second) : abs_limit_all;
    if (limit && std::abs(r.error) * 100 > *limit) {
      std::cerr << fmt::format("dptwin fidelity: {} misses by {:+.1f}% (--max-abs-error {}{:g})\n", r.entry->id,
                               r.error * 100,
                               own != abs_limits.end() ? class_key(cls) + "=" : "",
                               *limit);
      ++over;
    }
  }
  for (const auto& s : sums)
    if (auto it = median_limits.find(s.cls); it != median_limits.end() && s.median_abs_error * 100 > it->second) {
      std::cerr << fmt::format("dptwin fidelity: {}: median |error| {:.1f}% (--max-median-error {}={:g})\n",
                               fidelity::entry_class_name(s.cls), s.median_abs_error * 100, class_key(s.cls),
                               it->second);
      ++over;
    }
  return over > 0 ? kExitFailure : kExitOk;
}

RunFn setup(CLI::App& parent) {
  auto a = std::make_shared<FidelityArgs>();
  CLI::App* app = parent.add_subcommand(
      "fidelity", "Predict every published measurement in a fidelity table (one YAML per source) and print predicted "
                  "against measured with the signed error, then the median and max |error| per class.");
  app->add_option("dir", a->dir, "directory of source files (default: the library's scenarios/measured/public)");
  app->add_flag("--json", a->json, "print the table as JSON (dptwin.fidelity/1)");
  // One value per use, repeated for more (a folder after the flag had been read as a limit).
  app->add_option("--max-abs-error", a->max_abs_error,
                  "PCT or CLASS=PCT (repeatable): exit 1 when an entry's |error| exceeds PCT percent, the limit of "
                  "its class where one is given, else the plain PCT")
      ->allow_extra_args(false);
  app->add_option("--max-median-error", a->max_median_error,
                  "CLASS=PCT (small, mid, large, training, shm; repeatable): exit 1 when that class's median |error| "
                  "exceeds PCT percent")
      ->allow_extra_args(false);
  app->add_option("--only", a->only, "run only the entries whose id contains this text");
  app->add_option("--hardware", a->hardware,
                  "run only the entries of this hardware file (e.g. dgx-h100): how the twin fares on the machine you "
                  "plan for");
  app->add_option("--gpu", a->gpu,
                  "run only the entries on this GPU model, in any hardware file (the gpu.name that `dptwin hardware "
                  "show` prints, e.g. H100-SXM5-80GB): how the twin fares on the GPU you plan for");
  app->add_option("-j,--jobs", a->jobs,
                  "entries predicted at once, each in its own process (default: the CPUs this process may use: taskset, a Slurm allocation); the table is "
                  "the same for any value");
  app->footer("Examples:\n  dptwin fidelity\n  dptwin fidelity scenarios/measured/public --json\n  dptwin fidelity --only lambda-rn50 --jobs 4\n  dptwin fidelity --hardware dgx-h100\n  dptwin fidelity --gpu H100-SXM5-80GB\n\n" + exit_codes_help() +
              " Exit 1 here: an entry misses by more than --max-abs-error, or a class's median by more than "
              "--max-median-error.");
  return [a] { return run_fidelity(*a); };
}

Registration reg{"fidelity", setup};

}  // namespace
}  // namespace dpt::cli::cmd_fidelity
