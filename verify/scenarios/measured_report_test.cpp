// Measured intervals (CUDA events on the cuda backend) into the twin's report
// breakdown and Chrome trace: checked on hand-made intervals, without a GPU.
#include <gtest/gtest.h>

#include <rapidcheck.h>

#include "verify/support/rc_cases.hpp"
#include "scenarios/report/measured_report.hpp"

using namespace dpt;

namespace {

TimedInterval op(const char* name, OpKind kind, int device, int stream, Seconds s, Seconds e) {
  TimedInterval t;
  t.name = name;
  t.kind = kind;
  t.device = device;
  t.stream = stream;
  t.start_s = s;
  t.end_s = e;
  return t;
}

MeasuredStep two_device_step() {
  MeasuredStep m;
  m.device_names = {"cuda:0", "cuda:1"};
  m.step_time_s = 5.0;
  m.intervals = {op("gemm_fwd", OpKind::compute, 0, 0, 0.0, 2.0),
                 op("relu_fwd", OpKind::memory, 0, 0, 2.0, 3.0),
                 op("all_reduce", OpKind::collective, 0, 1, 2.5, 4.0),
                 op("sgd_step", OpKind::memory, 0, 0, 4.0, 4.5),
                 op("gemm_fwd", OpKind::compute, 1, 0, 0.0, 1.0)};
  TimedInterval phase = op("backward", OpKind::compute, 0, 0, 1.0, 4.0);
  phase.is_phase = true;
  m.intervals.push_back(phase);
  return m;
}

// Property body shared by union_length and the planted bug: spans with integer
// ends, against the count of unit cells they cover.
template <typename Union> void union_property(Union union_fn) {
  const auto n = *rc::gen::inRange<size_t>(0, 8);
  std::vector<std::pair<Seconds, Seconds>> spans;
  std::vector<bool> covered(64, false);
  for (size_t i = 0; i < n; ++i) {
    const int s = *rc::gen::inRange(0, 60);
    const int e = s + *rc::gen::inRange(0, 4);
    spans.push_back({static_cast<double>(s), static_cast<double>(e)});
    for (int c = s; c < e; ++c) covered[static_cast<size_t>(c)] = true;
  }
  double cells = 0;
  for (bool c : covered) cells += c ? 1 : 0;
  // Invariant: the union's length is the number of unit cells some span covers.
  RC_ASSERT(union_fn(spans) == cells);
}

}  // namespace

TEST(MeasuredReport, BreakdownFollowsTheReportsOrderOnTheBusiestDevice) {
  const StepBreakdown b = measured_breakdown(two_device_step());
  // Device 0 is busiest ([0, 4.5) covered). compute: gemm + relu = [0, 3);
  // optimizer: [4, 4.5) outside compute; the all-reduce [2.5, 4) is exposed on [3, 4);
  // dispatch: 5 - 4.5 with no device work.
  EXPECT_DOUBLE_EQ(b.compute, 3.0);
  EXPECT_DOUBLE_EQ(b.optimizer, 0.5);
  EXPECT_DOUBLE_EQ(b.exposed_communication, 1.0);
  EXPECT_DOUBLE_EQ(b.dispatch, 0.5);
}

TEST(MeasuredReport, ReportGetsStepTimeThroughputAndBusyTimes) {
  StepReport r;
  r.backend = "cuda";
  r.batch_global = 100;
  fill_measured_report(r, two_device_step());
  EXPECT_EQ(r.source, "measured");
  EXPECT_EQ(r.step_time_s, std::optional<Seconds>(5.0));
  EXPECT_EQ(r.throughput_samples_per_s, std::optional<double>(20.0));
  ASSERT_EQ(r.devices_detail.size(), 2u);
  EXPECT_EQ(r.devices_detail[0].device, "cuda:0");
  EXPECT_DOUBLE_EQ(r.devices_detail[0].busy_s, 4.5);
  EXPECT_DOUBLE_EQ(r.devices_detail[1].busy_s, 1.0);
}

TEST(MeasuredReport, TraceHasOneProcessPerDeviceAndOneThreadPerStream) {
  const ChromeTrace t = measured_trace(two_device_step());
  ASSERT_EQ(t.events().size(), 6u);
  EXPECT_EQ(t.events()[2].name, "all_reduce");
  EXPECT_EQ(t.events()[2].category, "collective");
  EXPECT_EQ(t.events()[2].tid, 1);
  EXPECT_DOUBLE_EQ(t.events()[2].duration_s, 1.5);
  EXPECT_EQ(t.events()[5].category, "phase");
  EXPECT_EQ(t.events()[5].tid, 2);
  const std::string json = t.to_json_text();
  EXPECT_NE(json.find("cuda:1"), std::string::npos);
  EXPECT_NE(json.find("communication stream"), std::string::npos);
}

TEST(MeasuredReport, NoDeviceWorkIsAllDispatch) {
  MeasuredStep m;
  m.step_time_s = 0.25;
  const StepBreakdown b = measured_breakdown(m);
  EXPECT_DOUBLE_EQ(b.dispatch, 0.25);
  EXPECT_DOUBLE_EQ(b.compute, 0.0);
}

TEST(MeasuredReport, UnionLengthCountsOverlapsOnce) {
  DPT_EXPECT_PROPERTY("union length equals covered unit cells", 300, [] { union_property(union_length); });
}

TEST(MeasuredReport, UnionLengthPropertyCatchesSummedOverlaps) {
  // Planted bug: adding lengths counts overlapping time twice.
  auto summed = [](std::vector<std::pair<Seconds, Seconds>> spans) {
    Seconds total = 0;
    for (const auto& [s, e] : spans) total += e - s;
    return total;
  };
  DPT_EXPECT_COUNTEREXAMPLE("summed span lengths", 300, [&] { union_property(summed); });
}

// train -o with --accumulate K: the measured step is one optimizer step of K micro-batches,
// so the report counts all K in batch_global (as predict does) and one micro-batch per GPU;
// its throughput is then the step's samples over the step's time. Caught: the report
// recorded one micro-batch as batch_global (throughput K times too low).
TEST(MeasuredReport, AnAccumulatedStepCountsEveryMicroBatch) {
  TrainConfig c;
  c.batch = 64;  // one micro-batch of the whole run, 32 per GPU on 2 GPUs
  c.strategy.kind = StrategyKind::ddp;
  c.strategy.accumulate = 4;
  StepReport r = measured_run_report(c, "cuda", "mlp:4-8-2", "ddp", 2, {128, 128}, DType::f32);
  EXPECT_EQ(r.batch_global, 256);
  EXPECT_EQ(r.batch_per_device, 32);
  ASSERT_TRUE(r.accumulate.has_value());
  EXPECT_EQ(*r.accumulate, 4);
  MeasuredStep m;
  m.device_names = {"cuda:0", "cuda:1"};
  m.step_time_s = 2.0;
  fill_measured_report(r, m);
  ASSERT_TRUE(r.throughput_samples_per_s.has_value());
  EXPECT_DOUBLE_EQ(*r.throughput_samples_per_s, 128.0);  // 4 x 64 samples in 2 s

  c.strategy.accumulate = 1;
  StepReport one = measured_run_report(c, "cuda", "mlp:4-8-2", "ddp", 2, {32, 32}, DType::f32);
  EXPECT_EQ(one.batch_global, 64);
  EXPECT_EQ(one.batch_per_device, 32);
  EXPECT_FALSE(one.accumulate.has_value());
}
