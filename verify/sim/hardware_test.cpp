// Hardware files: every library file loads and validates; bad files fail with the exact
// "FILE:LINE: key: what" message; unit-carrying quantities parse as documented; every
// library file builds a SimGrid platform with a route between every pair of GPUs.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/core/fault_injection.hpp"
#include "sim/net/hardware.hpp"
#include "sim/net/platform.hpp"
#include "sim/twin/sim_process.hpp"
#include "sim/net/yaml_util.hpp"
#include "verify/support/test_files.hpp"

namespace fs = std::filesystem;
using namespace dpt;
using namespace dpt::sim;

namespace {

using dpt::test::kHardwareLibrary;

// A small valid file; tests below break one line of it at a time.
const char* kGood = R"(nodes: 1
gpus_per_node: 2
gpu:
  name: test-gpu
  peak_flops: {f32: 10 TFLOPS, f64: 5 TFLOPS}
  memory: 16 GiB
  memory_bandwidth: 900 GB/s
  kernel_launch_latency: 5 us
pcie:
  generation: 4
  lanes: 16
  latency: 1 us
  peer_to_peer: true
host:
  cpu: test
  sockets: 1
  cores: 8
  memory_bandwidth: 100 GB/s
  dispatch_cost: 10 us
  gil: true
)";

std::string replace_line(const std::string& text, int line, const std::string& with) {
  std::string out;
  int n = 1;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += (n == line ? with : text.substr(start, end - start));
    if (end == text.size()) break;
    out += "\n";
    start = end + 1;
    ++n;
  }
  return out;
}

