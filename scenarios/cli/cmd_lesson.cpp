// dptwin lesson: the claims of the lesson "Multi-GPU training with DataParallel"
// (scenarios/lesson/*.yaml) run and printed as verdicts with their numbers.
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "scenarios/cli/command.hpp"
#include "scenarios/cli/json_output.hpp"
#include "scenarios/cli/library_dir.hpp"
#include "scenarios/scenario/lesson.hpp"

namespace dpt::cli::cmd_lesson {  // a namespace per command: unity batches join anonymous ones
namespace {

struct LessonArgs {
  std::string dir = (scenarios_dir() / "lesson").string();
  std::string library = scenarios_dir().string();
  std::vector<std::string> only;
  bool json = false;
};

int run_lesson(const LessonArgs& a) {
  const lesson::LessonLibrary lib{a.library + "/hardware", a.library + "/models"};
  std::vector<lesson::Claim> claims;
  if (a.only.empty()) {
    claims = lesson::load_claims(a.dir);
  } else {
    for (const auto& name : a.only) {
      const std::string file = a.dir + "/" + name + ".yaml";
      std::error_code ec;
      if (!std::filesystem::is_regular_file(file, ec))
        throw std::invalid_argument(fmt::format("--only {}: no claim file {} (the names are the file stems in --dir)",
                                                name, file));
      claims.push_back(lesson::load_claim(file));
    }
  }
  if (claims.empty()) throw std::invalid_argument(fmt::format("--dir {}: no lesson claims (*.yaml) found", a.dir));
  int failed = 0;
  nlohmann::json verdicts = nlohmann::json::array();
  for (const auto& c : claims) {
    const lesson::Verdict v = lesson::evaluate(c, lib);
    failed += v.pass ? 0 : 1;
    if (a.json) {
      verdicts.push_back({{"file", v.file}, {"lesson_claim", c.lesson_claim}, {"claim", v.claim},
                     {"verdict", v.pass ? "PASS" : "FAIL"}, {"numbers", v.numbers}});
    } else {
      std::cout << fmt::format("[{}] claim {}: {}\n       {}\n", v.pass ? "PASS" : "FAIL", c.lesson_claim, v.claim,
                               v.numbers);
    }
  }
  if (a.json) {
    print_json({{"claims", verdicts}});
  } else {
    // Which of the lesson's nine claims these checks cover, and where the rest are checked
    // (an outside-user review read "6 of 6 claims hold" over claims numbered 1, 5, 5, 6, 7, 8).
    std::set<int> numbers;
    for (const auto& c : claims) numbers.insert(c.lesson_claim);
    std::cout << fmt::format("{} of {} checks hold, of the lesson's claims {}", claims.size() - static_cast<size_t>(failed),
                             claims.size(), fmt::join(numbers, ", "));
    if (a.dir == (scenarios_dir() / "lesson").string())
      std::cout << "; claims 2-4 (DataParallel's forward and backward) and 9 (the `module.` prefix) are dptwin "
                   "verify's correctness properties dp.gradient_equivalence and checkpoint.module_prefix";
    std::cout << "\n";
  }
  return failed == 0 ? kExitOk : kExitFailure;
}

RunFn setup(CLI::App& parent) {
  auto a = std::make_shared<LessonArgs>();
  CLI::App* app = parent.add_subcommand(
      "lesson", "Check the claims of the lesson 'Multi-GPU training with DataParallel' (scenarios/lesson/*.yaml): "
                "the split, GPU 0's extra memory and earlier out-of-memory, DataParallel's scaling under the GIL, "
                "DDP's near-linear scaling, DataParallel on 2 GPUs. Prints each claim, PASS or FAIL, and its numbers.");
  app->add_option("--dir", a->dir, "directory of lesson claim files")->check(CLI::ExistingDirectory);
  app->add_option("--library", a->library, "directory holding hardware/ and models/")->check(CLI::ExistingDirectory);
  app->add_option("--only", a->only, "run only these claims (file stems, e.g. ddp-near-linear)");
  app->add_flag("--json", a->json, "print the verdicts as JSON: {\"claims\": [...], \"dptwin\": {...}}");
  app->footer("Examples:\n  dptwin lesson\n  dptwin lesson --only ddp-near-linear --json\n\n" + exit_codes_help() +
              " Exit 1 here: at least one claim failed.");
  return [a] { return run_lesson(*a); };
}

Registration reg{"lesson", setup};

}  // namespace
}  // namespace dpt::cli::cmd_lesson
