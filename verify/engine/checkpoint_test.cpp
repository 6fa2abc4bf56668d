// State dicts: save/load round trips, PyTorch's strict-load error text, prefix
// stripping, and shape/dtype mismatches that name the file and tensor.
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

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
