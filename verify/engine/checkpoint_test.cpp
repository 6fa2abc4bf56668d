// State dicts: save/load round trips, PyTorch's strict-load error text, prefix
// stripping, and shape/dtype mismatches that name the file and tensor.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "engine/core/half_round.hpp"
#include "engine/io/checkpoint.hpp"
#include "engine/host/host_backend.hpp"
#include "verify/support/test_files.hpp"

namespace fs = std::filesystem;
using namespace dpt;

namespace {

fs::path checkpoint_dir(const std::string& name) { return test::fresh_test_dir(fs::path("test-tmp") / "checkpoint" / name); }

// Parameters with PyTorch names, as a two-Linear MLP holds them ("0.*", "2.*"),
// owned here so the load logic is tested on its own.
struct Params {
  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<NamedParameter> named;
  void add(Device& dev, const std::string& name, const Shape& shape, DType dtype, double start) {
    auto p = std::make_unique<Parameter>();
    p->name = name.substr(name.find('.') + 1);
    p->value = Tensor::empty(dev, shape, dtype, MemoryCategory::parameters);
    p->grad = Tensor::zeros(dev, shape, dtype, MemoryCategory::gradients);
    std::vector<double> v(static_cast<size_t>(p->value.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = start + 0.125 * static_cast<double>(i);
    tensor_fill_from_f64(p->value, v);
    named.push_back({name, p.get()});
    owned.push_back(std::move(p));
  }
};

Params mlp_params(Device& dev, DType dtype, double start) {
  Params p;
  p.add(dev, "0.weight", {3, 4}, dtype, start);
  p.add(dev, "0.bias", {3}, dtype, start + 10);
  p.add(dev, "2.weight", {2, 3}, dtype, start + 20);
  p.add(dev, "2.bias", {2}, dtype, start + 30);
  return p;
}

std::string load_error(const std::vector<NamedParameter>& params, const SafetensorsFile& f, LoadOptions o = {}) {
  try {
    load_state_dict(params, f, o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Checkpoint, StateDictNamesAndPrefix) {
  HostDevice dev(0, DeviceKind::host_worker);
  auto p = mlp_params(dev, DType::f32, 0);
  auto sd = state_dict_of(p.named, "module.");
  ASSERT_EQ(sd.size(), 4u);
  EXPECT_EQ(sd[0].first, "module.0.weight");
  EXPECT_EQ(sd[3].first, "module.2.bias");
  EXPECT_EQ(sd[2].second.data(), p.named[2].param->value.data());  // shares the parameter's storage
}

RC_GTEST_PROP(Checkpoint, SaveLoadRoundTripBitExact, ()) {
  HostDevice dev(0, DeviceKind::host_worker);
  auto dtype = *rc::gen::element(DType::f32, DType::f64);
  auto in = *rc::gen::inRange<std::int64_t>(1, 9), out = *rc::gen::inRange<std::int64_t>(1, 9);
  Params src, dst;
  for (Params* p : {&src, &dst}) {
    p->add(dev, "0.weight", {out, in}, dtype, 0);
    p->add(dev, "0.bias", {out}, dtype, 0);
  }
  // Arbitrary bit patterns in the source parameters (NaNs with payloads included).
  for (auto& np : src.named) {
    auto bytes = *rc::gen::container<std::vector<std::uint8_t>>(static_cast<size_t>(np.param->value.size_bytes()),
                                                                 rc::gen::arbitrary<std::uint8_t>());
    std::memcpy(np.param->value.data(), bytes.data(), bytes.size());
  }
  auto path = (checkpoint_dir("roundtrip") / "m.safetensors").string();
  write_safetensors_atomic(path, state_dict_of(src.named));
  load_state_dict(dst.named, read_safetensors(path));
  // Invariant: every parameter after save then load is bitwise the saved one.
  for (size_t i = 0; i < src.named.size(); ++i)
    RC_ASSERT(std::memcmp(src.named[i].param->value.data(), dst.named[i].param->value.data(),
                          static_cast<size_t>(src.named[i].param->value.size_bytes())) == 0);
}

TEST(Checkpoint, StrictLoadOfPrefixedFileListsKeysAsPyTorch) {
  HostDevice dev(0, DeviceKind::host_worker);
  auto saved = mlp_params(dev, DType::f32, 1);
  auto path = (checkpoint_dir("strict") / "dp.safetensors").string();
  write_safetensors_atomic(path, state_dict_of(saved.named, "module."));
  auto target = mlp_params(dev, DType::f32, -5);
  auto msg = load_error(target.named, read_safetensors(path));
  // PyTorch 1.13's text for model.load_state_dict(dp.state_dict()), then the file.
  EXPECT_EQ(msg,
            "Error(s) in loading state_dict for Sequential:\n"
            "\tMissing key(s) in state_dict: \"0.weight\", \"0.bias\", \"2.weight\", \"2.bias\". \n"
            "\tUnexpected key(s) in state_dict: \"module.0.weight\", \"module.0.bias\", \"module.2.weight\", "
            "\"module.2.bias\". \n"
            "\t(checkpoint file: " + path + ")");
  // A failed load writes nothing.
  EXPECT_EQ(tensor_to_f64_vector(target.named[0].param->value)[0], -5.0);
}

TEST(Checkpoint, PrefixStrippingLoadSucceeds) {
  HostDevice dev(0, DeviceKind::host_worker);
  auto saved = mlp_params(dev, DType::f64, 1);
  auto path = (checkpoint_dir("strip") / "dp.safetensors").string();
  write_safetensors_atomic(path, state_dict_of(saved.named, "module."));
  auto target = mlp_params(dev, DType::f64, -5);
  load_state_dict(target.named, read_safetensors(path), LoadOptions{.strict = true, .strip_prefix = "module."});
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(tensor_to_f64_vector(target.named[i].param->value), tensor_to_f64_vector(saved.named[i].param->value));
}

TEST(Checkpoint, MissingOnlyAndNonStrict) {
  HostDevice dev(0, DeviceKind::host_worker);
  auto saved = mlp_params(dev, DType::f32, 1);
  auto partial = state_dict_of(saved.named);
  partial.erase(partial.begin() + 2);  // drop "2.weight"
  partial.push_back({"3.extra", saved.named[0].param->value});
  auto path = (checkpoint_dir("partial") / "p.safetensors").string();
  write_safetensors_atomic(path, partial);
  auto f = read_safetensors(path);
  auto target = mlp_params(dev, DType::f32, -5);
  EXPECT_EQ(load_error(target.named, f),
            "Error(s) in loading state_dict for Sequential:\n"
            "\tMissing key(s) in state_dict: \"2.weight\". \n"
            "\tUnexpected key(s) in state_dict: \"3.extra\". \n"
            "\t(checkpoint file: " + path + ")");
  load_state_dict(target.named, f, LoadOptions{.strict = false});
  EXPECT_EQ(tensor_to_f64_vector(target.named[0].param->value)[1], 1.125);
  EXPECT_EQ(tensor_to_f64_vector(target.named[2].param->value)[0], 15.0);  // -5 + 20, not loaded
}

TEST(Checkpoint, WrongShapeNamesFileAndTensor) {
  HostDevice dev(0, DeviceKind::host_worker);
  Params saved;
  saved.add(dev, "0.weight", {4, 3}, DType::f32, 0);
  saved.add(dev, "0.bias", {3}, DType::f32, 0);
  auto path = (checkpoint_dir("shape") / "s.safetensors").string();
  write_safetensors_atomic(path, state_dict_of(saved.named));
  Params target;
  target.add(dev, "0.weight", {3, 4}, DType::f32, 0);
  target.add(dev, "0.bias", {3}, DType::f32, 0);
  // Non-strict loads still refuse a wrong shape, as PyTorch does.
  EXPECT_EQ(load_error(target.named, read_safetensors(path), LoadOptions{.strict = false}),
            "Error(s) in loading state_dict for Sequential:\n"
            "\tsize mismatch for 0.weight: copying a param with shape torch.Size([4, 3]) from checkpoint, the shape "
            "in current model is torch.Size([3, 4]).\n"
            "\t(checkpoint file: " + path + ")");
}

TEST(Checkpoint, WrongDtypeNamesFileAndTensor) {
  HostDevice dev(0, DeviceKind::host_worker);
  auto saved = mlp_params(dev, DType::f64, 0);
  auto path = (checkpoint_dir("dtype") / "d.safetensors").string();
  write_safetensors_atomic(path, state_dict_of(saved.named, "module."));
  auto target = mlp_params(dev, DType::f32, 0);
  auto msg = load_error(target.named, read_safetensors(path), LoadOptions{.strip_prefix = "module."});
  EXPECT_NE(msg.find("dtype mismatch for 0.weight: the checkpoint holds F64 (tensor 'module.0.weight'), the parameter "
                     "in current model is F32."),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("(checkpoint file: " + path + ")"), std::string::npos) << msg;
}

// Half-precision values from their bits, against values read off the formats' definitions
// (IEEE 754 binary16; bfloat16 as f32's upper 16 bits), not computed by the decoder.
TEST(Checkpoint, HalfBitsDecodeAsTheFormatsDefineThem) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::pair<std::uint16_t, double>> f16 = {
      {0x3c00, 1.0},          {0xc000, -2.0},          {0x7bff, 65504.0},     {0x0400, 6.103515625e-05},
      {0x0001, 5.960464477539063e-08}, {0x03ff, 6.097555160522461e-05}, {0x3555, 0.333251953125},
      {0x7c00, inf},          {0xfc00, -inf},          {0x0000, 0.0}};
  for (const auto& [bits, value] : f16) EXPECT_EQ(half_bits_to_double(bits, DType::f16), value) << std::hex << bits;
  EXPECT_TRUE(std::signbit(half_bits_to_double(0x8000, DType::f16)));
  EXPECT_TRUE(std::isnan(half_bits_to_double(0x7e00, DType::f16)));
  const std::vector<std::pair<std::uint16_t, double>> bf16 = {
      {0x3f80, 1.0}, {0xc000, -2.0}, {0x4049, 3.140625}, {0x7f7f, 3.3895313892515355e38},
      {0x0080, 1.1754943508222875e-38}, {0x0001, 9.183549615799121e-41}, {0x7f80, inf}};
  for (const auto& [bits, value] : bf16) EXPECT_EQ(half_bits_to_double(bits, DType::bf16), value) << std::hex << bits;
  EXPECT_TRUE(std::isnan(half_bits_to_double(0x7fc0, DType::bf16)));
  EXPECT_THROW(half_bits_to_double(0x3c00, DType::f32), std::invalid_argument);
}

// Invariant: every finite f16 and bf16 pattern decodes to a value of that format (rounding
// it to the format, engine/core/half_round.hpp, leaves it), and distinct patterns to distinct
// values (but +0 and -0), ascending with the pattern among the positive ones.
TEST(Checkpoint, EveryHalfPatternDecodesToItsOwnValue) {
  for (DType t : {DType::f16, DType::bf16}) {
    const std::uint16_t first_nonfinite = t == DType::f16 ? 0x7c00 : 0x7f80;
    double previous = -1;
    for (std::uint32_t bits = 0; bits < first_nonfinite; ++bits) {
      const double v = half_bits_to_double(static_cast<std::uint16_t>(bits), t);
      ASSERT_EQ(round_to_format(v, low_format(t)), v) << dtype_name(t) << " " << bits;
      ASSERT_GT(v, previous) << dtype_name(t) << " " << bits;
      ASSERT_EQ(half_bits_to_double(static_cast<std::uint16_t>(bits | 0x8000), t), -v);
      previous = v;
    }
  }
}

// An f16 or bf16 state dict loads into f32 and f64 parameters, each value widened exactly;
// f64 into f32 (which rounds) stays a dtype mismatch.
TEST(Checkpoint, HalfStateDictWidensIntoFloatParameters) {
  HostDevice dev(0, DeviceKind::host_worker);
  for (DType target : {DType::f32, DType::f64}) {
    auto params = mlp_params(dev, target, 0);
    SafetensorsFile file;
    file.path = "half.safetensors";
    std::vector<double> expected;
    for (const auto& np : params.named) {
      SafetensorsTensor t;
      t.name = np.name;
      t.dtype = DType::bf16;
      t.shape = np.param->value.shape();
      const Elements n = np.param->value.numel();
      for (Elements i = 0; i < n; ++i) {
        // 1 + i/128 (i < 128) is exact in bf16: 0x3f80 + i
        const auto bits = static_cast<std::uint16_t>(0x3f80 + (i % 128));
        t.data.push_back(static_cast<std::byte>(bits & 0xff));
        t.data.push_back(static_cast<std::byte>(bits >> 8));
        expected.push_back(1.0 + static_cast<double>(i % 128) / 128.0);
      }
      file.tensors.push_back(std::move(t));
    }
    load_state_dict(params.named, file);
    std::vector<double> loaded;
    for (const auto& np : params.named)
      for (double v : tensor_to_f64_vector(np.param->value)) loaded.push_back(v);
    EXPECT_EQ(loaded, expected) << dtype_name(target);
  }
  EXPECT_TRUE(widens_exactly(DType::f16, DType::f32));
  EXPECT_FALSE(widens_exactly(DType::f64, DType::f32));
  EXPECT_FALSE(widens_exactly(DType::f32, DType::f16));
}

TEST(Checkpoint, StripCollisionIsAnError) {
  HostDevice dev(0, DeviceKind::host_worker);
  auto saved = mlp_params(dev, DType::f32, 0);
  auto sd = state_dict_of(saved.named);
  sd.push_back({"module.0.bias", saved.named[1].param->value});
  auto path = (checkpoint_dir("collide") / "c.safetensors").string();
  write_safetensors_atomic(path, sd);
  auto msg = load_error(saved.named, read_safetensors(path), LoadOptions{.strip_prefix = "module."});
  EXPECT_NE(msg.find("tensors '0.bias' and 'module.0.bias' both load as '0.bias'"), std::string::npos) << msg;
}

TEST(Checkpoint, SequentialSaveLoadThroughModelApi) {
  HostDevice dev(0, DeviceKind::host_worker);
  MlpSpec spec{.widths = {4, 6, 3}, .activation = Activation::gelu, .layernorm = true};
  Sequential a = make_mlp(spec, dev, DType::f32, 1), b = make_mlp(spec, dev, DType::f32, 2);
  auto sd = model_state_dict(a);
  std::vector<std::string> names;
  for (const auto& [k, t] : sd) names.push_back(k);
  // nn.Sequential(Linear, LayerNorm, GELU, Linear)'s state-dict keys.
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias"}));
  auto path = (checkpoint_dir("sequential") / "a.safetensors").string();
  save_checkpoint(a, path);
  load_state_dict(b, read_safetensors(path));
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(std::memcmp(pa[i].param->value.data(), pb[i].param->value.data(),
                          static_cast<size_t>(pa[i].param->value.size_bytes())),
              0)
        << pa[i].name;
}
