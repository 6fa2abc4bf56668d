// `dptwin bench --backend host`'s engine on this machine: collective sweeps with
// nccl-tests' sizes, columns and exact result checks, microbenchmark figures, the
// JSON format, and the text read back by the nccl-tests log parser.
#include <gtest/gtest.h>

#include <sstream>

#include "engine/host/host_backend.hpp"
#include "scenarios/measure/device_bench.hpp"
#include "scenarios/measure/nccl_tests_log.hpp"
#include "scenarios/measure/real_backend.hpp"
#include "verify/support/error_text.hpp"
#include "verify/support/forwarding_communicator.hpp"

using namespace dpt;

namespace {

DeviceBenchOptions small_options() {
  DeviceBenchOptions o = default_device_bench_options("host");
  o.sweep.min_bytes = 8;
  o.sweep.max_bytes = 64 * kKiB;
  o.sweep.step_factor = 8;
  o.sweep.iters = 2;
  o.sweep.warmup_iters = 1;
  o.gemm_size = 64;
  o.copy_bytes = 256 * kKiB;
  return o;
}

using test::invalid_argument_text;

// A communicator that adds 1 to element 0 of every all_reduce result on rank 0:
// a planted bug the #wrong check must report.
class OffByOne : public test::ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  std::string backend_name() const override { return "off-by-one"; }
  WorkPtr all_reduce(Tensor& t, const AllReduceOptions& o) override {
    auto w = ForwardingCommunicator::all_reduce(t, o);
    w->wait();
    if (rank() == 0 && t.numel() > 0) t.data_as<float>()[0] += 1.0f;
    return w;
  }
};

class OffByOneBackend : public HostBackend {
 public:
  using HostBackend::HostBackend;
  std::vector<std::unique_ptr<Communicator>> make_communicators(const std::vector<int>& d) override {
    auto inner = HostBackend::make_communicators(d);
    std::vector<std::unique_ptr<Communicator>> out;
    for (auto& c : inner) out.push_back(std::make_unique<OffByOne>(std::move(c)));
    return out;
  }
};

}  // namespace

TEST(DeviceBench, NcclTestsSizesParseAsPowersOf1024) {
  EXPECT_EQ(parse_nccl_size("8", "-b"), 8);
  EXPECT_EQ(parse_nccl_size("64K", "-b"), 65536);
  EXPECT_EQ(parse_nccl_size("1M", "-e"), 1048576);
  EXPECT_EQ(parse_nccl_size("2G", "-e"), 2147483648);
  EXPECT_EQ(invalid_argument_text([] { parse_nccl_size("1.5G", "-e"); }),
            "-e '1.5G': not a size (a whole number, optionally with K, M or G = 1024, 1024^2, 1024^3 as nccl-tests "
            "reads them)");
  EXPECT_EQ(sweep_sizes(SweepOptions{8, 64, 2, 1, 0, true}), (std::vector<Bytes>{8, 16, 32, 64}));
}

TEST(DeviceBench, BadOptionsNameTheFlag) {
  HostBackend b(2);
  auto o = small_options();
  o.sweep.max_bytes = 4;
  EXPECT_EQ(invalid_argument_text([&] { run_device_bench(b, o); }), "-e 4 is smaller than -b 8");
  o = small_options();
  o.sweep.step_factor = 1;
  EXPECT_EQ(invalid_argument_text([&] { run_device_bench(b, o); }), "-f 1: the step factor must exceed 1");
  o = small_options();
  o.collectives = {"all_to_all"};
  EXPECT_NE(invalid_argument_text([&] { run_device_bench(b, o); }).find("Invalid collective: all_to_all"),
            std::string::npos);
}

TEST(DeviceBench, HostSweepsAreExactWithNcclTestsColumns) {
  for (int n : {2, 3}) {
    HostBackend b(n);
    auto o = small_options();
    o.run_gemm = o.run_memory = o.run_copies = false;
    for (DType t : {DType::f32, DType::i64}) {
      o.dtype = t;
      const auto r = run_device_bench(b, o);
      ASSERT_EQ(r.collectives.size(), 5u);
      // nccl-tests' bus bandwidth factors (doc/PERFORMANCE.md), written out for n ranks.
      const std::map<std::string, double> factor = {{"all_reduce", 2.0 * (n - 1) / n},
                                                    {"all_gather", (n - 1.0) / n},
                                                    {"reduce_scatter", (n - 1.0) / n},
                                                    {"broadcast", 1.0},
                                                    {"reduce", 1.0}};
      const Bytes elt = dtype_size_bytes(t);
      for (const auto& s : r.collectives) {
        EXPECT_EQ(s.ranks, n);
        EXPECT_EQ(s.type, t == DType::f32 ? "float" : "int64");
        ASSERT_FALSE(s.rows.empty()) << s.collective;
        const bool gathers = s.collective == "all_gather" || s.collective == "reduce_scatter";
        for (const auto& row : s.rows) {
          // Invariant: size is the whole buffer, count what one rank passes.
          EXPECT_EQ(row.size_bytes, gathers ? row.count * n * elt : row.count * elt) << s.collective;
          EXPECT_GT(row.time_s, 0.0);
          EXPECT_NEAR(row.busbw / row.algbw, factor.at(s.collective), 1e-12) << s.collective;
          EXPECT_NEAR(row.algbw, static_cast<double>(row.size_bytes) / row.time_s, 1e-6 * row.algbw);
          ASSERT_TRUE(row.wrong.has_value());
          EXPECT_EQ(*row.wrong, 0) << s.collective << " " << row.size_bytes << " B on " << n << " ranks";
        }
      }
    }
  }
}

