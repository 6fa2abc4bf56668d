// The hardware file's writer, beside its reader (hardware.hpp's parse_hardware_yaml):
// a HardwareSpec as a hardware file in the reader's schema (quantities with units), so
// calibration writes files that load back as the spec they were written from.
#pragma once
#include <map>
#include <string>

#include "sim/net/hardware.hpp"

namespace dpt::sim {

// Comments attached to keys of the emitted YAML, by dotted key path
// ("efficiency.gemm"), written after the value.
using YamlComments = std::map<std::string, std::string>;

// The spec as a hardware file, loadable by load_hardware_file / parse_hardware_yaml.
// `header_comment` (lines) opens the file as '#' comments.
std::string hardware_yaml(const HardwareSpec& hw, const YamlComments& comments = {},
                          const std::string& header_comment = "");

}  // namespace dpt::sim
