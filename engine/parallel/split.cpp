#include "engine/parallel/split.hpp"

#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

namespace dpt {

std::vector<std::int64_t> chunk_sizes(std::int64_t batch, int devices) {
  if (batch < 0) throw std::invalid_argument(fmt::format("chunk_sizes: batch must be >= 0, got {}", batch));
  if (devices < 1) throw std::invalid_argument(fmt::format("chunk_sizes: devices must be >= 1, got {}", devices));
  // torch.chunk: an empty dimension splits into `chunks` empty pieces.
  if (batch == 0) return std::vector<std::int64_t>(static_cast<size_t>(devices), 0);
  const std::int64_t chunk = (batch + devices - 1) / devices;
  std::vector<std::int64_t> sizes;
  for (std::int64_t begin = 0; begin < batch; begin += chunk) sizes.push_back(std::min(chunk, batch - begin));
  return sizes;
}

std::vector<std::int64_t> chunk_offsets(const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> offsets(sizes.size(), 0);
  for (size_t i = 1; i < sizes.size(); ++i) offsets[i] = offsets[i - 1] + sizes[i - 1];
  return offsets;
}

std::int64_t distributed_sampler_num_samples(std::int64_t dataset_len, const DistributedSamplerOptions& o) {
  if (dataset_len < 0)
    throw std::invalid_argument(fmt::format("DistributedSampler: dataset length must be >= 0, got {}", dataset_len));
  if (o.num_replicas < 1)
    throw std::invalid_argument(fmt::format("DistributedSampler: num_replicas must be >= 1, got {}", o.num_replicas));
  const std::int64_t n = o.num_replicas;
  // PyTorch: drop_last and uneven -> ceil((len - n) / n), which is floor(len / n).
  if (o.drop_last && dataset_len % n != 0) return dataset_len / n;
  return (dataset_len + n - 1) / n;
}

std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed) {
  if (n < 0) throw std::invalid_argument(fmt::format("randperm: n must be >= 0, got {}", n));
  if (n >= std::numeric_limits<std::uint32_t>::max() / 20)
    throw std::invalid_argument(fmt::format("randperm: n = {} is at or above 2^32/20, where PyTorch draws 64-bit "
                                            "numbers; dptwin reproduces only the 32-bit path", n));
  std::mt19937 gen(static_cast<std::uint32_t>(seed));  // mt19937 is fully specified by the standard
  std::vector<std::int64_t> r(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), 0);
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const auto z = static_cast<std::int64_t>(gen() % static_cast<std::uint64_t>(n - i));
    std::swap(r[static_cast<size_t>(i)], r[static_cast<size_t>(z + i)]);
  }
  return r;
}

namespace {
std::vector<std::int64_t> sampler_permutation(std::int64_t dataset_len, const DistributedSamplerOptions& o) {
  if (o.shuffle) return torch_randperm(dataset_len, o.seed + static_cast<std::uint64_t>(o.epoch));
  std::vector<std::int64_t> perm(static_cast<size_t>(dataset_len));
  std::iota(perm.begin(), perm.end(), 0);
  return perm;
}

// Padding repeats the permutation from its start (as many times as needed);
// drop_last truncates instead. Either way the ranks hold `total` entries together.
std::vector<std::int64_t> rank_slice(const std::vector<std::int64_t>& perm, int rank, std::int64_t per_rank,
                                     const DistributedSamplerOptions& o) {
  const std::int64_t total = per_rank * o.num_replicas;
  const auto len = static_cast<std::int64_t>(perm.size());
  std::vector<std::int64_t> out;
  out.reserve(static_cast<size_t>(per_rank));
  for (std::int64_t i = rank; i < total; i += o.num_replicas) out.push_back(perm[static_cast<size_t>(i % len)]);
  return out;
}
}  // namespace

std::vector<std::int64_t> distributed_sampler_indices(std::int64_t dataset_len, int rank,
                                                      const DistributedSamplerOptions& o) {
  const std::int64_t per_rank = distributed_sampler_num_samples(dataset_len, o);
  if (rank < 0 || rank >= o.num_replicas)
    throw std::invalid_argument(fmt::format("DistributedSampler: rank {} is outside 0..{}", rank, o.num_replicas - 1));
  return rank_slice(sampler_permutation(dataset_len, o), rank, per_rank, o);
}

std::vector<std::vector<std::int64_t>> distributed_sampler_assignment(std::int64_t dataset_len,
                                                                      const DistributedSamplerOptions& o) {
  const std::int64_t per_rank = distributed_sampler_num_samples(dataset_len, o);
  const auto perm = sampler_permutation(dataset_len, o);
  std::vector<std::vector<std::int64_t>> out;
  out.reserve(static_cast<size_t>(o.num_replicas));
  for (int r = 0; r < o.num_replicas; ++r) out.push_back(rank_slice(perm, r, per_rank, o));
  return out;
}

}  // namespace dpt
