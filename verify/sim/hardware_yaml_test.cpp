// The hardware file's writer against its reader: every library file, read, written and
// read again, gives the spec it was written from, field by field.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/net/hardware.hpp"
#include "sim/net/hardware_yaml.hpp"
#include "verify/support/test_files.hpp"

namespace dpt::sim {
namespace {

namespace fs = std::filesystem;
using dpt::test::kHardwareLibrary;

// The writer prints 9 significant digits.
bool near(double a, double b) { return std::abs(a - b) <= 1e-8 * std::max(std::abs(a), std::abs(b)); }
bool near(const std::optional<double>& a, const std::optional<double>& b) {
  return a.has_value() == b.has_value() && (!a || near(*a, *b));
}

// The names of the fields where `a` and `b` differ (empty: the same spec).
std::vector<std::string> differences(const HardwareSpec& a, const HardwareSpec& b) {
  std::vector<std::string> d;
  auto check = [&](bool same, const char* field) {
    if (!same) d.emplace_back(field);
  };
  check(a.name == b.name && a.nodes == b.nodes && a.gpus_per_node == b.gpus_per_node, "name/nodes/gpus_per_node");
  const GpuSpec &g = a.gpu, &h = b.gpu;
  check(g.name == h.name, "gpu.name");
  check(near(g.peak_flops.f64, h.peak_flops.f64) && near(g.peak_flops.f32, h.peak_flops.f32) &&
            near(g.peak_flops.tf32, h.peak_flops.tf32) && near(g.peak_flops.bf16, h.peak_flops.bf16) &&
            near(g.peak_flops.f16, h.peak_flops.f16),
        "gpu.peak_flops");
  check(g.memory_bytes == h.memory_bytes && near(g.memory_bandwidth, h.memory_bandwidth), "gpu.memory");
  check(near(g.kernel_launch_latency_s, h.kernel_launch_latency_s), "gpu.kernel_launch_latency");
  check(g.sm_count == h.sm_count, "gpu.sm_count");
  const OpEfficiencySpec &o = g.op_efficiency, &p = h.op_efficiency;
  check(near(o.gemm, p.gemm) && near(o.conv, p.conv) && near(o.attention, p.attention) && near(o.norm, p.norm) &&
            near(o.elementwise, p.elementwise) && near(o.embedding, p.embedding) && near(o.loss, p.loss) &&
            near(o.optimizer, p.optimizer),
        "gpu.op_efficiency");
  check(a.pcie.generation == b.pcie.generation && a.pcie.lanes == b.pcie.lanes &&
            near(a.pcie.latency_s, b.pcie.latency_s) && a.pcie.peer_to_peer == b.pcie.peer_to_peer &&
            a.pcie.switches.size() == b.pcie.switches.size() &&
            a.pcie.staged_bidirectional.has_value() == b.pcie.staged_bidirectional.has_value() &&
            (!a.pcie.staged_bidirectional || near(*a.pcie.staged_bidirectional, *b.pcie.staged_bidirectional)),
        "pcie");
  for (size_t i = 0; i < std::min(a.pcie.switches.size(), b.pcie.switches.size()); ++i) {
    const auto &s = a.pcie.switches[i], &t = b.pcie.switches[i];
    check(s.socket == t.socket && s.gpus == t.gpus && s.nics == t.nics && s.uplink_lanes == t.uplink_lanes,
          "pcie.switches");
  }
  check(a.nvlink.has_value() == b.nvlink.has_value(), "nvlink");
  if (a.nvlink && b.nvlink) {
    bool pairs = a.nvlink->pairs.size() == b.nvlink->pairs.size();
    for (size_t i = 0; pairs && i < a.nvlink->pairs.size(); ++i)
      pairs = a.nvlink->pairs[i].a == b.nvlink->pairs[i].a && a.nvlink->pairs[i].b == b.nvlink->pairs[i].b &&
              a.nvlink->pairs[i].links == b.nvlink->pairs[i].links;
    check(pairs && a.nvlink->generation == b.nvlink->generation &&
              near(a.nvlink->link_bandwidth, b.nvlink->link_bandwidth) &&
              near(a.nvlink->latency_s, b.nvlink->latency_s),
          "nvlink");
  }
  check(a.nvswitch.has_value() == b.nvswitch.has_value(), "nvswitch");
  if (a.nvswitch && b.nvswitch)
    check(a.nvswitch->generation == b.nvswitch->generation && a.nvswitch->links_per_gpu == b.nvswitch->links_per_gpu &&
              near(a.nvswitch->link_bandwidth, b.nvswitch->link_bandwidth) &&
              near(a.nvswitch->latency_s, b.nvswitch->latency_s) &&
              a.nvswitch->in_switch_reduction == b.nvswitch->in_switch_reduction,
          "nvswitch");
  check(a.host.cpu == b.host.cpu && a.host.sockets == b.host.sockets && a.host.cores == b.host.cores &&
            near(a.host.memory_bandwidth, b.host.memory_bandwidth) &&
            near(a.host.inter_socket_bandwidth, b.host.inter_socket_bandwidth) &&
            near(a.host.dispatch_cost_s, b.host.dispatch_cost_s) && a.host.gil == b.host.gil,
        "host");
  check(a.network.has_value() == b.network.has_value(), "network");
  if (a.network && b.network) {
    const NetworkSpec &n = *a.network, &m = *b.network;
    check(n.nics_per_node == m.nics_per_node && near(n.nic_bandwidth, m.nic_bandwidth) &&
              near(n.latency_s, m.latency_s) && n.topology == m.topology && n.nodes_per_leaf == m.nodes_per_leaf &&
              near(n.oversubscription, m.oversubscription) && n.switch_radix == m.switch_radix &&
              near(n.switch_link_rate, m.switch_link_rate) && near(n.core_oversubscription, m.core_oversubscription),
          "network");
  }
  const EfficiencySpec &e = a.efficiency, &f = b.efficiency;
  check(near(e.gemm, f.gemm) && near(e.memory_bandwidth, f.memory_bandwidth) && near(e.p2p, f.p2p) &&
            near(e.pcie, f.pcie) && near(e.nic, f.nic) && near(e.nccl_latency, f.nccl_latency),
        "efficiency");
  check(a.gloo.has_value() == b.gloo.has_value(), "gloo");
  if (a.gloo && b.gloo)
    check(near(a.gloo->tcp_bandwidth, b.gloo->tcp_bandwidth) &&
              near(a.gloo->message_latency_s, b.gloo->message_latency_s) &&
              near(a.gloo->reduce_bandwidth, b.gloo->reduce_bandwidth) &&
              near(a.gloo->core_share, b.gloo->core_share) &&
              a.gloo->tcp_bandwidth_by_buffer.size() == b.gloo->tcp_bandwidth_by_buffer.size(),
          "gloo");
  if (a.gloo && b.gloo && a.gloo->tcp_bandwidth_by_buffer.size() == b.gloo->tcp_bandwidth_by_buffer.size())
    for (size_t i = 0; i < a.gloo->tcp_bandwidth_by_buffer.size(); ++i)
      check(a.gloo->tcp_bandwidth_by_buffer[i].buffer_bytes == b.gloo->tcp_bandwidth_by_buffer[i].buffer_bytes &&
                near(a.gloo->tcp_bandwidth_by_buffer[i].bandwidth, b.gloo->tcp_bandwidth_by_buffer[i].bandwidth),
            "gloo.tcp_bandwidth_by_buffer");
  return d;
}

// Invariant: parse(hardware_yaml(spec)) == spec for every file of the library, so a
// calibrated file keeps every field it did not calibrate.
TEST(HardwareYaml, EveryLibraryFileRoundTrips) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(kHardwareLibrary)) {
    if (entry.path().extension() != ".yaml") continue;
    const HardwareSpec hw = load_hardware_file(entry.path());
    const std::string text = hardware_yaml(hw, {{"efficiency.gemm", "a comment"}}, "a header\nof two lines");
    const HardwareSpec back = parse_hardware_yaml(text, entry.path().filename().string() + " (written)");
    EXPECT_EQ(differences(hw, back), std::vector<std::string>{}) << entry.path() << "\n" << text;
    ++files;
  }
  EXPECT_GE(files, 8);  // the library as shipped
}

