#include "engine/io/input_file.hpp"
#include "scenarios/measure/faults.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>

#include "sim/net/yaml_util.hpp"
#include "sim/twin/sim_device.hpp"

namespace dpt::verify {
namespace {

std::string read_text_file(const std::filesystem::path& path) {
  require_regular_input(path, fmt::format("hardware file '{}'", path.string()));
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("cannot read hardware file '{}'", path.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The text with the top-level `faults:` block replaced by empty lines, so the
// hardware loader (which rejects unknown keys) reads the rest with the same lines.
std::string blank_faults_block(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  bool in_block = false;
  while (std::getline(in, line)) {
    const bool top_level_key = !line.empty() && line[0] != ' ' && line[0] != '\t' && line[0] != '#' && line[0] != '-';
    if (top_level_key) in_block = line.rfind("faults:", 0) == 0;
    out += (in_block ? std::string() : line) + "\n";
  }
  return out;
}

double read_factor(sim::MapReader& r, const std::string& key) {
  const double v = r.get_double(key);
  if (!(v > 0.0 && v <= 1.0)) r.fail(key, fmt::format("must be in (0, 1], got {}", v));
  return v;
}

int read_gpu(sim::MapReader& r, const std::string& key, std::int64_t value, const sim::HardwareSpec& hw) {
  if (value < 0 || value >= hw.gpu_count())
    r.fail(key, fmt::format("GPU {} is not in this machine (GPUs 0..{})", value, hw.gpu_count() - 1));
  return static_cast<int>(value);
}

Faults parse_faults(const YAML::Node& list, const std::string& file, const sim::HardwareSpec& hw) {
  Faults f;
  if (!list.IsSequence())
    throw std::invalid_argument(sim::yaml_where(file, list) + "faults: expected a list of faults");
  for (std::size_t i = 0; i < list.size(); ++i) {
    sim::MapReader r(list[i], file, fmt::format("faults[{}]", i));
    const std::string where = sim::yaml_where(file, list[i]);
    const std::string at = where.substr(0, where.size() > 2 ? where.size() - 2 : 0);  // "FILE:LINE"
    if (r.has("link")) {
      LinkFault lf;
      lf.where = at;
      const YAML::Node link = r.node("link");
      if (link.IsSequence()) {
        const auto pair = r.get_int_list("link");
        if (pair.size() != 2 || pair[0] == pair[1])
          r.fail("link", "expected two different GPU indices, like [1, 2], or a link name");
        lf.gpus = std::pair{read_gpu(r, "link", pair[0], hw), read_gpu(r, "link", pair[1], hw)};
        // A pair names a link only where one joins them (an NVLink pair): elsewhere the route
        // crosses links other pairs share (a GPU's PCIe link, a switch uplink, an NVSwitch
        // port), and [1, 2] on a PCIe machine slowed every pair of GPUs 1 and 2, and more
        // (an outside-user review). A named link or a GPU fault says what is meant.
        const int g = hw.gpus_per_node, a = lf.gpus->first, b = lf.gpus->second;
        if (a / g != b / g || !hw.nvlink || hw.nvlink->links_between(a % g, b % g) == 0)
          r.fail("link", fmt::format("GPUs {} and {} have no direct link on hardware '{}' (no NVLink pair joins them): "
                                     "their route crosses links other GPUs share (PCIe links and switches, NVSwitch "
                                     "ports); fault a named link instead (e.g. n{}.gpu{}.pcie; names as in "
                                     "sim/net/platform.hpp)",
                                     a, b, hw.name, a / g, a % g));
      } else {
        lf.link = r.get_string("link");
      }
      lf.bandwidth_factor = read_factor(r, "bandwidth_factor");
      f.links.push_back(lf);
    } else if (r.has("gpu")) {
      const int gpu = read_gpu(r, "gpu", r.get_int("gpu"), hw);
      const bool slow = r.has("flops_factor"), straggle = r.has("straggle");
      if (slow == straggle) r.fail("gpu", "give exactly one of flops_factor and straggle");
      if (slow) {
        f.slow_gpus.push_back({gpu, read_factor(r, "flops_factor"), at});
      } else {
        const Seconds d = r.get_time("straggle");
        r.require_positive("straggle", d);
        f.stragglers.push_back({gpu, d, at});
      }
    } else {
      throw std::invalid_argument(where + fmt::format("faults[{}]: expected a `link` or a `gpu` fault", i));
    }
    r.finish();
  }
  return f;
}

void scale_link(simgrid::s4u::Link* link, double factor) { link->set_bandwidth(link->get_bandwidth() * factor); }

}  // namespace

std::vector<std::string> Faults::describe() const {
  std::vector<std::string> out;
  for (const auto& l : links)
    out.push_back(l.gpus ? fmt::format("link gpu{}<->gpu{} at {:.0f} %", l.gpus->first, l.gpus->second,
                                       100 * l.bandwidth_factor)
                         : fmt::format("link {} at {:.0f} %", *l.link, 100 * l.bandwidth_factor));
  for (const auto& g : slow_gpus) out.push_back(fmt::format("gpu{} computes at {:.0f} %", g.gpu, 100 * g.flops_factor));
  for (const auto& s : stragglers) out.push_back(fmt::format("gpu{} straggles {:.3g} ms per step", s.gpu, s.delay_s * 1e3));
  return out;
}

DegradedHardware parse_degraded_hardware(const std::string& text, const std::string& file_label) {
  DegradedHardware d;
  d.spec = sim::parse_hardware_yaml(blank_faults_block(text), file_label);
  const YAML::Node root = sim::yaml_load_string(text, file_label);
  if (root.IsMap() && root["faults"]) d.faults = parse_faults(root["faults"], file_label, d.spec);
  return d;
}

DegradedHardware load_degraded_hardware(const std::string& name_or_path, const std::filesystem::path& library_dir) {
  std::filesystem::path path(name_or_path);
  // A name: the library's file, else the fidelity table's machine of that name (verify
  // --hardware a10-1x said the library's a10-1x.yaml did not exist: a code review).
  if (path.extension() != ".yaml" && name_or_path.find('/') == std::string::npos)
    path = sim::hardware_file_of(name_or_path, library_dir);
  std::error_code ec;  // a name too long or a symbolic-link loop is bad input, not an internal error
  if (!std::filesystem::exists(path, ec))
    throw std::invalid_argument(fmt::format("hardware file '{}' {}", path.string(),
                                            ec ? "cannot be read: " + ec.message() : "does not exist"));
  const std::string text = read_text_file(path);
  // `base: NAME` and `faults:` only: the faults applied to a library machine, so a
  // fault file does not copy (and drift from) the library's figures.
  const YAML::Node root = sim::yaml_load_string(text, path.string());
  if (root.IsMap() && root["base"]) {
    sim::MapReader r(root, path.string(), "");
    DegradedHardware d;
    const std::string base = r.get_string("base");
    try {
      d.spec = sim::load_hardware(base, library_dir);
    } catch (const std::invalid_argument& e) {
      r.fail("base", e.what());  // "FILE:LINE: base: unknown hardware ..."
    }
    if (r.has("faults")) d.faults = parse_faults(r.node("faults"), path.string(), d.spec);
    r.finish();
    d.spec.source_file = path.string();
    return d;
  }
  DegradedHardware d = parse_degraded_hardware(text, path.string());
  d.spec.source_file = path.string();
  return d;
}

void apply_link_faults(sim::Platform& platform, const Faults& faults) {
  // A mirrored node's links take node 0's figures: a fault on node 0 would reach them all.
  for (int k = 0; k < platform.hardware().nodes; ++k)
    if (platform.mirrored(k) && !faults.links.empty())
      throw std::logic_error("link faults on a platform with mirrored nodes (build it with every node)");
  for (const auto& lf : faults.links) {
    if (lf.gpus) {
      // Both directions of the pair's route; each link scaled once even if both routes use it.
      std::vector<simgrid::s4u::Link*> all;
      for (const auto& [a, b] : {*lf.gpus, std::pair{lf.gpus->second, lf.gpus->first}}) {
        std::vector<simgrid::s4u::Link*> links;
        double latency = 0;
        platform.gpu_host(a)->route_to(platform.gpu_host(b), links, &latency);
        for (auto* l : links)
          if (std::find(all.begin(), all.end(), l) == all.end()) all.push_back(l);
      }
      for (auto* l : all) scale_link(l, lf.bandwidth_factor);
    } else {
      bool found = false;
      for (const std::string& name : {*lf.link, *lf.link + "_UP", *lf.link + "_DOWN"}) {
        if (auto* l = simgrid::s4u::Link::by_name_or_null(name)) {
          scale_link(l, lf.bandwidth_factor);
          found = true;
        }
      }
      if (!found)
        throw std::invalid_argument(
            fmt::format("{}: link: the platform has no link '{}' (names as in sim/platform.hpp, e.g. n0.nvl1-2, "
                        "n0.gpu3.pcie)",
                        lf.where, *lf.link));
    }
  }
}

namespace {
// A GPU slowed by `factor`: its default compute fraction and every compute-bound class's own
// figure (per compute type too), which a hardware file's op_efficiency sets and which take
// precedence over the default (sim_op_efficiency).
void slow_compute(SimGpuRates& rates, double factor) {
  rates.compute_efficiency *= factor;
  for (SimOpClass c : {SimOpClass::gemm, SimOpClass::conv, SimOpClass::attention}) {
    const auto i = static_cast<size_t>(c);
    if (rates.op_efficiency[i]) *rates.op_efficiency[i] *= factor;
    for (auto& [type, by_class] : rates.op_efficiency_by_type)
      if (by_class[i]) *by_class[i] *= factor;
  }
}
}  // namespace

void apply_gpu_faults(SimMachine& machine, const std::vector<int>& gpus, const Faults& faults) {
  for (const auto& g : faults.slow_gpus)
    for (size_t r = 0; r < gpus.size() && r < machine.gpus.size(); ++r)
      if (gpus[r] == g.gpu) slow_compute(machine.gpus[r].rates, g.flops_factor);
}

std::vector<Seconds> straggler_delays(const std::vector<int>& gpus, const Faults& faults) {
  std::vector<Seconds> delays(gpus.size(), 0.0);
  for (const auto& s : faults.stragglers)
    for (size_t r = 0; r < gpus.size(); ++r)
      if (gpus[r] == s.gpu) delays[r] += s.delay_s;
  return delays;
}

void StragglingBackend::delay_caller(int device) {
  const auto d = static_cast<size_t>(device);
  if (d < delays_.size() && delays_[d] > 0) inner_.host_advance_to(inner_.host_time() + delays_[d]);
}

void StragglingBackend::parallel_for(int n, const std::function<void(int)>& fn) {
  if (!armed_) {
    inner_.parallel_for(n, fn);
    return;
  }
  armed_ = false;
  inner_.parallel_for(n, [this, &fn](int i) {
    delay_caller(i);
    fn(i);
  });
}

}  // namespace dpt::verify
