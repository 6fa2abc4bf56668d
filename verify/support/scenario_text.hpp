// The smallest valid scenario file: the base that error and limit tests change one
// key at a time (or extend with a sweep), so each bad case differs from it only in
// what it breaks.
#pragma once
#include <string>

namespace dpt::test {

// DDP training of ResNet-50 on 8 GPUs of a DGX A100, 32 samples per GPU.
inline const std::string kGoodScenario =
    "schema_version: 1\n"
    "hardware: dgx-a100\n"
    "model: resnet50\n"
    "strategy: ddp\n"
    "devices: 8\n"
    "batch_per_device: 32\n";

}  // namespace dpt::test