// The comparison above must be able to fail: a spec whose sm_count or op-class
// efficiency the writer lost is seen (the writer once dropped both).
TEST(HardwareYaml, TheRoundTripSeesALostField) {
  HardwareSpec hw = load_hardware_file(kHardwareLibrary / "dgx-h100.yaml");
  ASSERT_TRUE(hw.gpu.sm_count.has_value());
  hw.gpu.op_efficiency.norm = 0.5;
  std::string text = hardware_yaml(hw);
  ASSERT_NE(text.find("  sm_count: "), std::string::npos) << text;
  ASSERT_NE(text.find("    norm: 0.5"), std::string::npos) << text;
  // Planted: the two lines removed from the written text.
  for (const char* line : {"  sm_count: ", "    norm: 0.5"}) {
    const auto at = text.find(line);
    text.erase(at, text.find('\n', at) + 1 - at);
  }
  const auto lost = differences(hw, parse_hardware_yaml(text, "planted"));
  EXPECT_EQ(lost, (std::vector<std::string>{"gpu.sm_count", "gpu.op_efficiency"}));
}

// Comments land after their key's value and the header opens the file as comments.
TEST(HardwareYaml, CommentsAndHeader) {
  const HardwareSpec hw = load_hardware_file(kHardwareLibrary / "dgx-h100.yaml");
  const std::string text = hardware_yaml(hw, {{"efficiency.p2p", "measured today"}}, "first\nsecond");
  EXPECT_EQ(text.rfind("# first\n# second\nname: ", 0), 0u) << text;
  EXPECT_NE(text.find(fmt::format("  p2p: {:.9g}   # measured today\n", hw.efficiency.p2p)), std::string::npos) << text;
}

}  // namespace
}  // namespace dpt::sim
