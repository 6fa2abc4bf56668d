// `dptwin train` as a user runs it: the executable, its exit codes and output.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "verify/support/shell_run.hpp"

namespace {

using CliRun = dpt::test::ShellResult;

CliRun dptwin(const std::string& args) { return dpt::test::run_dptwin_shell("train " + args); }

std::vector<double> losses(const std::string& out) {
  std::vector<double> v;
  const std::regex line(R"(step (\d+) loss ([-+0-9.eE]+|nan|inf))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it)
    v.push_back(std::stod((*it)[2]));
  return v;
}

TEST(CliTrain, PrintsOneLossPerStepAndLearns) {
  const CliRun r = dptwin("--model mlp:8-32-4 --loss ce --optimizer adamw --lr 0.01 --batch 32 --steps 60 --seed 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto l = losses(r.out);
  ASSERT_EQ(l.size(), 60u) << r.out;
  EXPECT_LT(l.back(), 0.5 * l.front()) << r.out;
}

// A loss that turns NaN or inf says from which step and where to look (it printed "loss
// -nan" and nothing else); NaN prints as PyTorch prints it. SGD at lr 1e6 diverges by step 3.
TEST(CliTrain, ALossThatTurnsNanSaysFromWhichStep) {
  const CliRun r = dptwin("--model mlp:4-8-2 --lr 1000000 --steps 4 --batch 8");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("step 3 loss nan\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("-nan"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("warning: the loss is not finite from step 3 on: check --init and --data for NaN or inf "
                       "values, or lower --lr (1e+06)"),
            std::string::npos)
      << r.out;
  const CliRun fine = dptwin("--model mlp:4-8-2 --steps 3");
  EXPECT_EQ(fine.out.find("not finite"), std::string::npos) << fine.out;
}

TEST(CliTrain, JsonHasEveryStepAndBothBatchFigures) {
  const CliRun r = dptwin("--model mlp:4-8-2 --steps 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"batch\": 32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"batch_per_device\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"step\": 3"), std::string::npos) << r.out;
}

// torch.chunk of 5 on 4 devices gives 3 chunks (2+2+1): the header says 3 devices computed.
TEST(CliTrain, AChunkedBatchSaysHowManyDevicesGotSamples) {
  const CliRun r = dptwin("--model mlp:4-8-2 --strategy dp --devices 4 --batch 5 --steps 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("batch 5 (2+2+1+0 over 4 devices, 3 with samples: torch.chunk gives 3 chunks)"),
            std::string::npos)
      << r.out;
}

// Invariant: the JSON's batch fields describe one micro-batch, as the README says: with
// --accumulate K the per-device split is one micro-batch's torch.chunk of --batch (the step
// takes K x --batch samples), not the step's sum.
TEST(CliTrain, AccumulatedJsonBatchFieldsAreOneMicroBatch) {
  const CliRun r = dptwin("--model mlp:4-8-2 --strategy ddp --devices 2 --batch 8 --accumulate 2 --steps 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("batch"), 8);
  EXPECT_EQ(j.at("accumulate"), 2);
  EXPECT_EQ(j.at("batch_per_device"), nlohmann::json({4, 4})) << r.out;
  // The settings that change the losses are in the JSON: DDP's uneven mode and the shuffle.
  EXPECT_EQ(j.at("uneven"), "pytorch");
  EXPECT_EQ(j.at("shuffle"), false);
  const CliRun w = dptwin("--model mlp:4-8-2 --strategy ddp --devices 2 --batch 8 --steps 1 --uneven weighted --shuffle "
                          "--comm-hook bf16_compress --json");
  ASSERT_EQ(w.exit_code, 0) << w.out;
  const auto jw = nlohmann::json::parse(w.out);
  EXPECT_EQ(jw.at("uneven"), "weighted");
  EXPECT_EQ(jw.at("shuffle"), true);
  const CliRun text = dptwin("--model mlp:4-8-2 --strategy ddp --devices 2 --batch 8 --steps 1 --comm-hook bf16_compress");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find(", comm hook bf16_compress"), std::string::npos) << text.out;  // the header names it
}

// A safetensors file with `n` samples: x [n, 4] and y [n, 2], f32, written by hand in the
// format's own layout (8-byte header length, JSON header, little-endian data).
void write_data(const std::string& path, int n) {
  nlohmann::json h;
  h["x"] = {{"dtype", "F32"}, {"shape", {n, 4}}, {"data_offsets", {0, n * 16}}};
  h["y"] = {{"dtype", "F32"}, {"shape", {n, 2}}, {"data_offsets", {n * 16, n * 24}}};
  std::string header = h.dump();
  while (header.size() % 8 != 0) header += ' ';
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << header;
  for (int i = 0; i < n * 6; ++i) {
    const float v = static_cast<float>(i % 7) * 0.25f;
    out.write(reinterpret_cast<const char*>(&v), sizeof v);
  }
}

// A step larger than --data takes samples twice within it, which a DataLoader never does:
// said in a warning, with the batch that fits (it ran silently; found by an outside-user
// review). A batch that fits says nothing.
TEST(CliTrain, ABatchLargerThanTheDataIsSaid) {
  const auto dir = std::filesystem::temp_directory_path() / ("dptwin_cli_train_data_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string data = (dir / "d.safetensors").string();
  write_data(data, 40);
  const CliRun big = dptwin("--model mlp:4-8-2 --steps 1 --batch 64 --data " + data);
  EXPECT_EQ(big.exit_code, 0) << big.out;
  EXPECT_NE(big.out.find("a step takes 64 samples but --data holds 40"), std::string::npos) << big.out;
  const CliRun fits = dptwin("--model mlp:4-8-2 --steps 1 --batch 40 --data " + data);
  EXPECT_EQ(fits.exit_code, 0) << fits.out;
  EXPECT_EQ(fits.out.find("--data holds"), std::string::npos) << fits.out;
  std::filesystem::remove_all(dir);
}

TEST(CliTrain, CheckpointIsWrittenAndInitReproducesTheRun) {
  const auto dir = std::filesystem::temp_directory_path() / ("dptwin_cli_train_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string init = (dir / "init.safetensors").string(), other = (dir / "other.safetensors").string();
  ASSERT_EQ(dptwin("--model mlp:4-8-2 --dtype f64 --steps 0 --seed 5 --checkpoint " + init).exit_code, 0);
  ASSERT_EQ(dptwin("--model mlp:4-8-2 --dtype f64 --steps 0 --seed 7 --checkpoint " + other).exit_code, 0);
  const CliRun a = dptwin("--model mlp:4-8-2 --dtype f64 --steps 4 --seed 5");
  // The weights come from the file (and the dtype with them); --seed still picks the synthetic data.
  const CliRun b = dptwin("--model mlp:4-8-2 --steps 4 --seed 5 --init " + init);
  const CliRun c = dptwin("--model mlp:4-8-2 --steps 4 --seed 5 --init " + other);
  ASSERT_EQ(a.exit_code, 0) << a.out;
  ASSERT_EQ(b.exit_code, 0) << b.out;
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_EQ(losses(a.out), losses(b.out));
  EXPECT_NE(losses(a.out), losses(c.out));
  const CliRun bad = dptwin("--model mlp:4-8-2 --steps 1 --dtype f32 --init " + init);
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--dtype"), std::string::npos) << bad.out;
  // A checkpoint given as --data names the flag and what the file holds (it said only "no
  // tensor named 'x'"; found by an outside-user review).
  const CliRun data = dptwin("--model mlp:4-8-2 --steps 1 --data " + init);
  EXPECT_EQ(data.exit_code, 2) << data.out;
  EXPECT_NE(data.out.find("--data " + init + ": no tensor named 'x' (the file holds "), std::string::npos) << data.out;
  std::filesystem::remove_all(dir);
}

// mlp:4-8-2's state dict with value 1 + (i % 64) / 128 - 0.75 at element i of each tensor
// (exact in bf16, f16 and f32), written by hand in the given safetensors dtype.
void write_mlp_4_8_2(const std::string& path, const std::string& weight_dtype, const std::string& bias_dtype = "") {
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors = {
      {"0.weight", {8, 4}}, {"0.bias", {8}}, {"2.weight", {2, 8}}, {"2.bias", {2}}};
  std::string header = "{", data;
  for (const auto& [name, shape] : tensors) {
    const std::string dtype = shape.size() == 1 && !bias_dtype.empty() ? bias_dtype : weight_dtype;
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    const size_t begin = data.size();
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = 1.0f + static_cast<float>(i % 64) / 128.0f - 0.75f;
      std::uint32_t bits;
      std::memcpy(&bits, &v, 4);
      if (dtype == "F32") {
        data.append(reinterpret_cast<const char*>(&bits), 4);
      } else {  // BF16: f32's upper half (exact for these values)
        const auto half = static_cast<std::uint16_t>(bits >> 16);
        data.append(reinterpret_cast<const char*>(&half), 2);
      }
    }
    header += (header.size() > 1 ? "," : "") + std::string("\"") + name + "\":{\"dtype\":\"" + dtype +
              "\",\"shape\":[" + std::to_string(shape[0]) + (shape.size() > 1 ? "," + std::to_string(shape[1]) : "") +
              "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  header += "}";
  std::ofstream f(path, std::ios::binary);
  const std::uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << data;
}

// A bf16 state dict (a model.to(torch.bfloat16) checkpoint) loads into the f32 model as
// torch's load_state_dict casts it: the run is the same run as from an f32 file holding the
// same values, says so, and checkpoints f32. Before: "unsupported safetensors dtype 'BF16'".
TEST(CliTrain, ABf16InitLoadsIntoTheF32ModelWidened) {
  const auto dir = std::filesystem::temp_directory_path() / ("dptwin_cli_train_bf16_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string half = (dir / "bf16.safetensors").string(), full = (dir / "f32.safetensors").string();
  write_mlp_4_8_2(half, "BF16");
  write_mlp_4_8_2(full, "F32");
  const CliRun a = dptwin("--model mlp:4-8-2 --steps 3 --seed 5 --init " + full);
  const std::string out = (dir / "after.safetensors").string();
  const CliRun b = dptwin("--model mlp:4-8-2 --steps 3 --seed 5 --init " + half + " --checkpoint " + out);
  ASSERT_EQ(a.exit_code, 0) << a.out;
  ASSERT_EQ(b.exit_code, 0) << b.out;
  EXPECT_EQ(losses(a.out), losses(b.out));
  EXPECT_EQ(losses(b.out).size(), 3u);
  EXPECT_NE(b.out.find("warning: --init " + half + " holds bf16 parameters: loaded into the f32 model widened "
                       "exactly"),
            std::string::npos)
      << b.out;
  std::ifstream saved(out, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(saved)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"dtype\":\"F32\""), std::string::npos);
  EXPECT_EQ(text.find("BF16"), std::string::npos);
  // --dtype f64 widens it further.
  EXPECT_EQ(dptwin("--model mlp:4-8-2 --steps 1 --dtype f64 --init " + half).exit_code, 0);
  // BF16 weights beside F32 biases (as checkpoints keeping norms in f32 hold them): the same run.
  const std::string mixed = (dir / "mixed.safetensors").string();
  write_mlp_4_8_2(mixed, "BF16", "F32");
  const CliRun m = dptwin("--model mlp:4-8-2 --steps 3 --seed 5 --init " + mixed);
  ASSERT_EQ(m.exit_code, 0) << m.out;
  EXPECT_EQ(losses(m.out), losses(a.out));
  EXPECT_NE(m.out.find("holds bf16 parameters"), std::string::npos) << m.out;
  std::filesystem::remove_all(dir);
}

// An --init of another MLP names the --model that loads it (an outside-user review left out
// --layernorm and read only PyTorch's key lists): read off the file's names and shapes, for
// dptwin's checkpoints, through a wrapper's prefix, and for a state dict written by hand.
TEST(CliTrain, AnotherMlpsStateDictNamesTheModelThatLoadsIt) {
  const auto dir = std::filesystem::temp_directory_path() / ("dptwin_cli_train_spec_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string ln = (dir / "ln.safetensors").string(), dp = (dir / "dp.safetensors").string();
  ASSERT_EQ(dptwin("--model mlp:8-32-2 --layernorm --steps 0 --checkpoint " + ln).exit_code, 0);
  ASSERT_EQ(dptwin("--model mlp:8-16-16-3 --strategy dp --devices 2 --steps 0 --checkpoint " + dp).exit_code, 0);
  const CliRun a = dptwin("--model mlp:8-32-2 --steps 1 --init " + ln);
  EXPECT_EQ(a.exit_code, 2);
  EXPECT_NE(a.out.find("--init: " + ln + " holds the state dict of --model mlp:8-32-2 --layernorm"), std::string::npos)
      << a.out;
  // Through a wrapper: the module. keys are read past their prefix.
  const CliRun b = dptwin("--model mlp:8-16-2 --strategy ddp --devices 2 --steps 1 --init " + dp);
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.out.find("holds the state dict of --model mlp:8-16-16-3 ("), std::string::npos) << b.out;
  // Loading it as what it is works.
  EXPECT_EQ(dptwin("--model mlp:8-32-2 --layernorm --steps 1 --init " + ln).exit_code, 0);
  // Written by hand (write_mlp_4_8_2, as PyTorch names nn.Sequential's parameters).
  const std::string odd = (dir / "odd.safetensors").string();
  write_mlp_4_8_2(odd, "F32");
  const CliRun c = dptwin("--model mlp:4-8-3 --steps 1 --init " + odd);
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.out.find("holds the state dict of --model mlp:4-8-2 ("), std::string::npos) << c.out;
  std::filesystem::remove_all(dir);
}

TEST(CliTrain, BadFlagsExitTwoNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"--model mlp:4-2 --no-such-flag", "--no-such-flag"},
      {"--steps 2", "--model"},
      {"--model mlp:4-x", "--model"},
      {"--model mlp:4-2 --lr -1", "--lr"},
      {"--model mlp:4-2 --batch 0", "--batch"},
      {"--model mlp:4-2 --steps -3", "--steps"},
      {"--model mlp:4-2 --devices 2", "--devices"},
      {"--model mlp:4-2 --activation tanh", "--activation"},
      {"--model mlp:4-2 --dtype f16", "--dtype"},
      {"--model mlp:4-2 --optimizer adamw --momentum 0.9", "--momentum"},
      {"--model mlp:4-2 --uneven weighted", "--uneven"},
      {"--model mlp:4-2 --strategy ddp --devices 2 --batch 10 --batch-per-device 4", "--batch-per-device"},
      {"--model mlp:4-2 --data /nonexistent/data.safetensors", "--data"},
      {"--model mlp:4-2 --activation-checkpointing 0", "--activation-checkpointing"},
      {"--model mlp:4-2 --activation-checkpointing sometimes", "--activation-checkpointing"},
      {"--model mlp:4-2 --activation-checkpointing 2x", "--activation-checkpointing"},
      {"--model mlp:4-2 --precision tf32", "--precision"},
      {"--model mlp:4-2 --precision bf16", "--precision"},
      {"--model mlp:4-2 --precision bf16-amp --dtype f64", "--precision"},
      {"--model mlp:4-2 --init-strip-prefix module.", "--init-strip-prefix"},
      {"--model mlp:4-2 --lr nan", "--lr nan: must be a finite number"},
      // Refused before training, not after it: the checkpoint's folder must exist.
      {"--model mlp:4-2 --checkpoint /nonexistent-dptwin-folder/c.safetensors", "--checkpoint"},
  };
  for (auto& [args, flag] : cases) {
    const CliRun r = dptwin(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(flag), std::string::npos) << args << "\n" << r.out;
  }
}