TEST(DeviceBench, WrongResultsAreCounted) {
  // Planted bug: one element of rank 0's all_reduce result is off by one.
  OffByOneBackend b(2);
  auto o = small_options();
  o.run_gemm = o.run_memory = o.run_copies = false;
  o.collectives = {"all_reduce"};
  const auto r = run_device_bench(b, o);
  for (const auto& row : r.collectives.at(0).rows) EXPECT_EQ(row.wrong, std::optional<std::int64_t>(1));
  o.sweep.check = false;
  // Held in a variable: a range-for over a member of a temporary reads freed memory (ASan).
  const auto unchecked = run_device_bench(b, o);
  for (const auto& row : unchecked.collectives.at(0).rows) EXPECT_FALSE(row.wrong.has_value());
}

TEST(DeviceBench, MicroFiguresCoverEveryDeviceAndPair) {
  HostBackend b(2);
  auto o = small_options();
  o.run_collectives = false;
  const auto r = run_device_bench(b, o);
  ASSERT_EQ(r.gemm.size(), 4u);  // 2 devices x {f32, f64}
  for (const auto& g : r.gemm) {
    EXPECT_EQ(g.m, 64);
    EXPECT_NEAR(g.flops_per_s * g.time_s, 2.0 * 64 * 64 * 64, 1e-6 * 2.0 * 64 * 64 * 64);
  }
  std::map<std::string, int> kinds;
  for (const auto& f : r.bandwidth) {
    ++kinds[f.kind];
    EXPECT_EQ(f.bytes, 256 * kKiB);
    EXPECT_GT(f.bytes_per_s, 0.0);
  }
  EXPECT_EQ(kinds, (std::map<std::string, int>{{"memory", 2}, {"h2d", 2}, {"d2h", 2}, {"peer", 2}}));
  EXPECT_NE(micro_figures_text(r).find("gemm"), std::string::npos);
}

TEST(DeviceBench, JsonRoundTripsAndRejectsBadFiles) {
  HostBackend b(2);
  auto o = small_options();
  o.collectives = {"all_reduce", "all_gather"};
  auto r = run_device_bench(b, o);
  r.versions = backend_versions("host");
  const auto j = device_bench_to_json(r);
  EXPECT_EQ(j.at("schema"), "dptwin.bench/1");
  EXPECT_EQ(device_bench_to_json(device_bench_from_json(j, "b.json")), j);
  auto bad = j;
  bad["schema"] = "dptwin.bench/0";
  EXPECT_EQ(invalid_argument_text([&] { device_bench_from_json(bad, "b.json"); }),
            "b.json: schema is 'dptwin.bench/0', expected 'dptwin.bench/1'");
  bad = j;
  bad["collectives"][1]["rows"][0].erase("time_s");
  EXPECT_EQ(invalid_argument_text([&] { device_bench_from_json(bad, "b.json"); }),
            "b.json: collectives[1].rows[0].time_s is missing");
  bad = j;
  bad["gemm"][0]["tflops"] = 1;
  EXPECT_EQ(invalid_argument_text([&] { device_bench_from_json(bad, "b.json"); }),
            "b.json: gemm[0].tflops is not a known key");
}

TEST(DeviceBench, TextReadsBackAsAnNcclTestsLog) {
  HostBackend b(3);
  auto o = small_options();
  o.run_gemm = o.run_memory = o.run_copies = false;
  o.collectives = {"all_gather"};
  const auto r = run_device_bench(b, o);
  const auto& s = r.collectives.at(0);
  std::string text = collective_sweep_header_text(s, r);
  for (const auto& row : s.rows) text += collective_row_text(s, row);
  text += collective_sweep_footer_text(s);
  std::istringstream in(text);
  const NcclTestsLog log = parse_nccl_tests_log(in, "bench.txt");
  EXPECT_EQ(log.collective, "all_gather");
  EXPECT_EQ(log.ranks, 3);
  ASSERT_EQ(log.rows.size(), s.rows.size());
  for (size_t i = 0; i < s.rows.size(); ++i) {
    EXPECT_EQ(log.rows[i].size_bytes, s.rows[i].size_bytes);
    EXPECT_EQ(log.rows[i].count, s.rows[i].count);
    EXPECT_EQ(log.timing(log.rows[i]).wrong, std::optional<std::int64_t>(0));
  }
  EXPECT_EQ(log.out_of_bounds, std::optional<int>(0));
}
