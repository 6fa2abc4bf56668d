// safetensors format: bit-exact round trips, validated reads of corrupt and
// truncated files (each error's text), and atomic writes that keep the old file.
#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "engine/host/host_backend.hpp"
#include "engine/io/safetensors.hpp"
#include "verify/support/test_files.hpp"

namespace fs = std::filesystem;
using namespace dpt;

namespace {

// A fresh directory under the build tree for one test's files.
fs::path safetensors_dir(const std::string& name) { return test::fresh_test_dir(fs::path("test-tmp") / "safetensors" / name); }

std::vector<std::byte> file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  if (!c.empty()) std::memcpy(out.data(), c.data(), c.size());
  return out;
}

// A file built by hand: 8-byte length, the given header text, the given data bytes.
std::vector<std::byte> raw_file(const std::string& header, size_t data_bytes) {
  std::vector<std::byte> out(8 + header.size() + data_bytes, std::byte{0x5a});
  std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string parse_error(const std::vector<std::byte>& bytes, const std::string& path = "f.safetensors") {
  try {
    parse_safetensors(bytes, path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

rc::Gen<SafetensorsTensor> gen_tensor(int index) {
  return rc::gen::exec([index] {
    SafetensorsTensor t;
    // Printable ASCII including quotes and backslashes, which the JSON header must escape.
    auto stem = *rc::gen::container<std::string>(rc::gen::inRange<char>(' ', '~' + 1));
    t.name = stem + "#" + std::to_string(index);  // unique within one file
    t.dtype = *rc::gen::element(DType::f32, DType::f64, DType::i64, DType::i32);
    auto ndim = *rc::gen::inRange(0, 5);
    for (int i = 0; i < ndim; ++i) t.shape.push_back(*rc::gen::inRange<std::int64_t>(0, 6));
    auto n = static_cast<size_t>(shape_numel(t.shape) * dtype_size_bytes(t.dtype));
    // Arbitrary bit patterns: NaN payloads, denormals and huge integers must all survive.
    auto bytes = *rc::gen::container<std::vector<std::uint8_t>>(n, rc::gen::arbitrary<std::uint8_t>());
    t.data.resize(n);
    if (n) std::memcpy(t.data.data(), bytes.data(), n);
    return t;
  });
}

rc::Gen<std::vector<SafetensorsTensor>> gen_tensors() {
  return rc::gen::exec([] {
    std::vector<SafetensorsTensor> ts;
    auto count = *rc::gen::inRange(0, 7);
    for (int i = 0; i < count; ++i) ts.push_back(*gen_tensor(i));
    return ts;
  });
}

using Encoder = std::function<std::vector<std::byte>(const std::vector<SafetensorsTensor>&)>;

// The round-trip property for a given encoder.
void check_round_trip(const Encoder& encode) {
  auto ts = *gen_tensors();
  auto bytes = encode(ts);
  // Invariant: the data buffer starts on an 8-byte boundary (the format's padding rule).
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  RC_ASSERT((8 + header_bytes) % 8 == 0);
  auto f = parse_safetensors(bytes, "mem");
  // Invariant: decode(encode(ts)) == ts, names, dtypes, shapes and every byte.
  RC_ASSERT(f.tensors.size() == ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    RC_ASSERT(f.tensors[i].name == ts[i].name);
    RC_ASSERT(f.tensors[i].dtype == ts[i].dtype);
    RC_ASSERT(f.tensors[i].shape == ts[i].shape);
    RC_ASSERT(f.tensors[i].data == ts[i].data);
  }
}

// Planted bug: an encoder that stores every tensor through double, as a careless
// writer using tensor_to_f64_vector would (i64 above 2^53 and NaN payloads change).
std::vector<std::byte> lossy_encode(const std::vector<SafetensorsTensor>& ts) {
  auto copy = ts;
  for (auto& t : copy) {
    if (t.dtype != DType::i64) continue;
    for (size_t i = 0; i + 8 <= t.data.size(); i += 8) {
      std::int64_t v;
      std::memcpy(&v, t.data.data() + i, 8);
      v = static_cast<std::int64_t>(static_cast<double>(v));
      std::memcpy(t.data.data() + i, &v, 8);
    }
  }
  return encode_safetensors(copy);
}

}  // namespace

RC_GTEST_PROP(Safetensors, RoundTripIsBitExact, ()) { check_round_trip([](const auto& ts) { return encode_safetensors(ts); }); }

TEST(Safetensors, RoundTripPropertyCatchesLossyEncoder) {
  EXPECT_FALSE(rc::check("round trip through a lossy encoder", [] { check_round_trip(lossy_encode); }));
}

TEST(Safetensors, MetadataRoundTrips) {
  SafetensorsTensor t{"w", DType::f32, {2}, std::vector<std::byte>(8, std::byte{1})};
  auto f = parse_safetensors(encode_safetensors({t}, {{"format", "pt"}, {"step", "3"}}), "m");
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.metadata.at("step"), "3");
  ASSERT_EQ(f.tensors.size(), 1u);
}

// Truncation property for a given reader.
using Reader = std::function<void(const std::vector<std::byte>&)>;
// With cut_in_data the files hold tensor bytes and the cut lands inside them, where a
// reader that never checks the buffer length goes wrong; the planted-bug test uses it so
// that the counterexample is found on every run, not only when a random cut lands there.
void check_truncations_rejected(const Reader& read, bool cut_in_data = false) {
  auto ts = cut_in_data ? *rc::gen::suchThat(gen_tensors(),
                                              [](const std::vector<SafetensorsTensor>& v) {
                                                for (const auto& t : v)
                                                  if (!t.data.empty()) return true;
                                                return false;
                                              })
                        : *gen_tensors();
  auto bytes = encode_safetensors(ts);
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  const size_t data_start = cut_in_data ? static_cast<size_t>(8 + header_bytes) : 0;
  auto len = *rc::gen::inRange<size_t>(data_start, bytes.size());
  std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len));
  // Invariant: every strict prefix of a valid file is rejected with invalid_argument naming the file.
  bool rejected = false;
  try {
    read(cut);
  } catch (const std::invalid_argument& e) {
    rejected = std::string(e.what()).find("cut.safetensors") != std::string::npos;
  }
  RC_ASSERT(rejected);
}