std::string error_of(const std::string& text) {
  try {
    parse_hardware_yaml(text, "bad.yaml");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(HardwareLibrary, EveryFileLoadsAndValidates) {
  const auto names = list_hardware(kHardwareLibrary);
  // The hardware library the README lists.
  for (const char* required : {"dgx1-v100", "dgx-a100", "dgx-h100", "l40s-4x-pcie4", "desktop-2gpu-pcie-p2p",
                                "desktop-2gpu-pcie-nop2p", "dgx-a100-cluster", "dgx-h100-cluster"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const HardwareSpec hw = load_hardware(name, kHardwareLibrary);
    EXPECT_EQ(hw.name, name);  // a file's name field matches its file name
    EXPECT_GT(hw.gpu.peak_flops.f32, 0);
    EXPECT_GT(hw.gpu.memory_bytes, 0);
  }
}

TEST(HardwareLibrary, ClustersScaleTo128Nodes) {
  for (const char* name : {"dgx-a100-cluster", "dgx-h100-cluster"}) {
    const HardwareSpec hw = load_hardware(name, kHardwareLibrary);
    for (int nodes : {2, 16, 128}) EXPECT_EQ(with_nodes(hw, nodes).gpu_count(), nodes * 8);
  }
  // A machine without a network cannot grow nodes.
  const HardwareSpec l40s = load_hardware("l40s-4x-pcie4", kHardwareLibrary);
  EXPECT_THROW(with_nodes(l40s, 2), std::invalid_argument);
}

TEST(HardwareLibrary, DatasheetFiguresReadInTheirUnits) {
  const HardwareSpec h100 = load_hardware("dgx-h100", kHardwareLibrary);
  EXPECT_EQ(h100.gpu.memory_bytes, 81559 * kMiB);              // "81559 MiB", what CUDA reports
  EXPECT_DOUBLE_EQ(h100.gpu.memory_bandwidth, 3.35e12);        // "3.35 TB/s"
  EXPECT_DOUBLE_EQ(h100.network->nic_bandwidth, 400e9 / 8);    // "400 Gb/s" are bits
  EXPECT_DOUBLE_EQ(*h100.gpu.peak_flops.bf16, 989.4e12);       // "989.4 TFLOPS"
  EXPECT_DOUBLE_EQ(h100.gpu.kernel_launch_latency_s, 4e-6);    // "4 us"
  EXPECT_TRUE(h100.nvswitch->in_switch_reduction);
  const HardwareSpec dgx1 = load_hardware("dgx1-v100", kHardwareLibrary);
  EXPECT_EQ(dgx1.nvlink->links_between(0, 3), 2);
  EXPECT_EQ(dgx1.nvlink->links_between(3, 0), 2);
  EXPECT_EQ(dgx1.nvlink->links_between(0, 5), 0);
  EXPECT_THROW(peak_flops(dgx1.gpu, ComputeType::bf16), std::invalid_argument);  // no BF16 on Volta
}

TEST(HardwareUnits, QuantitiesParseAsDocumented) {
  EXPECT_EQ(parse_bytes_quantity("80 GiB", ""), 80LL * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_bytes_quantity("80 GB", ""), 80'000'000'000LL);
  EXPECT_EQ(parse_bytes_quantity("4096 B", ""), 4096);
  EXPECT_DOUBLE_EQ(parse_bandwidth_quantity("200 Gb/s", ""), 25e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth_quantity("24.5 GiB/s", ""), 24.5 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parse_time_quantity("1.5 ms", ""), 1.5e-3);
  EXPECT_DOUBLE_EQ(parse_time_quantity("2e-6 s", ""), 2e-6);
  EXPECT_DOUBLE_EQ(parse_flops_quantity("19.5 TFLOPS", ""), 19.5e12);
  EXPECT_THROW(parse_bytes_quantity("12 parsecs", "x: "), std::invalid_argument);
  EXPECT_THROW(parse_bandwidth_quantity("fast", "x: "), std::invalid_argument);
  // A bare number is refused: "2e-6" could be seconds or a typo for microseconds.
  EXPECT_THROW(parse_bytes_quantity("4096", "x: "), std::invalid_argument);
  EXPECT_THROW(parse_time_quantity("2e-6", "x: "), std::invalid_argument);
}

TEST(HardwareErrors, GoodFileParses) { EXPECT_EQ(parse_hardware_yaml(kGood, "good.yaml").gpu_count(), 2); }

TEST(HardwareErrors, UnknownKeyNamesFileLineAndKey) {
  // A required key misspelled: the typo at its own line, with the key meant.
  const std::string text = replace_line(kGood, 6, "  memroy: 16 GiB");
  EXPECT_EQ(error_of(text), "bad.yaml:6: gpu.memroy: unknown key; did you mean 'memory'? (gpu.memory is required)");
  // With the required key present, the extra key is what fails, on its own line.
  const std::string extra = replace_line(kGood, 8, "  kernel_launch_latency: 5 us\n  memroy: 16 GiB");
  EXPECT_EQ(error_of(extra).rfind("bad.yaml:9: gpu.memroy: unknown key; did you mean 'memory'? (allowed: ", 0), 0u) << error_of(extra);
}

// A Tensor Core rate below the FP32 rate is a typo or swapped fields (an outside-user review's
// file loaded with f32 512 TFLOPS over tf32 378); equal, as GeForce Ampere's TF32, loads.
TEST(HardwareErrors, TensorCoreRateBelowFp32IsRejected) {
  const std::string text = replace_line(kGood, 5, "  peak_flops: {f32: 10 TFLOPS, f64: 5 TFLOPS, tf32: 8 TFLOPS}");
  const std::string err = error_of(text);
  EXPECT_EQ(err.rfind("bad.yaml:5: gpu.peak_flops.tf32: 8 TFLOPS is below f32's 10 TFLOPS", 0), 0u) << err;
  EXPECT_NO_THROW(parse_hardware_yaml(replace_line(kGood, 5, "  peak_flops: {f32: 10 TFLOPS, f64: 5 TFLOPS, tf32: 10 TFLOPS}"),
                                      "ok.yaml"));
  // And TF32 above F16 (a tf32 of 41,750 TFLOPS over an f16 of 989 had loaded).
  const std::string tf32_high = error_of(
      replace_line(kGood, 5, "  peak_flops: {f32: 10 TFLOPS, f64: 5 TFLOPS, tf32: 400 TFLOPS, f16: 200 TFLOPS}"));
  EXPECT_EQ(tf32_high.rfind("bad.yaml:5: gpu.peak_flops.tf32: 400 TFLOPS is above f16's 200 TFLOPS", 0), 0u) << tf32_high;
}

// TF32 and BF16 Tensor Cores came with Ampere (8.0): a Volta file with a bf16 peak, or a GPU
// named a V100 with a tf32 one, is refused at the figure (it had loaded; an outside-user review).
TEST(HardwareErrors, TensorCoreTypesOlderThanAmpereAreRejected) {
  const std::string stated = error_of(
      replace_line(kGood, 5, "  peak_flops: {f32: 15.7 TFLOPS, f64: 7.8 TFLOPS, bf16: 125 TFLOPS}\n  compute_capability: 7.0"));
  EXPECT_EQ(stated.rfind("bad.yaml:5: gpu.peak_flops.bf16: test-gpu has compute capability 7.0, which has no BF16", 0), 0u)
      << stated;
  const std::string named = error_of(replace_line(
      replace_line(kGood, 4, "  name: Tesla-V100-SXM2"), 5, "  peak_flops: {f32: 15.7 TFLOPS, f64: 7.8 TFLOPS, tf32: 60 TFLOPS}"));
  EXPECT_NE(named.find("gpu.peak_flops.tf32: Tesla-V100-SXM2 has compute capability 7.0, which has no TF32"), std::string::npos)
      << named;
  // Ampere stated: the same figures load.
  EXPECT_EQ(error_of(replace_line(kGood, 5,
                                  "  peak_flops: {f32: 19.5 TFLOPS, f64: 9.7 TFLOPS, bf16: 312 TFLOPS}\n  compute_capability: 8.0")),
            "(no error)");
}

TEST(HardwareErrors, NegativeBandwidthIsRejected) {
  const std::string text = replace_line(kGood, 7, "  memory_bandwidth: -900 GB/s");
  EXPECT_EQ(error_of(text), "bad.yaml:7: gpu.memory_bandwidth: -900 GB/s is outside 1 MB/s .. 1 PB/s");
}

// A memory bandwidth in bits per second is a typo for bytes (HBM "2.0 Tb/s" read as 250 GB/s
// had loaded): refused at its line, naming the byte figure it would have been. NIC line rates
// keep their bits.
TEST(HardwareErrors, MemoryBandwidthInBitsIsRefused) {
  const std::string err = error_of(replace_line(kGood, 7, "  memory_bandwidth: 2.0 Tb/s"));
  EXPECT_EQ(err.rfind("bad.yaml:7: gpu.memory_bandwidth: '2.0 Tb/s' is in bits per second (250 GB/s)", 0), 0u) << err;
  EXPECT_EQ(error_of(replace_line(kGood, 7, "  memory_bandwidth: 2.0 TB/s")), "(no error)");
  EXPECT_DOUBLE_EQ(parse_bandwidth_quantity("400 Gb/s", ""), 50e9);
}

// GPU memory in decimal units is the datasheet's "40GB" read as 40e9 bytes (37.25 GiB, where
// the card has 40 GiB): refused with both readings; binary units and bytes stay fine.
TEST(HardwareErrors, GpuMemoryInDecimalUnitsIsRefused) {
  EXPECT_EQ(error_of(replace_line(kGood, 6, "  memory: 40 GB")),
            "bad.yaml:6: gpu.memory: '40 GB' is decimal (37.25 GiB): GPU memory is binary-sized, and a datasheet's "
            "\"40GB\" card holds 40 GiB; write what CUDA reports (nvidia-smi's memory.total, e.g. 81559 MiB on an "
            "H100 80GB) or the GiB figure");
  EXPECT_NE(error_of(replace_line(kGood, 6, "  memory: 16000MB")).find("'16000MB' is decimal (14.9 GiB)"),
            std::string::npos);
  for (const char* fine : {"  memory: 40 GiB", "  memory: 40536 MiB", "  memory: 42949672960 B"})
    EXPECT_EQ(error_of(replace_line(kGood, 6, fine)), "(no error)") << fine;
}

TEST(HardwareErrors, ZeroLanesAreRejected) {
  const std::string text = replace_line(kGood, 11, "  lanes: 0");
  EXPECT_EQ(error_of(text), "bad.yaml:11: pcie.lanes: 0 is outside 1 .. 32");
}

// A PCIe width the specification does not define is a typo, named at its line.
TEST(HardwareErrors, LanesMustBeAPcieWidth) {
  EXPECT_EQ(error_of(replace_line(kGood, 11, "  lanes: 3")),
            "bad.yaml:11: pcie.lanes: x3 is not a PCIe link width (1, 2, 4, 8, 12, 16 or 32)");
  EXPECT_EQ(error_of(replace_line(kGood, 11, "  lanes: 8")), "(no error)");
}

// A required key misspelled is reported at the line the author wrote, with the key meant
// (it was "missing key" at the map's line, naming neither the typo nor its line).
TEST(HardwareErrors, AMisspelledRequiredKeyIsNamedAtItsLine) {
  EXPECT_EQ(error_of(replace_line(kGood, 8, "  kernel_launch_latancy: 5 us")),
            "bad.yaml:8: gpu.kernel_launch_latancy: unknown key; did you mean 'kernel_launch_latency'? "
            "(gpu.kernel_launch_latency is required)");
  // Without a near key the key is missing, at its map's line, and the map's keys are listed
  // so a far typo (launch, peer2peer) is seen beside the key asked for.
  EXPECT_EQ(error_of(replace_line(kGood, 8, "  launch: 5 us")),
            "bad.yaml:4: gpu.kernel_launch_latency: missing key (this map has: name, peak_flops, memory, "
            "memory_bandwidth, launch)");
  EXPECT_THAT(error_of(replace_line(kGood, 13, "  peer2peer: true")),
              ::testing::AllOf(::testing::HasSubstr("pcie.peer_to_peer: missing key (this map has: "),
                               ::testing::HasSubstr("peer2peer")));
}

// An optional boolean written with no value is refused, as a required one is (it had read
// as absent: `nccl_p2p_disable:` ran with P2P on, without a word).
TEST(HardwareErrors, AnOptionalBooleanWithNoValueIsRefused) {
  EXPECT_EQ(error_of(std::string(kGood) + "nccl_p2p_disable:\n"),
            "bad.yaml:21: nccl_p2p_disable: expected a boolean (true or false), got nothing");
  EXPECT_EQ(error_of(std::string(kGood) + "nccl_p2p_disable: on\n"),
            "bad.yaml:21: nccl_p2p_disable: expected a boolean: true or false (True, False, yes and no are read too), "
            "got 'on'");
  EXPECT_TRUE(parse_hardware_yaml(std::string(kGood) + "nccl_p2p_disable: yes\n", "good.yaml").nccl_p2p_disable);
}

TEST(HardwareErrors, WrongTypeIsRejected) {
  EXPECT_EQ(error_of(replace_line(kGood, 1, "nodes: two")), "bad.yaml:1: nodes: expected an integer, got 'two'");
  EXPECT_EQ(error_of(replace_line(kGood, 13, "  peer_to_peer: sometimes")),
            "bad.yaml:13: pcie.peer_to_peer: expected a boolean: true or false (True, False, yes and no are read too), got 'sometimes'");
  EXPECT_EQ(error_of(replace_line(kGood, 4, "  name: [a, b]")), "bad.yaml:4: gpu.name: expected a string, got a list");
  EXPECT_EQ(error_of(replace_line(kGood, 6, "  memory: 16 parsecs")),
            "bad.yaml:6: gpu.memory: unknown size unit 'parsecs' in '16 parsecs' (allowed: B, KB, MB, GB, TB, KiB, "
            "MiB, GiB, TiB)");
}

TEST(HardwareErrors, CrossFieldChecksNameTheField) {
  std::string text = std::string(kGood) + "nvlink:\n  generation: 2\n  link_bandwidth: 25 GB/s\n  latency: 1 us\n"
                                          "  pairs: [[0, 7, 1]]\n";
  // Cross-field checks run on the whole spec, and give the line of the key they name (they
  // gave none; found by an outside-user review).
  EXPECT_EQ(error_of(text), "bad.yaml:25: nvlink.pairs: pair [0, 7] names a GPU outside 0..1");
  EXPECT_EQ(error_of(replace_line(kGood, 1, "nodes: 2")),
            "bad.yaml:1: nodes: 2 needs a network section (how the nodes connect)");
  EXPECT_EQ(error_of(replace_line(kGood, 13, "  peer_to_peer: true\n  switches:\n    - {socket: 0, gpus: [0, 5]}")),
            "bad.yaml:15: pcie.switches[0].gpus: GPU 5 is not in 0..1");
}

// Invariant: NCCL's algorithms follow the GPU's compute capability: a file's
// gpu.compute_capability wins over its name, and a file that claims NVLink SHARP on a GPU
// before Hopper (or one whose name dptwin reads as earlier) is refused naming the field
// and the way out. A user's H100 file named "MyHopper-80GB" had silently run rings at 69 %
// of NVLS's bus bandwidth (found by an outside-user review).
TEST(HardwareErrors, ComputeCapabilityFieldWinsAndNvlsNeedsHopper) {
  EXPECT_EQ(known_compute_capability("H100-SXM5-80GB"), 90);
  EXPECT_EQ(known_compute_capability("RTX-2080Ti-11GB"), 75);  // Turing: read as Ampere before
  EXPECT_EQ(known_compute_capability("TITAN-RTX-24GB"), 75);
  EXPECT_FALSE(known_compute_capability("MyHopper-80GB").has_value());
  const std::string nvswitch = "nvswitch:\n  generation: 3\n  links_per_gpu: 18\n  link_bandwidth: 25 GB/s\n"
                               "  latency: 0.5 us\n  in_switch_reduction: true\n";
  const std::string hopper = replace_line(std::string(kGood), 4, "  name: MyHopper-80GB") + nvswitch;
  EXPECT_EQ(error_of(hopper), "bad.yaml:26: nvswitch.in_switch_reduction: NVLink SHARP needs compute capability 9.0 or "
                              "later (Hopper), but gpu MyHopper-80GB is 8.0 (a name dptwin does not know: give "
                              "gpu.compute_capability, e.g. 9.0)");
  const std::string declared = replace_line(hopper, 4, "  name: MyHopper-80GB\n  compute_capability: 9.0");
  EXPECT_EQ(error_of(declared), "(no error)");
  EXPECT_EQ(gpu_compute_capability_of(parse_hardware_yaml(declared, "ok.yaml").gpu), 90);
  EXPECT_EQ(error_of(replace_line(std::string(kGood), 4, "  name: A100-SXM4-80GB") + nvswitch),
            "bad.yaml:26: nvswitch.in_switch_reduction: NVLink SHARP needs compute capability 9.0 or later (Hopper), "
            "but gpu A100-SXM4-80GB is 8.0");
  EXPECT_EQ(error_of(replace_line(std::string(kGood), 4, "  name: x\n  compute_capability: 2.0")),
            "bad.yaml:5: gpu.compute_capability: 2 is outside 3.0 .. 15.0");
}

TEST(HardwareErrors, MissingFileAndUnknownNameAreNamed) {
  EXPECT_THROW(load_hardware("no-such-machine", kHardwareLibrary), std::invalid_argument);
  try {
    load_hardware("no-such-machine", kHardwareLibrary);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown hardware 'no-such-machine'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dgx-h100"), std::string::npos) << e.what();
  }
}

// Every library machine becomes a platform where every GPU reaches every other GPU and
// its host memory, over the links its hardware file describes.
TEST(HardwarePlatform, EveryLibraryFileBuildsWithAllRoutes) {
  for (const auto& name : list_hardware(kHardwareLibrary)) {
    SCOPED_TRACE(name);
    HardwareSpec hw = load_hardware(name, kHardwareLibrary);
    if (hw.network) hw = with_nodes(hw, 2);
    const std::string out = run_in_child_process([&]() {
      auto engine = make_engine();
      auto p = Platform::build(*engine, hw);
      nlohmann::json j;
      int missing = 0;
      for (int a = 0; a < p->gpu_count(); ++a) {
        for (int b = 0; b < p->gpu_count(); ++b)
          if (a != b && p->route(p->gpu_host(a), p->gpu_host(b)).links.empty()) ++missing;
        if (p->route(p->gpu_host(a), p->cpu_host_of_gpu(a)).links.empty()) ++missing;
      }
      j["missing"] = missing;
      j["gpus"] = p->gpu_count();
      if (p->gpu_count() > 1) j["r01"] = p->route_link_names(p->gpu_host(0), p->gpu_host(1));
      if (p->gpu_count() > 8) j["r08"] = p->route_link_names(p->gpu_host(0), p->gpu_host(8));
      engine.release();  // the child exits next; SimGrid needs no teardown
      return j.dump();
    });
    const auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["missing"], 0);
    EXPECT_EQ(j["gpus"], hw.gpu_count());
    if (name == "dgx1-v100") {
      EXPECT_EQ(j["r01"], nlohmann::json::array({"n0.nvl0-1_UP"}));
    }
    if (name == "dgx-h100") {
      EXPECT_EQ(j["r01"], nlohmann::json::array({"n0.gpu0.nvswitch_UP", "n0.gpu1.nvswitch_DOWN"}));
    }
    if (name == "desktop-2gpu-pcie-nop2p") {
      EXPECT_EQ(j["r01"], nlohmann::json::array({"n0.gpu0.pcie_UP", "n0.cpu0.mem", "n0.gpu1.pcie_DOWN"}));
    }
    if (name == "dgx-a100-cluster") {
      EXPECT_EQ(j["r08"], nlohmann::json::array({"n0.gpu0.pcie_UP", "n0.nic0.pcie_DOWN", "n0.nic0.ib_UP",
                                                 "n1.nic0.ib_DOWN", "n1.nic0.pcie_UP", "n1.gpu0.pcie_DOWN"}));
    }
  }
}

namespace {
// 1 if route() from a to b (`got`) differs from SimGrid's own look-up (links, latency or
// bottleneck) or carries link ids other than its links' own, else 0.
int differs_from_simgrid(const Platform& p, const RouteInfo& got, const simgrid::s4u::Host* a,
                         const simgrid::s4u::Host* b) {
  const RouteInfo want = p.simgrid_route(a, b);
  if (got.links != want.links || got.latency_s != want.latency_s || got.bottleneck_bandwidth != want.bottleneck_bandwidth)
    return 1;
  for (size_t j = 0; j < got.links.size(); ++j)  // ids carried over, not looked up
    if (j >= got.link_ids.size() || got.link_ids[j] != p.link_id(got.links[j])) return 1;
  return 0;
}

// count(platform) on `hw` built in a child process (one SimGrid engine per process).
int count_in_child(const HardwareSpec& hw, const std::function<int(Platform&)>& count) {
  return std::stoi(run_in_child_process([&]() {
    auto engine = make_engine();
    auto p = Platform::build(*engine, hw);
    const int n = count(*p);
    engine.release();  // the child exits next; SimGrid needs no teardown
    return std::to_string(n);
  }));
}

// Pairs of hosts within nodes 1.. whose route() differs from SimGrid's own look-up
// (links, latency or bottleneck), over every library file with a network on 3 nodes.
int routes_differing_from_simgrid() {
  int differing = 0;
  for (const auto& name : list_hardware(kHardwareLibrary)) {
    HardwareSpec hw = load_hardware(name, kHardwareLibrary);
    if (!hw.network) continue;
    hw = with_nodes(hw, 3);
    differing += count_in_child(hw, [&](Platform& platform) {
      Platform* p = &platform;
      int bad = 0;
      auto compare = [&](const simgrid::s4u::Host* a, const simgrid::s4u::Host* b) {
        bad += differs_from_simgrid(*p, p->route(a, b), a, b);
      };
      // The node's routes: GPU to GPU, GPU to and from every socket and the NVSwitch,
      // socket to socket.
      for (int k = 0; k < hw.nodes; ++k) {
        std::vector<const simgrid::s4u::Host*> gpus, cpus;
        for (int g = 0; g < hw.gpus_per_node; ++g) gpus.push_back(p->gpu_host(k * hw.gpus_per_node + g));
        for (int s = 0; s < hw.host.sockets; ++s) cpus.push_back(p->cpu_host(k, s));
        if (p->nvswitch_host(k)) cpus.push_back(p->nvswitch_host(k));
        for (int a = 0; a < hw.gpus_per_node; ++a)  // by GPU index: the same look-up
          for (int b = 0; b < hw.gpus_per_node; ++b) {
            const int ga = k * hw.gpus_per_node + a, gb = k * hw.gpus_per_node + b;
            if (&p->gpu_route(ga, gb) != &p->route(p->gpu_host(ga), p->gpu_host(gb))) ++bad;
            std::vector<int> ids;
            p->gpu_route_link_ids(ga, gb, ids);
            if (ids != p->gpu_route(ga, gb).link_ids) ++bad;
          }
        for (const auto* a : gpus) {
          for (const auto* b : gpus) compare(a, b);
          for (const auto* b : cpus) compare(a, b), compare(b, a);
        }
        for (int s = 0; s < hw.host.sockets; ++s)
          for (int t = 0; t < hw.host.sockets; ++t) compare(p->cpu_host(k, s), p->cpu_host(k, t));
      }
      return bad;
    });
  }
  return differing;
}
}  // namespace

// Invariant: a route between two hosts of one node (carried over from node 0's on nodes
// 1 and 2) has the links, latency and bottleneck SimGrid's own look-up gives, bit for bit.
TEST(HardwarePlatform, NodeRoutesEqualSimGridsLookUp) { EXPECT_EQ(routes_differing_from_simgrid(), 0); }

TEST(HardwarePlatform, PlantedBugNodeRoutesKeepNode0LinksIsCaught) {
  const ScopedFault planted(Fault::platform_route_node0_links);
  EXPECT_GT(routes_differing_from_simgrid(), 0) << "the planted bug went unnoticed";
}

namespace {
// Pairs of GPUs on different nodes whose route() differs from SimGrid's own look-up
// (links, latency, bottleneck or link ids), over every library file with a network: on 3
// nodes as shipped, and, for a fat-tree, under switches of 4 ports on 10 nodes of 2 per
// leaf (5 leaves in 3 pods), 11 nodes of 2 per leaf (the last leaf and pod partial) and 6
// nodes of 1 per leaf, so that pairs share a leaf, share a pod, or cross the core. Also
// counted as differing: SimGrid asked for more routes than the representatives (3
// relations x GPUs per node squared): routes not carried over.
int cross_routes_differing_from_simgrid() {
  int differing = 0;
  for (const auto& name : list_hardware(kHardwareLibrary)) {
    const HardwareSpec shipped = load_hardware(name, kHardwareLibrary);
    if (!shipped.network) continue;
    std::vector<HardwareSpec> variants{with_nodes(shipped, 3)};
    if (shipped.network->topology == FabricTopology::fat_tree)
      for (const auto& [nodes, per_leaf] : {std::pair{10, 2}, std::pair{11, 2}, std::pair{6, 1}}) {
        HardwareSpec hw = with_nodes(shipped, nodes);
        hw.network->nodes_per_leaf = per_leaf;
        hw.network->switch_radix = 4;
        validate_hardware(hw);
        EXPECT_EQ(fat_tree_shape(hw).pods, 3) << name << " on " << nodes << " nodes";
        variants.push_back(hw);
      }
    for (const auto& hw : variants)
      differing += count_in_child(hw, [&](Platform& platform) {
        Platform* p = &platform;
        int bad = 0;
        // Each pair twice, in both orders of look-up: a route carried over from its
        // representative, then the representative itself (SimGrid's) and the rest.
        for (int pass = 0; pass < 2; ++pass)
          for (int a = 0; a < p->gpu_count(); ++a)
            for (int b = 0; b < p->gpu_count(); ++b) {
              if (p->node_of_gpu(a) == p->node_of_gpu(b)) continue;
              const int x = pass == 0 ? p->gpu_count() - 1 - a : a, y = pass == 0 ? p->gpu_count() - 1 - b : b;
              const RouteInfo& got = p->route(p->gpu_host(x), p->gpu_host(y));
              bad += differs_from_simgrid(*p, got, p->gpu_host(x), p->gpu_host(y));
              if (&p->gpu_route(x, y) != &got) ++bad;  // the same look-up by GPU index
              std::vector<int> ids;
              p->gpu_route_link_ids(x, y, ids);  // carried over without keeping the route
              if (ids != got.link_ids) ++bad;
            }
        const std::int64_t representatives = 3 * std::int64_t{hw.gpus_per_node} * hw.gpus_per_node;
        if (p->simgrid_route_lookups() > representatives) ++bad;
        return bad;
      });
  }
  return differing;
}
}  // namespace

// Invariant: a route between GPUs of different nodes (carried over from a representative
// pair's: node 0 and a node under the same leaf, the same pod, or another pod) has the
// links, latency and bottleneck SimGrid's own look-up gives, bit for bit.
TEST(HardwarePlatform, CrossNodeRoutesEqualSimGridsLookUp) { EXPECT_EQ(cross_routes_differing_from_simgrid(), 0); }

TEST(HardwarePlatform, PlantedBugCrossNodeRoutesKeepTheRepresentativesLinksIsCaught) {
  const ScopedFault planted(Fault::platform_cross_route_rep_links);
  EXPECT_GT(cross_routes_differing_from_simgrid(), 0) << "the planted bug went unnoticed";
}