std::vector<double> json_losses(const std::string& out) {
  std::vector<double> v;
  const auto doc = nlohmann::json::parse(out);
  for (auto& s : doc["steps"]) v.push_back(s["loss"].get<double>());
  return v;
}

TEST(CliTrain, SameDataGivesTheSameStepsUnderSingleDpAndDdp) {
  // --batch is the global batch for every strategy, and the data is consumed in the
  // same order, so with an even split the three runs compute the same losses (f64:
  // they differ only by the order of floating-point sums).
  const std::string common = "--model mlp:8-16-4 --dtype f64 --steps 4 --seed 2 --batch 64 --json";
  const CliRun single = dptwin(common);
  const CliRun dp = dptwin(common + " --strategy dp --devices 2");
  const CliRun ddp = dptwin(common + " --strategy ddp --devices 2");
  ASSERT_EQ(single.exit_code, 0) << single.out;
  ASSERT_EQ(dp.exit_code, 0) << dp.out;
  ASSERT_EQ(ddp.exit_code, 0) << ddp.out;
  const auto a = json_losses(single.out), b = json_losses(dp.out), c = json_losses(ddp.out);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  ASSERT_EQ(c.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i], a[i], 1e-12 * std::abs(a[i])) << "dp step " << i + 1;
    EXPECT_NEAR(c[i], a[i], 1e-12 * std::abs(a[i])) << "ddp step " << i + 1;
  }
  EXPECT_EQ(nlohmann::json::parse(dp.out)["batch_per_device"], nlohmann::json({32, 32}));
}