// Planted bug: a reader that trusts the header and reads only the tensors' own ranges
// (clamped to what is there, so it does not crash), never checking the buffer length.
void trusting_read(const std::vector<std::byte>& bytes) {
  if (bytes.size() < 8) throw std::invalid_argument("cut.safetensors: short");
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > bytes.size() - 8) throw std::invalid_argument("cut.safetensors: short header");
  auto h = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n), nullptr,
                                 false);
  if (h.is_discarded()) throw std::invalid_argument("cut.safetensors: bad json");
}

RC_GTEST_PROP(Safetensors, EveryTruncationIsRejected, ()) {
  check_truncations_rejected([](const auto& b) { parse_safetensors(b, "cut.safetensors"); });
}

TEST(Safetensors, TruncationPropertyCatchesTrustingReader) {
  EXPECT_FALSE(rc::check("truncations through a trusting reader", [] { check_truncations_rejected(trusting_read, /*cut_in_data=*/true); }));
}

RC_GTEST_PROP(Safetensors, CorruptBytesNeverCrash, ()) {
  auto ts = *gen_tensors();
  auto bytes = encode_safetensors(ts);
  auto flips = *rc::gen::inRange(1, 6);
  for (int i = 0; i < flips; ++i) {
    auto at = *rc::gen::inRange<size_t>(0, bytes.size());
    bytes[at] = static_cast<std::byte>(*rc::gen::arbitrary<std::uint8_t>());
  }
  // Invariant: a corrupted file either parses into tensors whose data matches their
  // shape and dtype, or is rejected with invalid_argument naming the file; nothing else.
  try {
    auto f = parse_safetensors(bytes, "bad.safetensors");
    for (const auto& t : f.tensors)
      RC_ASSERT(static_cast<Bytes>(t.data.size()) == shape_numel(t.shape) * dtype_size_bytes(t.dtype));
  } catch (const std::invalid_argument& e) {
    RC_ASSERT(std::string(e.what()).find("bad.safetensors") != std::string::npos);
  }
}

