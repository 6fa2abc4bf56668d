// The training loop: the order in which data is consumed, that training actually
// learns (the loss falls on a problem an MLP can fit), determinism, and the data
// and --init files' paths through the same loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "engine/core/fault_injection.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/io/safetensors.hpp"
#include "engine/parallel/trainer.hpp"

namespace dpt {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("dptwin_trainer_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TrainConfig small_config(LossKind loss) {
  TrainConfig c;
  c.model = parse_mlp_spec("mlp:8-32-4");
  c.loss = loss;
  c.batch = 32;
  c.steps = 150;
  c.seed = 3;
  c.dtype = DType::f64;
  c.synthetic_samples = 256;
  return c;
}

double mean_of_last(const std::vector<double>& v, size_t n) {
  return std::accumulate(v.end() - static_cast<std::ptrdiff_t>(n), v.end(), 0.0) / static_cast<double>(n);
}

TEST(BatchIndices, DataIsConsumedInOrderWrappingToTheStart) {
  // 10 samples, batch 4: 0-3, 4-7, then 8, 9 and around to 0, 1.
  EXPECT_EQ(batch_indices(0, 4, 10, false, 0), (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(batch_indices(1, 4, 10, false, 0), (std::vector<std::int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(batch_indices(2, 4, 10, false, 0), (std::vector<std::int64_t>{8, 9, 0, 1}));
  EXPECT_EQ(batch_indices(3, 4, 10, false, 0), (std::vector<std::int64_t>{2, 3, 4, 5}));
  // A batch larger than the data set runs over it more than once.
  EXPECT_EQ(batch_indices(0, 5, 2, false, 0), (std::vector<std::int64_t>{0, 1, 0, 1, 0}));
}

TEST(BatchIndices, ShuffleGivesEachSampleOncePerPassAndDependsOnSeedAndPass) {
  const std::int64_t n = 100;
  auto pass = [&](std::int64_t epoch, std::uint64_t seed) { return batch_indices(epoch, n, n, true, seed); };
  for (std::int64_t e = 0; e < 3; ++e) {
    auto p = pass(e, 7);
    std::sort(p.begin(), p.end());
    std::vector<std::int64_t> all(n);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(p, all) << "pass " << e;
  }
  EXPECT_EQ(pass(1, 7), pass(1, 7));
  EXPECT_NE(pass(0, 7), pass(1, 7));
  EXPECT_NE(pass(0, 7), pass(0, 8));
  // Steps that straddle a pass boundary take the end of one permutation and the start of the next.
  auto straddle = batch_indices(1, 60, n, true, 7);
  auto p0 = pass(0, 7), p1 = pass(1, 7);
  std::vector<std::int64_t> expected(p0.begin() + 60, p0.end());
  expected.insert(expected.end(), p1.begin(), p1.begin() + 20);
  EXPECT_EQ(straddle, expected);
}

TEST(Trainer, MseLossFallsOnASyntheticRegressionProblem) {
  HostBackend backend(1);
  TrainConfig c = small_config(LossKind::mse);
  c.sgd.lr = 0.05;
  c.sgd.momentum = 0.9;
  const TrainResult r = train(backend, c);
  ASSERT_EQ(r.losses.size(), 150u);
  // Learning: the last ten steps' mean loss is under a tenth of the first step's.
  EXPECT_LT(mean_of_last(r.losses, 10), 0.1 * r.losses.front())
      << "first " << r.losses.front() << " last " << r.losses.back();
}

TEST(Trainer, CrossEntropyLossFallsOnASyntheticClassificationProblem) {
  HostBackend backend(1);
  TrainConfig c = small_config(LossKind::cross_entropy);
  c.optimizer = OptimizerKind::adamw;
  c.adamw.lr = 1e-2;
  c.model.layernorm = true;
  c.model.activation = Activation::gelu;
  const TrainResult r = train(backend, c);
  EXPECT_LT(mean_of_last(r.losses, 10), 0.3 * r.losses.front())
      << "first " << r.losses.front() << " last " << r.losses.back();
}

TEST(Trainer, SameSeedGivesBitwiseIdenticalLosses) {
  HostBackend backend(1);
  TrainConfig c = small_config(LossKind::mse);
  c.steps = 20;
  c.dtype = DType::f32;
  c.shuffle = true;
  const auto a = train(backend, c).losses, b = train(backend, c).losses;
  EXPECT_EQ(a, b);
  c.seed = 4;
  EXPECT_NE(train(backend, c).losses, a);
}

TEST(Trainer, DataFileAndInitFileDriveTheSameLoop) {
  HostBackend backend(1);
  TrainConfig c = small_config(LossKind::cross_entropy);
  c.steps = 5;
  // The synthetic data written to a file gives the same run as the data in memory.
  const Dataset data = make_synthetic_dataset(backend, c.model, c.loss, DType::f64, c.synthetic_samples, c.seed);
  const std::string data_path = temp_path("data.safetensors");
  write_safetensors_atomic(data_path, {{"x", data.x}, {"y", data.y}});
  TrainConfig from_file = c;
  from_file.data_path = data_path;
  const auto reference = train(backend, c).losses;
  EXPECT_EQ(train(backend, from_file).losses, reference);

  // A zero-step run with seed 3 checkpoints seed 3's initial weights; a seed-9 run
  // started from that file reproduces the seed-3 run exactly.
  const std::string init_path = temp_path("init.safetensors");
  TrainConfig save = from_file;
  save.steps = 0;
  save.checkpoint_path = init_path;
  train(backend, save);
  TrainConfig resumed = from_file;
  resumed.seed = 9;
  resumed.init_path = init_path;
  resumed.dtype.reset();  // taken from the file: f64
  const TrainResult r = train(backend, resumed);
  EXPECT_EQ(r.dtype, DType::f64);
  EXPECT_EQ(r.losses, reference);

  // An explicit --dtype that contradicts the file is an error naming both.
  resumed.dtype = DType::f32;
  try {
    train(backend, resumed);
    ADD_FAILURE() << "dtype mismatch accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--dtype f32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(init_path), std::string::npos) << e.what();
  }
  std::filesystem::remove(data_path);
  std::filesystem::remove(init_path);
}

// The tensors of a safetensors file by name, as raw bytes (bitwise comparison).
std::map<std::string, std::string> tensor_bytes(const std::string& path) {
  const SafetensorsFile f = read_safetensors(path);
  std::map<std::string, std::string> out;
  for (const auto& t : f.tensors) out[t.name] = std::string(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  return out;
}

TEST(Trainer, WrappedCheckpointResumesUnderDpAndDdpAndSingleWithTheStrippedPrefix) {
  // Invariant: a DataParallel/DDP checkpoint (every key "module.") given as --init loads
  // under dp and ddp as the wrapper's load_state_dict loads it, so a zero-step run writes
  // back the same tensors bit for bit; a single-device run loads it only with the prefix
  // stripped (consume_prefix_in_state_dict_if_present), and without that fails as
  // PyTorch's unwrapped load does, saying how to load it.
  HostBackend backend(2);
  TrainConfig c = small_config(LossKind::mse);
  c.steps = 3;
  c.strategy.kind = StrategyKind::data_parallel;
  const std::string wrapped = temp_path("wrapped.safetensors"), out = temp_path("out.safetensors");
  c.checkpoint_path = wrapped;
  train(backend, c);
  const auto saved = tensor_bytes(wrapped);
  ASSERT_FALSE(saved.empty());
  for (const auto& [name, bytes] : saved) ASSERT_TRUE(name.starts_with("module.")) << name;

  for (auto kind : {StrategyKind::data_parallel, StrategyKind::ddp}) {
    TrainConfig resume = small_config(LossKind::mse);
    resume.steps = 0;
    resume.seed = 11;  // other initial weights: only the file can give back the saved ones
    resume.strategy.kind = kind;
    resume.init_path = wrapped;
    resume.checkpoint_path = out;
    train(backend, resume);
    EXPECT_EQ(tensor_bytes(out), saved) << strategy_kind_name(kind);
  }

  TrainConfig single = small_config(LossKind::mse);
  single.steps = 0;
  single.seed = 11;
  single.init_path = wrapped;
  single.checkpoint_path = out;
  try {
    train(backend, single);
    ADD_FAILURE() << "a wrapper's checkpoint loaded into an unwrapped model";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("Unexpected key(s) in state_dict: \"module.0.weight\""), std::string::npos) << what;
    EXPECT_NE(what.find("--init-strip-prefix module."), std::string::npos) << what;
  }
  single.init_strip_prefix = "module.";
  train(backend, single);
  std::map<std::string, std::string> stripped;
  for (const auto& [name, bytes] : saved) stripped[name.substr(7)] = bytes;
  EXPECT_EQ(tensor_bytes(out), stripped);

  // A wrapper's checkpoint with a tensor the model lacks, loaded by ddp: the error names
  // the wrapper and the keys as the wrapper's load_state_dict does ("module.extra", as the
  // file has it; it read "for Sequential" and "extra"; an outside-user review).
  {
    SafetensorsFile file = read_safetensors(wrapped);
    std::vector<SafetensorsTensor> tensors = file.tensors;
    SafetensorsTensor extra = tensors.front();
    extra.name = "module.extra";
    tensors.push_back(extra);
    const std::string with_extra = temp_path("with_extra.safetensors");
    {
      const auto bytes = encode_safetensors(tensors);
      std::ofstream(with_extra, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                         static_cast<std::streamsize>(bytes.size()));
    }
    TrainConfig resume = small_config(LossKind::mse);
    resume.steps = 0;
    resume.strategy.kind = StrategyKind::ddp;
    resume.init_path = with_extra;
    try {
      train(backend, resume);
      ADD_FAILURE() << "a checkpoint with an unexpected key loaded strictly";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("Error(s) in loading state_dict for DistributedDataParallel:"), std::string::npos) << what;
      EXPECT_NE(what.find("Unexpected key(s) in state_dict: \"module.extra\""), std::string::npos) << what;
    }
    std::filesystem::remove(with_extra);
  }

  // Planted: dp and ddp keep the prefix, so the wrapper's own checkpoint fails to load.
  {
    ScopedFault fault(Fault::init_wrapper_prefix_kept);
    TrainConfig resume = small_config(LossKind::mse);
    resume.steps = 0;
    resume.strategy.kind = StrategyKind::ddp;
    resume.init_path = wrapped;
    EXPECT_THROW(train(backend, resume), std::invalid_argument);
  }
  std::filesystem::remove(wrapped);
  std::filesystem::remove(out);
}

TEST(Trainer, BadDataIsRejectedNamingFileAndTensor) {
  HostBackend backend(1);
  TrainConfig c = small_config(LossKind::cross_entropy);
  c.steps = 1;
  const std::string path = temp_path("bad.safetensors");
  c.data_path = path;
  auto expect_error = [&](const std::string& needle) {
    try {
      train(backend, c);
      ADD_FAILURE() << "accepted, expected an error containing: " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Device& host = backend.host_memory();
  Tensor x = Tensor::zeros(host, {4, 8}, DType::f64), labels = Tensor::zeros(host, {4}, DType::i64);
  labels.data_as<std::int64_t>()[2] = 4;  // 4 classes: valid labels are 0..3
  write_safetensors_atomic(path, {{"x", x}, {"y", labels}});
  expect_error("sample 2 has label 4");
  Tensor narrow = Tensor::zeros(host, {4, 7}, DType::f64);
  write_safetensors_atomic(path, {{"x", narrow}, {"y", Tensor::zeros(host, {4}, DType::i64)}});
  expect_error("tensor 'x'");
  write_safetensors_atomic(path, {{"x", x}});
  expect_error("'y'");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dpt
