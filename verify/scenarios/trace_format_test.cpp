// Chrome traces of predicted steps against the Trace Event Format's rules, and
// against what PyTorch's profiler shows: every complete event carries args (layer
// and op class on kernels; bytes and algorithm on collectives), host dispatch runs
// on its own thread rows with the GIL visible under DataParallel, and flow events
// lead from the gradients' ready point to their bucket's all-reduce.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/fault_injection.hpp"
#include "scenarios/scenario/predict_runner.hpp"
#include "scenarios/scenario/scenario.hpp"
#include "verify/support/sim_test_support.hpp"
#include "verify/support/test_files.hpp"

namespace dpt {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using dpt::test::kScenarios;

// The trace of one predicted ResNet-50 step (batch 8 per GPU), in a forked process.
json predicted_trace(const std::string& hardware, const std::string& strategy, int devices) {
  const std::string text = fmt::format(
      "schema_version: 1\nhardware: {}\nmodel: resnet50\nstrategy: {}\ndevices: {}\nbatch_per_device: 8\n"
      "optimizer: sgd_momentum\n",
      hardware, strategy, devices);
  const auto lib = scenario::Library::at(kScenarios);
  const scenario::Scenario s = scenario::parse_scenario(text, "<trace test>", kScenarios);
  const fs::path path = fs::temp_directory_path() / fmt::format("dpt_trace_format_{}_{}.json", strategy, ::getpid());
  test::run_forked([&] {
    scenario::predict_point(scenario::resolve_point(s, s.base, lib), path.string());
    return std::string("ok");
  });
  std::ifstream in(path);
  json j = json::parse(in);
  fs::remove(path);
  return j;
}

bool inside(const json& e, double ts) {
  const double t0 = e.at("ts").get<double>(), t1 = t0 + e.at("dur").get<double>();
  return ts >= t0 && ts <= t1;
}

// Every violation of the rules, one line each (empty: the trace is well formed).
std::vector<std::string> violations(const json& trace) {
  std::vector<std::string> out;
  std::map<std::pair<int, int>, std::vector<const json*>> slices;  // (pid, tid) -> complete events
  std::map<std::uint64_t, std::vector<const json*>> starts, finishes;
  for (const auto& e : trace.at("traceEvents")) {
    for (const char* k : {"name", "ph", "pid", "tid"})
      if (!e.contains(k)) out.push_back(fmt::format("event without {}: {}", k, e.dump()));
    const std::string ph = e.value("ph", "");
    if (ph == "X") {
      // Rule: a complete event has a timestamp, a non-negative duration and args.
      if (!e.contains("ts") || !e.contains("dur") || e.at("dur").get<double>() < 0)
        out.push_back("complete event without ts/dur: " + e.dump());
      if (!e.contains("args") || !e.at("args").is_object() || e.at("args").empty())
        out.push_back("complete event without args: " + e.dump());
      slices[{e.at("pid").get<int>(), e.at("tid").get<int>()}].push_back(&e);
    } else if (ph == "s") {
      starts[e.at("id").get<std::uint64_t>()].push_back(&e);
    } else if (ph == "f") {
      finishes[e.at("id").get<std::uint64_t>()].push_back(&e);
    } else if (ph != "M") {
      out.push_back("unexpected phase: " + e.dump());
    }
  }
  // Rule: complete events on one thread never overlap.
  for (auto& [row, events] : slices) {
    std::sort(events.begin(), events.end(),
              [](const json* a, const json* b) { return a->at("ts").get<double>() < b->at("ts").get<double>(); });
    for (size_t i = 1; i < events.size(); ++i) {
      const double prev_end = events[i - 1]->at("ts").get<double>() + events[i - 1]->at("dur").get<double>();
      if (events[i]->at("ts").get<double>() < prev_end - 1e-6)
        out.push_back(fmt::format("overlap on pid {} tid {}: {} and {}", row.first, row.second,
                                  events[i - 1]->at("name").dump(), events[i]->at("name").dump()));
    }
  }
  // Rule: each flow id has one start and one finish, each inside a slice of its thread,
  // the start no later than the finish.
  auto enclosed = [&](const json& f) {
    const auto it = slices.find({f.at("pid").get<int>(), f.at("tid").get<int>()});
    if (it == slices.end()) return false;
    const double ts = f.at("ts").get<double>();
    return std::any_of(it->second.begin(), it->second.end(), [&](const json* e) { return inside(*e, ts); });
  };
  std::set<std::uint64_t> ids;
  for (const auto& [id, v] : starts) ids.insert(id);
  for (const auto& [id, v] : finishes) ids.insert(id);
  for (auto id : ids) {
    const auto s = starts.find(id), f = finishes.find(id);
    if (s == starts.end() || f == finishes.end() || s->second.size() != 1 || f->second.size() != 1) {
      out.push_back(fmt::format("flow id {} is not one start and one finish", id));
      continue;
    }
    const json &a = *s->second[0], &b = *f->second[0];
    if (!enclosed(a) || !enclosed(b)) out.push_back(fmt::format("flow id {} has an end outside any slice", id));
    if (a.at("ts").get<double>() > b.at("ts").get<double>()) out.push_back(fmt::format("flow id {} runs backwards", id));
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 10; ++i) s += v[i] + "\n";
  return s;
}

TEST(TraceFormat, DdpTraceFollowsTheRulesWithArgsAndGradientFlows) {
  const json t = predicted_trace("dgx-a100", "ddp", 4);
  EXPECT_EQ(joined(violations(t)), "");
  size_t flows = 0, collectives = 0, layers = 0;
  std::set<std::string> thread_names;
  for (const auto& e : t.at("traceEvents")) {
    if (e.at("ph") == "s") ++flows;
    if (e.at("ph") == "M" && e.at("name") == "thread_name") thread_names.insert(e.at("args").at("name").get<std::string>());
    if (e.at("ph") != "X") continue;
    const auto& args = e.at("args");
    if (e.at("cat") == "collective") {
      ++collectives;
      // Bytes and the collective model's algorithm on every collective.
      EXPECT_GT(args.value("bytes", 0.0), 0.0) << e.dump();
      EXPECT_FALSE(args.value("algorithm", "").empty()) << e.dump();
    }
    if (args.contains("layer")) {
      ++layers;
      EXPECT_EQ(e.at("name"), args.at("layer")) << e.dump();
      EXPECT_FALSE(args.value("op_class", "").empty()) << e.dump();
    }
  }
  EXPECT_GT(collectives, 0u);
  EXPECT_GT(layers, 0u);
  // ResNet-50's gradients fill several 25 MiB buckets: an arrow into each all-reduce.
  EXPECT_GE(flows, 2u);
  EXPECT_TRUE(thread_names.count("worker 0 thread: dispatch")) << "host dispatch has no thread of its own";
}

TEST(TraceFormat, DataParallelShowsTheGilAndDispatchThreads) {
  // dgx-a100's host has a GIL: DataParallel's worker threads take turns to dispatch.
  const json t = predicted_trace("dgx-a100", "dp", 4);
  EXPECT_EQ(joined(violations(t)), "");
  std::set<int> dispatch_rows;
  size_t gil_slices = 0;
  for (const auto& e : t.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("pid") != 0) continue;
    if (e.at("name") == "dispatch") dispatch_rows.insert(e.at("tid").get<int>());
    if (e.at("name").get<std::string>().rfind("GIL: ", 0) == 0) ++gil_slices;
  }
  EXPECT_GE(dispatch_rows.size(), 2u) << "each worker thread dispatches on its own row";
  EXPECT_GT(gil_slices, 0u);
}

TEST(TraceFormat, AnUnmatchedFlowIsCaught) {
  // The planted bug writes each flow's finish with another id: the rule must see it.
  const ScopedFault bug(Fault::trace_flow_unmatched);
  const json t = predicted_trace("dgx-a100", "ddp", 2);
  const auto v = violations(t);
  EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](const std::string& s) { return s.find("flow id") != std::string::npos; }))
      << joined(v);
}

}  // namespace
}  // namespace dpt