// ---- each error's text -----------------------------------------------------------

TEST(SafetensorsErrors, TruncatedFileOnDisk) {
  auto d = safetensors_dir("truncated");
  auto p = d / "model.safetensors";
  SafetensorsTensor t{"0.weight", DType::f64, {3, 4}, std::vector<std::byte>(96, std::byte{7})};
  write_file_atomic(p.string(), encode_safetensors({t}));
  fs::resize_file(p, fs::file_size(p) - 10);
  try {
    read_safetensors(p.string());
    FAIL() << "truncated file was accepted";
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(p.string()), std::string::npos) << m;
    EXPECT_NE(m.find("'0.weight'"), std::string::npos) << m;
    EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  }
}

TEST(SafetensorsErrors, TooShortForLength) {
  EXPECT_NE(parse_error(std::vector<std::byte>(5)).find("f.safetensors: truncated: 5 bytes"), std::string::npos);
}

TEST(SafetensorsErrors, HeaderLongerThanFile) {
  auto b = raw_file("{}", 0);
  std::uint64_t n = 1000;
  std::memcpy(b.data(), &n, 8);
  EXPECT_NE(parse_error(b).find("the header claims 1000 bytes but only 2 follow"), std::string::npos);
}

TEST(SafetensorsErrors, HugeHeaderLength) {
  auto b = raw_file("{}", 0);
  std::uint64_t n = ~0ull;
  std::memcpy(b.data(), &n, 8);
  EXPECT_NE(parse_error(b).find("exceeds the limit"), std::string::npos);
}

// torch.save's zip (PyTorch >= 1.6) or pickle file given as safetensors says what it is; a
// real safetensors file whose header length starts with the same bytes stays one.
TEST(SafetensorsErrors, ATorchSaveFileSaysWhatItIs) {
  std::vector<std::byte> zip(64, std::byte{0});
  for (size_t i = 0; i < 4; ++i) zip[i] = std::byte{static_cast<unsigned char>("PK\x03\x04"[i])};
  EXPECT_NE(parse_error(zip).find("f.safetensors: a torch.save file (zip or pickle), not safetensors"),
            std::string::npos);
  std::vector<std::byte> pickle(64, std::byte{0x7d});
  pickle[0] = std::byte{0x80};
  pickle[1] = std::byte{0x02};
  EXPECT_NE(parse_error(pickle).find("a torch.save file"), std::string::npos);
  // A 640-byte header (0x0280: the pickle opcode's bytes) of a valid file parses.
  std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  header.resize(640, ' ');
  const auto ok = raw_file(header, 4);
  ASSERT_EQ(ok[0], std::byte{0x80});
  EXPECT_EQ(parse_safetensors(ok, "ok.safetensors").tensors.size(), 1u);
}

