// How a batch is split over devices, as pure functions (tested directly by
// verify/engine/split_test.cpp and printed by `dptwin split`).
//
//  * DataParallel scatters with torch.chunk along dim 0: chunk size ceil(B/N), so
//    ceil(B / ceil(B/N)) chunks and only the last may be smaller (B=5, N=4: 2,2,1;
//    only three devices are used). An empty batch gives N empty chunks, as torch does.
//  * DistributedSampler (torch.utils.data.distributed) gives rank r the indices
//    perm[r : total : N], where perm is range(len) or, with shuffle, torch.randperm
//    seeded with seed + epoch, padded by repeating its head to a multiple of N (or
//    truncated with drop_last).
#pragma once
#include <cstdint>
#include <vector>

namespace dpt {

// Sizes of torch.chunk(batch rows, devices) along dim 0. Throws std::invalid_argument
// for batch < 0 or devices < 1.
std::vector<std::int64_t> chunk_sizes(std::int64_t batch, int devices);
// First row of each chunk: the prefix sums of chunk_sizes().
std::vector<std::int64_t> chunk_offsets(const std::vector<std::int64_t>& sizes);

struct DistributedSamplerOptions {
  int num_replicas = 1;     // world size
  bool shuffle = true;      // PyTorch's default
  std::uint64_t seed = 0;   // PyTorch's default; the permutation uses seed + epoch
  std::int64_t epoch = 0;   // set_epoch()
  bool drop_last = false;   // drop the tail instead of padding
};

// Samples per rank: ceil(len / N), or floor(len / N) with drop_last.
std::int64_t distributed_sampler_num_samples(std::int64_t dataset_len, const DistributedSamplerOptions& o);
// The indices rank `rank` visits in one epoch, in order.
std::vector<std::int64_t> distributed_sampler_indices(std::int64_t dataset_len, int rank,
                                                      const DistributedSamplerOptions& o);
// Every rank's indices at once (element r is distributed_sampler_indices(len, r, o)),
// drawing the permutation once instead of once per rank.
std::vector<std::vector<std::int64_t>> distributed_sampler_assignment(std::int64_t dataset_len,
                                                                      const DistributedSamplerOptions& o);

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on the CPU,
// element for element: PyTorch's CPU generator is a 32-bit mt19937 seeded with the
// low 32 bits of the seed, and randperm is a Fisher-Yates shuffle drawing
// random() % (n - i). Checked against torch 1.13 by verify/engine/split_test.cpp. PyTorch
// switches to a 64-bit draw for n >= 2^32 / 20; dptwin rejects such n.
std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed);

}  // namespace dpt
