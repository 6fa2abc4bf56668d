// The step report's JSON format: a full report survives a round trip, and a file
// with a wrong schema, a mistyped or unknown key is rejected naming the key.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "sim/twin/chrome_trace.hpp"
#include "sim/twin/step_report.hpp"

namespace dpt {
namespace {

StepReport sample_report() {
  StepReport r;
  r.source = "predicted";
  r.backend = "sim";
  r.hardware = "dgx-h100";
  r.model = "resnet50";
  r.strategy = "ddp";
  r.devices = 8;
  r.nodes = 1;
  r.dtype = "f32";
  r.batch_global = 256;
  r.batch_per_device = 32;
  r.step_time_s = 0.125;
  r.breakdown_s = {0.1, 0.01, 0.005, 0.01, 0.002, 0.004};
  r.throughput_samples_per_s = 2048.0;
  r.single_device_step_time_s = 0.115;
  r.scaling_efficiency = 0.92;
  r.devices_detail.push_back(
      {"sim:gpu0", 3 * kGiB, {{"parameters", 100}, {"gradients", 100}}, 80 * kGiB, 0.11, {{"conv", 0.08}, {"norm", 0.03}}});
  r.links.push_back({"nvlink:gpu0:up", 1 << 20, 0.002, 0.4});
  r.trace = "trace.json";
  r.inputs = "device";
  r.comm_hook = "powersgd:4";
  r.checkpoint_layers = 2;
  r.bucket_cap_mb = 25.0;
  r.warnings = {"uneven batch"};
  return r;
}

TEST(StepReport, RoundTripKeepsEveryField) {
  const StepReport r = sample_report();
  const nlohmann::json j = step_report_to_json(r);
  EXPECT_EQ(j.at("schema"), "dptwin.step_report/1");
  const StepReport back = step_report_from_json(j);
  // Serialising the parsed report again gives the same JSON: nothing was lost.
  EXPECT_EQ(step_report_to_json(back), j);
  EXPECT_EQ(back.devices_detail.at(0).memory_breakdown_bytes.at("gradients"), 100);
  EXPECT_DOUBLE_EQ(back.devices_detail.at(0).kernel_time_by_class_s.at("conv"), 0.08);
  EXPECT_DOUBLE_EQ(*back.scaling_efficiency, 0.92);
  EXPECT_EQ(back.inputs, std::optional<std::string>("device"));
  EXPECT_EQ(back.comm_hook, std::optional<std::string>("powersgd:4"));
  EXPECT_EQ(back.checkpoint_layers, std::optional<std::int64_t>(2));
  EXPECT_EQ(back.bucket_cap_mb, std::optional<double>(25.0));
  // A sequence model's tokens per sample reads back; a report written before the key, or
  // of a model whose sample is no sequence, has none.
  StepReport tokens = r;
  tokens.tokens_per_sample = 1024.0;
  EXPECT_EQ(step_report_from_json(step_report_to_json(tokens)).tokens_per_sample, std::optional<double>(1024.0));
  nlohmann::json old = j;
  old.erase("tokens_per_sample");
  EXPECT_FALSE(step_report_from_json(old).tokens_per_sample.has_value());
  // The host-copy part of exposed communication reads back; a report written before it reads 0.
  EXPECT_DOUBLE_EQ(back.breakdown_s.exposed_host_copy, 0.004);
  old["breakdown_s"].erase("exposed_host_copy");
  EXPECT_EQ(step_report_from_json(old).breakdown_s.exposed_host_copy, 0.0);
}

// A report written before the op-class breakdown (no kernel_time_by_class_s) still reads,
// with an empty breakdown.
TEST(StepReport, ReportWithoutTheOpClassBreakdownReads) {
  nlohmann::json j = step_report_to_json(sample_report());
  j["devices_detail"][0].erase("kernel_time_by_class_s");
  EXPECT_TRUE(step_report_from_json(j).devices_detail.at(0).kernel_time_by_class_s.empty());
  j.erase("inputs");  // and before the inputs key: copied from the host
  EXPECT_FALSE(step_report_from_json(j).inputs.has_value());
}

TEST(StepReport, OutOfMemoryReportHasNullTimes) {
  StepReport r = sample_report();
  r.step_time_s.reset();
  r.throughput_samples_per_s.reset();
  r.out_of_memory = OutOfMemoryReport{"sim:gpu0", "out of memory on sim:gpu0", 1024, {{"activations", 10}}, 2048};
  const nlohmann::json j = step_report_to_json(r);
  EXPECT_TRUE(j.at("step_time_s").is_null());
  EXPECT_EQ(j.at("out_of_memory").at("device"), "sim:gpu0");
  const StepReport back = step_report_from_json(j);
  ASSERT_TRUE(back.out_of_memory.has_value());
  EXPECT_EQ(back.out_of_memory->requested_bytes, 1024);
  EXPECT_FALSE(back.step_time_s.has_value());
}

TEST(StepReport, RejectsWrongSchemaUnknownAndMistypedKeys) {
  nlohmann::json j = step_report_to_json(sample_report());
  auto expect_error = [](const nlohmann::json& bad, const std::string& needle) {
    try {
      step_report_from_json(bad, "r.json");
      ADD_FAILURE() << "accepted a report that should fail with: " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto bad = j;
  bad["schema"] = "dptwin.step_report/0";
  expect_error(bad, "key 'schema' is 'dptwin.step_report/0'");
  bad = j;
  bad["stepp_time_s"] = 1.0;
  expect_error(bad, "r.json: key 'stepp_time_s' is not part of");
  bad = j;
  bad["devices"] = "8";
  expect_error(bad, "key 'devices' must be an integer");
  bad = j;
  bad["devices_detail"][0].erase("busy_s");
  expect_error(bad, "devices_detail[0]: key 'busy_s' is missing");
  bad = j;
  bad["source"] = "guessed";
  expect_error(bad, "key 'source' is 'guessed'");
  bad = j;
  bad["devices_detail"][0]["kernel_time_by_class_s"]["conv"] = -0.5;
  expect_error(bad, "devices_detail[0]: key 'kernel_time_by_class_s.conv' must be a finite number of seconds >= 0");
  bad = j;
  bad["devices_detail"][0]["kernel_time_by_class_s"] = "fast";
  expect_error(bad, "key 'kernel_time_by_class_s' must be an object of op class: seconds");
  bad = j;
  bad["inputs"] = "gpu";
  expect_error(bad, "key 'inputs' must be null or \"device\"");
  // Figures no run gives (an outside-user review edited these into files that compare and
  // report then showed): a negative or zero step, a negative part of it, no samples, a
  // throughput that is not the step's samples over its time (2,048 for 256 in 0.125 s).
  bad = j;
  bad["step_time_s"] = -0.04;
  expect_error(bad, "'step_time_s' is -0.04; a step takes a time > 0 s");
  bad = j;
  bad["breakdown_s"]["dispatch"] = -1.0;
  expect_error(bad, "'dispatch' is -1 s; a part of a step is a time >= 0");
  bad = j;
  bad["batch_global"] = -3;
  expect_error(bad, "'batch_global' is -3; a step trains at least one sample");
  bad = j;
  bad["throughput_samples_per_s"] = 1e308;
  expect_error(bad, "'throughput_samples_per_s' is 1e+308, but batch_global 256 over step_time_s 0.125 is 2048 samples/s");
  bad = j;
  bad["throughput_samples_per_s"] = 2050.0;  // within 1 %: rounding, accepted
  EXPECT_NO_THROW(step_report_from_json(bad, "r.json"));
}

TEST(StepReport, WriteIsAtomicAndReadable) {
  const auto dir = std::filesystem::temp_directory_path() / "dpt_step_report_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "report.json").string();
  write_step_report(sample_report(), path);
  EXPECT_EQ(step_report_to_json(read_step_report(path)), step_report_to_json(sample_report()));
  // No temporary file is left beside the report.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  std::filesystem::remove_all(dir);
}

TEST(ChromeTrace, EventsInMicrosecondsWithNamedProcessesAndThreads) {
  ChromeTrace t;
  t.name_process(1, "sim:gpu0");
  t.name_thread(1, 0, "compute");
  t.add({"gemm_fwd", "compute", 1, 0, 0.5e-3, 2e-6});
  const auto j = nlohmann::json::parse(t.to_json_text());
  const auto& events = j.at("traceEvents");
  bool saw_x = false, saw_process = false, saw_thread = false;
  for (const auto& e : events) {
    if (e.at("ph") == "X") {
      saw_x = true;
      EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 500.0);  // 0.5 ms
      EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 2.0);   // 2 us
    }
    if (e.at("ph") == "M" && e.at("name") == "process_name") saw_process = e.at("args").at("name") == "sim:gpu0";
    if (e.at("ph") == "M" && e.at("name") == "thread_name") saw_thread = e.at("args").at("name") == "compute";
  }
  EXPECT_TRUE(saw_x && saw_process && saw_thread);
}

}  // namespace
}  // namespace dpt
