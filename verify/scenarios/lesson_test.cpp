// The lesson's claims: every scenarios/lesson/*.yaml is a test of its verdict, a
// claim that cannot hold is reported as FAIL (not PASS), and bad claim files are
// rejected naming the file, line and key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "scenarios/scenario/lesson.hpp"

namespace dpt::lesson {
namespace {

const std::filesystem::path kLessonDir = std::filesystem::path(DPT_SOURCE_DIR) / "scenarios" / "lesson";
const LessonLibrary kLibrary{std::filesystem::path(DPT_SOURCE_DIR) / "scenarios" / "hardware",
                             std::filesystem::path(DPT_SOURCE_DIR) / "scenarios" / "models"};

std::vector<std::string> lesson_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(kLessonDir))
    if (e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

class LessonClaim : public ::testing::TestWithParam<std::string> {};

TEST_P(LessonClaim, Holds) {
  const Claim c = load_claim(kLessonDir / (GetParam() + ".yaml"));
  const Verdict v = evaluate(c, kLibrary);
  std::cout << (v.pass ? "[PASS] " : "[FAIL] ") << v.claim << "\n       " << v.numbers << "\n";
  EXPECT_TRUE(v.pass) << v.claim << ": " << v.numbers;
  EXPECT_FALSE(v.numbers.empty());
}

INSTANTIATE_TEST_SUITE_P(Lesson, LessonClaim, ::testing::ValuesIn(lesson_files()),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (auto& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

std::filesystem::path write_claim(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "dpt_lesson_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path;
}

TEST(LessonVerdict, AnImpossibleClaimFails) {
  // DDP cannot scale better than linearly: a 101 % threshold must give FAIL.
  Claim c = load_claim(kLessonDir / "ddp-near-linear.yaml");
  c.threshold = 1.01;
  const Verdict v = evaluate(c, kLibrary);
  EXPECT_FALSE(v.pass) << v.numbers;
  // The split claim with a batch that torch.chunk cannot split evenly over 2 GPUs.
  Claim s = load_claim(kLessonDir / "split-64-on-2.yaml");
  s.batch = 65;
  const Verdict sv = evaluate(s, kLibrary);
  EXPECT_FALSE(sv.pass) << sv.numbers;
  EXPECT_NE(sv.numbers.find("33 + 32"), std::string::npos) << sv.numbers;
  // The verdict says which part failed: torch.chunk's split ran, but it is not even (5 on
  // 4: 2 + 2 + 1, one device idle; the FAIL read as agreeing with torch.chunk).
  EXPECT_NE(sv.numbers.find("not an even split over 2 devices, which the claim is"), std::string::npos) << sv.numbers;
  s.devices = 4;
  s.batch = 5;
  const Verdict four = evaluate(s, kLibrary);
  EXPECT_FALSE(four.pass);
  EXPECT_NE(four.numbers.find("processed 2 + 2 + 1 + 0 of a batch of 5 (torch.chunk gives 2 + 2 + 1: not an even split "
                              "over 4 devices"),
            std::string::npos)
      << four.numbers;
}

TEST(LessonFiles, BadClaimsNameFileLineAndKey) {
  auto expect_error = [](const std::string& text, const std::string& needle) {
    const auto path = write_claim("bad.yaml", text);
    try {
      load_claim(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.yaml:"), std::string::npos) << e.what();
    }
  };
  const std::string head = "schema_version: 1\nclaim: x\nlesson_claim: 7\n";
  expect_error(head + "check: ddp_near_linear\nhardware: dgx-a100\nmodel: resnet50\ndevices: 8\n"
                      "batch_per_device: 32\nthreshold: 0.9\nthreshhold: 0.8\n",
               "threshhold: unknown key");
  expect_error(head + "check: fastest\n", "unknown check 'fastest'");
  expect_error(head + "check: ddp_near_linear\nhardware: dgx-a100\nmodel: resnet50\ndevices: 8\nbatch_per_device: 32\n",
               "threshold: check 'ddp_near_linear' needs this key");
  expect_error(head + "check: split\ndevices: 0\nbatch: 64\n", "devices");
  expect_error("schema_version: 2\nclaim: x\nlesson_claim: 1\ncheck: split\ndevices: 2\nbatch: 64\n", "schema 1");
}

}  // namespace
}  // namespace dpt::lesson
