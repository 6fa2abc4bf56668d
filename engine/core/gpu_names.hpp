// Whether a device name as CUDA reports it (torch.cuda.get_device_name, nvidia-smi: "NVIDIA
// A100 80GB PCIe", "NVIDIA GeForce RTX 3090", "Quadro RTX 8000") is the GPU a hardware file's
// gpu.name describes ("A100-PCIe-80GB", "RTX-3090-24GB", "Quadro-RTX-8000-48GB"). Both are
// split into words at anything not a letter or digit, compared without case:
//  - the model: gpu.name's leading words up to the first that holds a digit, or up to its
//    memory size ("A100", "RTX 3090", "Quadro RTX 8000", "TITAN RTX"), which must appear as
//    consecutive words of the device name; a word may also be two of the device's joined
//    ("2080Ti" for "2080 Ti"). So "A10" is not "A100", nor "RTX 4090" an "RTX 3090";
//  - the board: PCIe in one name and not the other is another board (H100 PCIe against the
//    SXM5's "NVIDIA H100 80GB HBM3");
//  - the memory: a size in both ("40GB", "80GB") must agree (A100 40GB and 80GB differ in
//    bandwidth).
// A gpu.name with no model word (empty, or a memory size first) matches nothing.
#pragma once
#include <string>

namespace dpt {

bool same_gpu_kind(const std::string& device_name, const std::string& gpu_name);
// The model words alone (the first rule above): an H100 PCIe is the same model as the SXM5.
bool same_gpu_model(const std::string& device_name, const std::string& gpu_name);

}  // namespace dpt