std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(CliTrain, ActivationCheckpointingLeavesTheTrainingBitIdentical) {
  // Recomputing a segment's forward runs the same kernels on the same inputs, so every
  // gradient, and so every loss and the final weights, are the same bits with or
  // without checkpointing (DDP on 2 host devices, 7 layers, f32).
  const auto dir = std::filesystem::temp_directory_path() / ("dptwin_cli_ckpt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string common = "--model mlp:8-16-16-16-4 --layernorm --strategy ddp --devices 2 --steps 3 --seed 4 "
                             "--optimizer adamw --json --checkpoint ";
  std::vector<std::string> weights, loss_lists;
  for (const std::string mode : {"none", "every", "2", "5"}) {
    const auto file = dir / (mode + ".safetensors");
    const CliRun r = dptwin(common + file.string() + " --activation-checkpointing " + mode);
    ASSERT_EQ(r.exit_code, 0) << mode << "\n" << r.out;
    const auto doc = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(doc["activation_checkpointing"], mode);
    std::string losses_text;  // every step's loss, all 17 digits (step_s differs run to run)
    for (auto& step : doc["steps"]) losses_text += step["loss"].dump() + " ";
    loss_lists.push_back(losses_text);
    weights.push_back(file_bytes(file));
    ASSERT_FALSE(weights.back().empty()) << mode;
  }
  for (size_t i = 1; i < weights.size(); ++i) {
    EXPECT_EQ(loss_lists[i], loss_lists[0]) << "mode " << i;
    EXPECT_TRUE(weights[i] == weights[0]) << "final weights differ in mode " << i;
  }
  std::filesystem::remove_all(dir);
}

TEST(CliTrain, AmpPrecisionsTrainNearTheF32RunAndSayWhatTheyDid) {
  // bf16-amp and f16-amp (autocast emulated on the host) follow the f32 run: each
  // step's loss within 5 % (a few bf16 roundings of 2^-8 per layer, over 10 steps).
  const std::string common = "--model mlp:8-32-4 --loss ce --optimizer adamw --lr 0.01 --steps 10 --seed 3 --json";
  const CliRun f32 = dptwin(common);
  ASSERT_EQ(f32.exit_code, 0) << f32.out;
  const auto base = json_losses(f32.out);
  for (const std::string p : {"bf16-amp", "f16-amp"}) {
    const CliRun r = dptwin(common + " --precision " + p);
    ASSERT_EQ(r.exit_code, 0) << p << "\n" << r.out;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["precision"], p);
    const auto l = json_losses(r.out);
    ASSERT_EQ(l.size(), base.size());
    int skipped = 0;
    if (p == "f16-amp") {
      // PyTorch's GradScaler: 2^16 at the start, halved on each skipped step.
      const double scale = doc["grad_scaler"]["scale"].get<double>();
      skipped = doc["grad_scaler"]["skipped_steps"].get<int>();
      EXPECT_EQ(scale, std::ldexp(65536.0, -skipped)) << r.out;
    } else {
      EXPECT_TRUE(doc["grad_scaler"].is_null()) << "bf16-amp runs without a GradScaler";
    }
    // A skipped step leaves the weights behind the f32 run's: then only learning is checked.
    if (skipped == 0)
      for (size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(l[i], base[i], 0.05 * base[i]) << p << " step " << i + 1;
    else
      EXPECT_LT(l.back(), l.front()) << p;
  }
  const CliRun text = dptwin("--model mlp:8-32-4 --steps 2 --precision f16-amp");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find("precision f16-amp: Linear in f16"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("GradScaler: loss scale"), std::string::npos) << text.out;
}

TEST(CliTrain, HelpShowsAnExample) {
  const CliRun r = dptwin("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Example:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--batch-per-device"), std::string::npos) << r.out;
}

}  // namespace
