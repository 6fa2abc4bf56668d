// Reports: the one-sentence answer, the Markdown and HTML pages (against expected
// text with numeric placeholders), the CSV, the gnuplot charts, atomic writes.
// The sweep results here are written by hand, so every expected figure is known.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "engine/core/fault_injection.hpp"
#include "scenarios/plan/plan.hpp"
#include "scenarios/report/report_document.hpp"
#include "scenarios/report/report_format.hpp"
#include "scenarios/report/report_sweep.hpp"
#include "scenarios/report/report_text.hpp"
#include "verify/support/report_points.hpp"
#include "verify/support/text_match.hpp"

namespace dpt::report {
namespace {

namespace fs = std::filesystem;
using scenario::PointResult;
using scenario::PointStatus;
using scenario::SweepResult;

TEST(Format, FiguresHaveThreeSignificantDigitsAndThousandsSeparators) {
  EXPECT_EQ(format_figure(12437.2), "12,400");
  EXPECT_EQ(format_figure(1234567), "1,230,000");
  EXPECT_EQ(format_figure(512.3), "512");
  EXPECT_EQ(format_figure(12.34), "12.3");
  EXPECT_EQ(format_figure(1.234), "1.23");
  EXPECT_EQ(format_figure(0.01234), "0.0123");
  EXPECT_EQ(format_figure(0), "0");
  EXPECT_EQ(format_figure(-2500), "-2,500");
  EXPECT_EQ(format_percent(0.943), "94 %");
  EXPECT_EQ(format_gib(3 * kGiB / 2), "1.50 GiB");
  EXPECT_EQ(format_duration(0.0123), "12.3 ms");
  EXPECT_EQ(format_duration(0.00085), "850 us");
  EXPECT_EQ(format_duration(0.0), "0 s");
  EXPECT_EQ(format_duration(1.5), "1.50 s");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(html_escape("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
}

// A point with a hand-written report: `thr` samples/s at 32 per GPU, one GPU at
// 1,600 samples/s (step 20 ms), GPU 0 holding `gpu0_extra` more than the others.
PointResult point(size_t index, const std::string& strategy, int gpus, double thr, Bytes gpu0_extra = 0) {
  PointResult p = test::hand_written_point(index, {{"strategy", strategy}, {"devices", std::to_string(gpus)}},
                                           "dgx-h100", "H100-SXM5-80GB", strategy, gpus, thr, 10 * kGiB, 80 * kGiB);
  StepReport& r = *p.report;
  r.hardware = p.hardware;
  r.model = p.model;
  r.batch_global = p.batch_global;
  r.batch_per_device = 32;
  r.breakdown_s.compute = 0.018;
  r.breakdown_s.optimizer = 0.001;
  r.breakdown_s.exposed_communication = *r.step_time_s - 0.019;
  r.single_device_step_time_s = 0.02;
  r.scaling_efficiency = thr / (gpus * 1600.0);
  r.devices_detail.front().peak_memory_bytes += gpu0_extra;
  r.trace = "out/traces/point-" + std::to_string(index) + ".json";
  return p;
}

SweepResult h100_sweep() {
  SweepResult r;
  r.scenario_name = "h100-scaling";
  r.scenario_file = "h100.yaml";
  r.question = "How do DataParallel and DDP scale on a DGX H100?";
  r.scenario_digest = "0123456789abcdef";
  r.target = scenario::Target{5000.0, std::nullopt, std::nullopt};
  r.total_points = 8;
  const int gpus[] = {1, 2, 4, 8};
  const double dp[] = {1600, 2800, 4300, 7600};
  const double ddp[] = {1600, 3150, 6200, 12437};
  for (int i = 0; i < 4; ++i) r.points.push_back(point(static_cast<size_t>(i), "dp", gpus[i], dp[i], (i + 1) * kGiB));
  for (int i = 0; i < 4; ++i) r.points.push_back(point(static_cast<size_t>(4 + i), "ddp", gpus[i], ddp[i]));
  return r;
}

TEST(Answer, NamesTheBestConfigurationTheTargetAndDataParallelAgainstDdp) {
  // Best: 8 GPUs DDP at 12,437 samples/s = 12437 / (8 x 1600) = 97 % efficiency.
  // Fewest GPUs meeting 5,000: 4 with DDP (6,200). DP at 8: 7600 / 12437 = 61 %.
  EXPECT_EQ(sweep_answer(h100_sweep()),
            "8x H100-SXM5-80GB with DDP reach 12,400 samples/s at 97 % scaling efficiency; 4x H100-SXM5-80GB with "
            "DDP meet the target of 5,000 samples/s; DataParallel reaches 61 % of DDP's throughput on 8x "
            "H100-SXM5-80GB.");
  EXPECT_TRUE(sweep_meets_target(h100_sweep()));
}

TEST(Answer, SaysWhenNoConfigurationMeetsTheTarget) {
  SweepResult r = h100_sweep();
  r.target = scenario::Target{50000.0, std::nullopt, std::nullopt};
  EXPECT_FALSE(sweep_meets_target(r));
  EXPECT_NE(sweep_answer(r).find("; no configuration meets the target of 50,000 samples/s;"), std::string::npos)
      << sweep_answer(r);
}

TEST(Csv, OneRowPerPointWithEveryColumn) {
  const std::string csv = sweep_csv(h100_sweep());
  const auto lines = test::split_lines(csv);
  ASSERT_EQ(lines.size(), 9u);
  const auto columns = std::count(lines[0].begin(), lines[0].end(), ',');
  for (const auto& l : lines) EXPECT_EQ(std::count(l.begin(), l.end(), ','), columns) << l;
  EXPECT_EQ(lines[8].substr(0, 52), "7,dgx-h100,H100-SXM5-80GB,resnet50,ddp,8,1,8,256,32,");
  // Columns appended for existing readers, after the reason: interference, the training
  // precision, tokens/s, the host copy, and the DDP settings.
  EXPECT_NE(lines[0].find(",reason,interference_s,precision,tokens_per_s,exposed_host_copy_s,accumulate,comm_hook,"
                          "checkpoint_layers"),
            std::string::npos)
      << lines[0];
  const auto cell = [](const std::string& header, const std::string& row, const std::string& column) {
    std::vector<std::string> names, cells;
    for (auto* v : {&names, &cells}) v->clear();
    std::stringstream h(header), r(row);
    for (std::string x; std::getline(h, x, ',');) names.push_back(x);
    for (std::string x; std::getline(r, x, ',');) cells.push_back(x);
    const size_t i = static_cast<size_t>(std::find(names.begin(), names.end(), column) - names.begin());
    return i < cells.size() ? cells[i] : std::string("(no column)");
  };
  // The precision: the point's own, else its report's (results written before points
  // carried it).
  SweepResult r = h100_sweep();
  r.points[0].precision = "bf16-amp";
  r.points[1].precision.clear();
  r.points[1].report->precision = "f16-amp";
  // tokens/s: samples/s x tokens per sample, for token models only (12,400 x 1,024).
  r.points[7].report->throughput_samples_per_s = 12400;
  r.points[7].report->tokens_per_sample = 1024;
  r.points[7].report->accumulate = 4;
  r.points[7].report->comm_hook = "bf16_compress";
  const auto with = test::split_lines(sweep_csv(r));
  EXPECT_EQ(cell(with[0], with[1], "precision"), "bf16-amp");
  EXPECT_EQ(cell(with[0], with[2], "precision"), "f16-amp");
  EXPECT_EQ(cell(with[0], with[8], "tokens_per_s"), "12697600");
  EXPECT_EQ(cell(with[0], with[1], "tokens_per_s"), "");
  EXPECT_EQ(cell(with[0], with[8], "accumulate"), "4");
  EXPECT_EQ(cell(with[0], with[1], "accumulate"), "1");
  EXPECT_EQ(cell(with[0], with[8], "comm_hook"), "bf16_compress");
  EXPECT_EQ(cell(with[0], with[1], "comm_hook"), "none");
  EXPECT_EQ(cell(with[0], with[1], "checkpoint_layers"), "0");
}

// Every swept field without a column of its own (an override, memory_format, inputs) gets
// one, named as the scenario names it; one that has a column (model, bucket size) gets no
// second. Found by an outside-user review: two channels_last/contiguous rows read alike.
TEST(Csv, SweptFieldsWithoutAColumnGetOne) {
  SweepResult r = h100_sweep();
  for (auto& p : r.points) {
    p.axes.emplace_back("memory_format", p.index % 2 ? "channels_last" : "contiguous");
    p.axes.emplace_back("bucket_cap_mb", "25");
  }
  const auto lines = test::split_lines(sweep_csv(r));
  EXPECT_EQ(lines[0].substr(lines[0].rfind(',') + 1), "memory_format");
  EXPECT_EQ(lines[0].find("bucket_cap_mb"), lines[0].rfind("bucket_cap_mb"));
  EXPECT_EQ(lines[1].substr(lines[1].rfind(',') + 1), "contiguous");
  EXPECT_EQ(lines[2].substr(lines[2].rfind(',') + 1), "channels_last");
}

TEST(Markdown, MatchesTheExpectedLayout) {
  const ReportDocument doc = build_sweep_report(h100_sweep(), {"out", "dptwin report h100.yaml", ""});
  const std::string md = render_markdown(doc);
  const std::string expected_head =
      "# dptwin report: h100-scaling\n"
      "\n"
      "**Question.** How do DataParallel and DDP scale on a DGX H100?\n"
      "\n"
      "**Answer.** %int" "x H100-SXM5-80GB with DDP reach %float samples/s at %percent scaling efficiency; %any\n"
      "\n"
      "## Scaling\n"
      "\n"
      "![Throughput against GPU count](charts/throughput.svg)\n"
      "\n"
      "*Predicted samples per second; dashed: the single-GPU throughput times the GPU count (linear scaling).*\n"
      "\n"
      "![Scaling efficiency](charts/efficiency.svg)\n";
  const auto lines = test::split_lines(md);
  std::string head;
  for (size_t i = 0; i < 13 && i < lines.size(); ++i) head += lines[i] + "\n";
  EXPECT_EQ(test::match_text(expected_head, head), "");
  // The table of every point: one row per point, figures in place.
  EXPECT_NE(md.find("| # | hardware | strategy | GPUs | batch (global / per GPU) | step time | samples/s | efficiency | "
                    "GPU 0 peak | status |"),
            std::string::npos);
  std::smatch m;
  EXPECT_TRUE(std::regex_search(md, m, std::regex(test::placeholder_regex(
                                           "| 7 | dgx-h100 | DDP | 8 | 256 / 32 | %duration | 12,400 | 97 % | %gib | ok |"))));
  EXPECT_NE(md.find("- [point 7: dgx-h100 DDP on 8 GPUs](traces/point-7.json)"), std::string::npos);
  // DataParallel's GPU 0 holds 4 GiB more at 8 GPUs (written into the sweep above).
  EXPECT_NE(md.find("| DataParallel (8 GPUs) | 14.00 GiB | 10.00 GiB | 4.00 GiB | 80.00 GiB |"), std::string::npos);
}

TEST(Html, IsSelfContainedWithEveryChartInline) {
  const fs::path dir = fs::path(DPT_BINARY_DIR) / "report_test_out";
  fs::remove_all(dir);
  const ReportDocument doc = build_sweep_report(h100_sweep(), {dir.string(), "dptwin report", "schema_version: 1\n"});
  const WrittenReport w = write_report(doc, dir.string());
  for (const char* f : {"report.html", "report.md", "points.csv", "results.json", "scenario.yaml",
                        "charts/throughput.svg", "charts/efficiency.svg", "charts/breakdown.svg", "charts/memory.svg"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  // Atomic writes leave no temporaries behind.
  for (const auto& e : fs::recursive_directory_iterator(dir))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  std::ifstream in(dir / "report.html");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string html = ss.str();
  size_t svgs = 0;
  for (size_t pos = 0; (pos = html.find("<svg", pos)) != std::string::npos; ++pos) ++svgs;
  EXPECT_EQ(svgs, 4u);
  EXPECT_EQ(html.find("<?xml"), std::string::npos);       // declarations stripped for inline use
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);  // nothing fetched from elsewhere
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("<p class=\"answer\" id=\"answer\"><strong>Answer.</strong> 8x H100-SXM5-80GB with DDP reach"),
            std::string::npos);
}

TEST(Chart, GnuplotScriptDrawsLogScaleLinesAndDashedIdeals) {
  Chart c{"t", "T", "GPUs", "samples/s", ChartKind::lines, true, {}, {}, ""};
  c.series.push_back({"DDP", {{1, 10}, {2, 20}}, {}, false, 0});
  c.series.push_back({"ideal", {{1, 10}, {2, 20}}, {}, true, 0});
  const std::string g = gnuplot_script(c, "d.txt", "o.svg");
  EXPECT_NE(g.find("set logscale x 2"), std::string::npos);
  EXPECT_NE(g.find("\"d.txt\" index 1 using 1:2 with lines dt 2"), std::string::npos);
  EXPECT_NE(render_chart_svg(c).find("<svg"), std::string::npos);
}

TEST(Text, SweepTableHasAColumnPerSweptFieldTheFixedOnesDoNotShow) {
  // Two points that differ only in where the batch lives, two in memory format: without a
  // column of their own the rows would read the same.
  SweepResult r;
  r.scenario_name = "inputs";
  r.total_points = 4;
  size_t i = 0;
  for (const char* format : {"contiguous", "channels_last"})
    for (const char* inputs : {"host", "device"}) {
      PointResult p = test::hand_written_point(i, {{"memory_format", format}, {"inputs", inputs}}, "dgx-a100",
                                               "A100-SXM4-80GB", "ddp", 8, 1000.0 + 100.0 * double(i), 10 * kGiB,
                                               80 * kGiB);
      p.index = i++;
      r.points.push_back(p);
    }
  const std::string expected =
      "#  hardware  strategy  GPUs  memory format  inputs  batch  step time  samples/s  efficiency  status\n"
      "0  dgx-a100  DDP          8  contiguous     host    %any\n"
      "1  dgx-a100  DDP          8  contiguous     device  %any\n"
      "2  dgx-a100  DDP          8  channels_last  host    %any\n"
      "3  dgx-a100  DDP          8  channels_last  device  %any\n";
  EXPECT_EQ(test::match_text(expected, sweep_table_text(r)), "");
  // Planted fault: the swept columns left out (the report's table and this one).
  const ScopedFault fault(Fault::report_no_swept_columns);
  EXPECT_EQ(sweep_table_text(r).find("memory format"), std::string::npos);
}

TEST(Text, SweepTableAndStepSummary) {
  const std::string table = sweep_table_text(h100_sweep());
  const std::string expected =
      "#  hardware  strategy      GPUs   batch  step time  samples/s  efficiency  status\n"
      "0  dgx-h100  DataParallel     1   32/32  %duration      1,600       100 %  ok\n"
      "%any\n%any\n%any\n%any\n%any\n%any\n"
      "7  dgx-h100  DDP              8  256/32  %duration     12,400        97 %  ok\n";
  EXPECT_EQ(test::match_text(expected, table), "");
  // A target in tokens adds tokens/s beside samples/s: 12,400 samples/s x 1,024 tokens.
  auto in_tokens = h100_sweep();
  in_tokens.target = scenario::Target{};
  in_tokens.target->tokens_per_s = 1e7;
  in_tokens.target->tokens_per_sample = 1024;
  const std::string with_tokens = sweep_table_text(in_tokens);
  EXPECT_EQ(test::match_text("#  hardware  strategy      GPUs   batch  step time  samples/s    tokens/s  efficiency  status\n"
                             "%any\n%any\n%any\n%any\n%any\n%any\n%any\n"
                             "7  dgx-h100  DDP              8  256/32  %duration     12,400  12,700,000        97 %  ok\n",
                             with_tokens),
            "");
  const std::string summary = step_summary_text(*h100_sweep().points[7].report, "H100-SXM5-80GB");
  const std::string expected_summary =
      "resnet50 on dgx-h100 (H100-SXM5-80GB), DDP on 8 GPUs (1 node), batch 256 (32 per GPU), f32\n"
      "  step time                %duration\n"
      "    compute                18.0 ms\n"
      "    exposed communication  %duration\n"
      "    dispatch               0 s\n"
      "    optimizer              1.00 ms\n"
      "    interference           0 s\n"
      "  throughput               12,400 samples/s\n"
      "  scaling efficiency       97 % of 8 x one GPU's throughput (one GPU: 20.0 ms per step of 32)\n"
      "  over one GPU's step      %duration: %duration exposed collectives, %duration the rest (DDP's bucket copies, "
      "hooks and their dispatch)\n"
      "  peak memory sim:gpu0     10.00 GiB of 80.00 GiB\n"
      "  peak memory sim:gpu1     10.00 GiB of 80.00 GiB\n"
      "  peak memory sim:gpu7     10.00 GiB of 80.00 GiB\n"
      "  trace                    out/traces/point-7.json\n";
  EXPECT_EQ(test::match_text(expected_summary, summary), "");
  // The time over one GPU's step, split by hand: 20.6 - 20.0 ms = 600 us, of which the
  // exposed communication less its host copy (500 - 100 us) is collectives, 200 us the rest.
  StepReport split = *h100_sweep().points[7].report;
  split.step_time_s = 0.0206;
  split.single_device_step_time_s = 0.0200;
  split.breakdown_s.exposed_communication = 0.0005;
  split.breakdown_s.exposed_host_copy = 0.0001;
  EXPECT_NE(step_summary_text(split, "H100-SXM5-80GB")
                .find("  over one GPU's step      600 us: 400 us exposed collectives, 200 us the rest (DDP's bucket "
                      "copies, hooks and their dispatch)\n"),
            std::string::npos)
      << step_summary_text(split, "H100-SXM5-80GB");
  // DataParallel's exposed communication is its peer copies, none a collective.
  split.strategy = "dp";
  EXPECT_NE(step_summary_text(split, "H100-SXM5-80GB")
                .find("600 us: 400 us exposed peer copies (broadcast, scatter, gather, reduce), 200 us the rest "
                      "(DataParallel's dispatch under one process and its copy kernels)"),
            std::string::npos)
      << step_summary_text(split, "H100-SXM5-80GB");
  // With K micro-batches one GPU's step runs all K: said so (it read "per step of 32").
  StepReport accumulated = *h100_sweep().points[7].report;
  accumulated.accumulate = 4;
  EXPECT_NE(step_summary_text(accumulated, "H100-SXM5-80GB").find("(one GPU: 20.0 ms per step of 4 micro-batches of 32)"),
            std::string::npos)
      << step_summary_text(accumulated, "H100-SXM5-80GB");
}

TEST(Plan, CheapestConfigurationMeetingTheTargetWinsAndTheOthersSayWhy) {
  SweepResult s = h100_sweep();
  // An out-of-memory point and a communication-bound one, written by hand.
  s.points[0].status = PointStatus::out_of_memory;
  s.points[0].report->out_of_memory =
      OutOfMemoryReport{"sim:gpu0", "out of memory on sim:gpu0", kGiB,
                        {{"parameters", 2 * kGiB}, {"activations", 76 * kGiB}, {"gradients", 2 * kGiB}}, 80 * kGiB};
  s.points[0].report->step_time_s.reset();
  s.points[0].report->throughput_samples_per_s.reset();
  auto& slow = *s.points[2].report;  // DP on 4 GPUs: 4,300 samples/s, mostly communication
  slow.breakdown_s.compute = 0.005;
  slow.breakdown_s.exposed_communication = *slow.step_time_s - 0.006;
  const std::vector<scenario::PlanCandidate> candidates = {{"dgx-h100", 4.5, ""}};
  const auto plan = scenario::judge_plan(s, scenario::Target{5000.0, std::nullopt, std::nullopt}, candidates);
  ASSERT_TRUE(plan.winner.has_value());
  // 4 GPUs with DDP (6,200 samples/s) at 4 x 4.50 = 18.00 per hour is the cheapest meeting 5,000.
  EXPECT_EQ(plan.verdicts[*plan.winner].point, 6u);
  EXPECT_EQ(scenario::plan_answer(plan),
            "The cheapest configuration that meets 5,000 samples/s is 4x H100-SXM5-80GB (dgx-h100) with DDP, at 6,200 "
            "samples/s for 18.00 per hour.");
  EXPECT_EQ(plan.verdicts[0].kind, scenario::PlanVerdictKind::out_of_memory);
  // What was live, largest first, and what was asked: what a planner acts on.
  EXPECT_EQ(plan.verdicts[0].reason,
            "out of memory on sim:gpu0: activations 76.00 GiB, gradients 2.00 GiB, parameters 2.00 GiB live of 80.00 "
            "GiB, 1.00 GiB more asked");
  EXPECT_EQ(plan.verdicts[1].kind, scenario::PlanVerdictKind::too_slow);
  EXPECT_EQ(plan.verdicts[1].reason, "too slow: 2,800 < 5,000 samples/s");
  EXPECT_EQ(plan.verdicts[2].kind, scenario::PlanVerdictKind::communication_bound);
  EXPECT_EQ(plan.verdicts[3].kind, scenario::PlanVerdictKind::more_expensive);
  EXPECT_EQ(plan.verdicts[3].reason, "meets the target but costs 36.00 per hour against 18.00");
}

}  // namespace
}  // namespace dpt::report