TEST(SafetensorsErrors, HeaderNotJson) {
  EXPECT_NE(parse_error(raw_file("{\"w\": {\"dtype\": ", 0)).find("header is not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error(raw_file("[1, 2]", 0)).find("header is not a JSON object"), std::string::npos);
}

TEST(SafetensorsErrors, UnknownDtypeNamesTensor) {
  // BF16 and F16 are read (a half-precision state dict loads widened); FP8 is not.
  auto m = parse_error(raw_file(R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", 2));
  EXPECT_NE(m.find("f.safetensors: tensor 'w': unsupported safetensors dtype 'F8_E4M3' (dptwin reads F32, F64, F16, "
                   "BF16, I64, I32)"),
            std::string::npos)
      << m;
}

TEST(SafetensorsErrors, SizeMismatchNamesTensor) {
  auto m = parse_error(raw_file(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20));
  EXPECT_NE(m.find("tensor 'w': data_offsets [0, 20] hold 20 bytes but F32 [2, 3] needs 24 bytes"), std::string::npos)
      << m;
}

TEST(SafetensorsErrors, OverlapAndGapAndTrailingBytes) {
  auto overlap = parse_error(raw_file(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12));
  EXPECT_NE(overlap.find("tensor 'b': data_offsets [4, 12] overlap tensor 'a'"), std::string::npos) << overlap;
  auto gap = parse_error(raw_file(R"({"a":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})", 8));
  EXPECT_NE(gap.find("tensor 'a': data_offsets [4, 8] leave a gap after byte 0"), std::string::npos) << gap;
  auto trailing = parse_error(raw_file(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 9));
  EXPECT_NE(trailing.find("the tensors cover 8 bytes but the data buffer has 9 bytes"), std::string::npos) << trailing;
}

TEST(SafetensorsErrors, BadShapeAndOffsets) {
  auto neg = parse_error(raw_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0));
  EXPECT_NE(neg.find("tensor 'w': \"shape\" has an entry that is not a non-negative integer: -1"), std::string::npos)
      << neg;
  auto huge = parse_error(
      raw_file(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0));
  EXPECT_NE(huge.find("tensor 'w': shape [4294967296,4294967296] is too large"), std::string::npos) << huge;
  auto missing = parse_error(raw_file(R"({"w":{"dtype":"F32","shape":[1]}})", 4));
  EXPECT_NE(missing.find("tensor 'w': header entry lacks \"data_offsets\""), std::string::npos) << missing;
  auto past = parse_error(raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4));
  EXPECT_NE(past.find("tensor 'w': data_offsets [0, 8] run past the data buffer of 4 bytes"), std::string::npos)
      << past;
}

TEST(SafetensorsErrors, DuplicateName) {
  auto m = parse_error(raw_file(
      R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8));
  EXPECT_NE(m.find("header names 'w' twice"), std::string::npos) << m;
}

TEST(SafetensorsErrors, MissingFile) {
  auto d = safetensors_dir("missing");
  try {
    read_safetensors((d / "nope.safetensors").string());
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("nope.safetensors: cannot open"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsErrors, EncoderRejectsBadInput) {
  SafetensorsTensor a{"w", DType::f32, {2}, std::vector<std::byte>(8)};
  EXPECT_THROW(encode_safetensors({a, a}), std::invalid_argument);
  SafetensorsTensor short_data{"w", DType::f32, {3}, std::vector<std::byte>(8)};
  EXPECT_THROW(encode_safetensors({short_data}), std::invalid_argument);
  SafetensorsTensor bad_utf8{"\xff\xfe", DType::f32, {0}, {}};
  EXPECT_THROW(encode_safetensors({bad_utf8}), std::invalid_argument);
}

// ---- tensors on devices and atomic writes ----------------------------------------

TEST(SafetensorsTensors, WriteReadTensorsBitExact) {
  HostDevice dev0(0, DeviceKind::host_worker), dev1(1, DeviceKind::host_worker), host(-1, DeviceKind::cpu_host);
  auto d = safetensors_dir("tensors");
  Tensor w = Tensor::empty(dev1, {3, 5}, DType::f64, MemoryCategory::parameters);
  Tensor y = Tensor::empty(dev0, {7}, DType::i64, MemoryCategory::inputs);
  for (int i = 0; i < 15; ++i) w.data_as<double>()[i] = 1.0 / (i + 3) - 0.25;
  for (int i = 0; i < 7; ++i) y.data_as<std::int64_t>()[i] = (std::int64_t{1} << 60) + i;  // not exact in double
  Tensor rows = w.slice_rows(1, 2);  // a view with a storage offset saves only its rows
  auto p = (d / "t.safetensors").string();
  write_safetensors_atomic(p, {{"w", w}, {"y", y}, {"rows", rows}}, nullptr, {{"who", "test"}});
  auto f = read_safetensors(p);
  EXPECT_EQ(f.metadata.at("who"), "test");
  Tensor w2 = tensor_from_safetensors(f.at("w"), dev0, MemoryCategory::parameters);
  Tensor y2 = tensor_from_safetensors(f.at("y"), host);
  ASSERT_EQ(w2.shape(), (Shape{3, 5}));
  EXPECT_EQ(std::memcmp(w2.data(), w.data(), 15 * 8), 0);
  EXPECT_EQ(std::memcmp(y2.data(), y.data(), 7 * 8), 0);
  ASSERT_EQ(f.at("rows").shape, (Shape{2, 5}));
  EXPECT_EQ(std::memcmp(f.at("rows").data.data(), w.data_as<double>() + 5, 10 * 8), 0);
  EXPECT_THROW(f.at("absent"), std::invalid_argument);
}

TEST(SafetensorsAtomic, FailedWriteLeavesOldFileIntact) {
  auto d = safetensors_dir("atomic");
  auto p = d / "ckpt.safetensors";
  SafetensorsTensor small{"w", DType::f32, {4}, std::vector<std::byte>(16, std::byte{1})};
  write_file_atomic(p.string(), encode_safetensors({small}));
  auto before = file_bytes(p);

  // A real write failure: the file-size limit makes write(2) fail with EFBIG midway
  // (SIGXFSZ ignored so the process survives it), as a full disk would.
  SafetensorsTensor big{"w", DType::f64, {1 << 16}, std::vector<std::byte>(8 << 16, std::byte{2})};
  auto bytes = encode_safetensors({big});
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit lim = old;
  lim.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  std::string err;
  try {
    write_file_atomic(p.string(), bytes);
  } catch (const std::runtime_error& e) {
    err = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_NE(err.find(p.string() + ": write failed"), std::string::npos) << err;
  EXPECT_EQ(file_bytes(p), before);  // the old checkpoint is untouched
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(d)) ++entries;
  EXPECT_EQ(entries, 1) << "the temporary file was not removed";
  EXPECT_EQ(parse_safetensors(file_bytes(p), "x").tensors.at(0).data, small.data);
}

TEST(SafetensorsAtomic, UnwritableTargets) {
  auto d = safetensors_dir("unwritable");
  SafetensorsTensor t{"w", DType::f32, {1}, std::vector<std::byte>(4)};
  auto bytes = encode_safetensors({t});
  // Directory that does not exist: the temporary file cannot be created.
  EXPECT_THROW(write_file_atomic((d / "no" / "such" / "f.safetensors").string(), bytes), std::runtime_error);
  // Target is a non-empty directory: refused before any temporary file, the directory kept.
  fs::create_directories(d / "isdir" / "keep");
  try {
    write_file_atomic((d / "isdir").string(), bytes);
    FAIL() << "wrote over a directory";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_directory(d / "isdir" / "keep"));
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(d)) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(SafetensorsAtomic, OutputsCreateTheirDirectoriesCheckpointsDoNot) {
  auto d = safetensors_dir("parents");
  SafetensorsTensor t{"w", DType::f32, {1}, std::vector<std::byte>(4)};
  auto bytes = encode_safetensors({t});
  const auto nested = d / "a" / "b" / "f.json";
  // Without the option (checkpoints): a missing directory is an error, nothing created.
  EXPECT_THROW(write_file_atomic(nested.string(), bytes), std::runtime_error);
  EXPECT_FALSE(fs::exists(d / "a"));
  // With it (reports, traces, JSON): the directories are made and the file written.
  write_file_atomic(nested.string(), bytes, {.create_parent_dirs = true});
  EXPECT_EQ(file_bytes(nested), bytes);
  // A parent that is a regular file: bad input (std::invalid_argument, exit 2 in the CLI)
  // naming the file in the way, which is kept.
  std::ofstream(d / "plain") << "keep";
  try {
    write_file_atomic((d / "plain" / "f.json").string(), bytes, {.create_parent_dirs = true});
    FAIL() << "wrote below a regular file";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find((d / "plain").string() + " is not a directory"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::is_regular_file(d / "plain"));
}

TEST(SafetensorsAtomic, OverwriteReplacesContent) {
  auto d = safetensors_dir("overwrite");
  auto p = (d / "f.safetensors").string();
  SafetensorsTensor a{"a", DType::i32, {1}, std::vector<std::byte>(4, std::byte{1})};
  SafetensorsTensor b{"b", DType::i32, {2}, std::vector<std::byte>(8, std::byte{2})};
  write_file_atomic(p, encode_safetensors({a}));
  write_file_atomic(p, encode_safetensors({b}));
  auto f = read_safetensors(p);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].name, "b");
  EXPECT_EQ(fs::status(p).permissions() & fs::perms::others_read, fs::perms::others_read);
}
