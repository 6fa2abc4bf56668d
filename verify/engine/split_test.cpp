// Batch split and DistributedSampler: torch.chunk's sizes for every B in 0..4096 and
// N in 1..64, and the sampler's strided, padded assignment. The comparisons with
// tables PyTorch itself produces are in split_oracle_test.cpp (label `oracle`).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <functional>
#include <string>

#include "engine/parallel/split.hpp"
#include "verify/support/rc_cases.hpp"

namespace dpt {
namespace {

using Sizes = std::vector<std::int64_t>;
using ChunkFn = std::function<Sizes(std::int64_t, int)>;

// The property of torch.chunk's split, stated without its formula: with c the
// smallest size such that N chunks of c hold B rows, every chunk but the last has c
// rows, the last has 1..c, there are at most N chunks, and concatenating them in
// order restores rows 0..B-1 exactly once each. An empty batch gives N empty chunks.
void chunk_split_matches_torch(const ChunkFn& split) {
  const std::int64_t batch = *rc::gen::inRange<std::int64_t>(0, 4097);
  const int devices = *rc::gen::inRange(1, 65);
  const Sizes sizes = split(batch, devices);
  if (batch == 0) {
    RC_ASSERT(sizes == Sizes(static_cast<size_t>(devices), 0));
    return;
  }
  std::int64_t c = 1;
  while (c * devices < batch) ++c;
  RC_ASSERT(!sizes.empty());
  RC_ASSERT(sizes.size() <= static_cast<size_t>(devices));
  for (size_t i = 0; i + 1 < sizes.size(); ++i) RC_ASSERT(sizes[i] == c);
  RC_ASSERT(sizes.back() >= 1 && sizes.back() <= c);
  std::vector<std::int64_t> rows;
  const Sizes offsets = chunk_offsets(sizes);
  for (size_t i = 0; i < sizes.size(); ++i)
    for (std::int64_t k = 0; k < sizes[i]; ++k) rows.push_back(offsets[i] + k);
  std::vector<std::int64_t> all(static_cast<size_t>(batch));
  for (std::int64_t i = 0; i < batch; ++i) all[size_t(i)] = i;
  RC_ASSERT(rows == all);
}

TEST(BatchSplit, ChunkSizesAreTorchChunks) {
  DPT_EXPECT_PROPERTY("torch.chunk split, B in 0..4096, N in 1..64", 2000,
                      [] { chunk_split_matches_torch(chunk_sizes); });
}

TEST(BatchSplit, PlantedBugEvenSpreadIsCaught) {
  // numpy.array_split's split (remainder spread over the first chunks: 5 on 4 is
  // 2,1,1,1) uses every device, which is exactly what torch.chunk does not do.
  const ChunkFn array_split = [](std::int64_t b, int n) {
    Sizes s;
    for (int i = 0; i < n; ++i) s.push_back(b / n + (i < b % n ? 1 : 0));
    return s;
  };
  DPT_EXPECT_COUNTEREXAMPLE("array_split instead of torch.chunk", 2000, [&] { chunk_split_matches_torch(array_split); });
}

TEST(BatchSplit, LessonExamples) {
  EXPECT_EQ(chunk_sizes(64, 2), (Sizes{32, 32}));  // the lesson's example
  EXPECT_EQ(chunk_sizes(5, 4), (Sizes{2, 2, 1}));  // torch.chunk: only three devices used
  EXPECT_EQ(chunk_sizes(0, 3), (Sizes{0, 0, 0}));
  EXPECT_THROW(chunk_sizes(4, 0), std::invalid_argument);
  EXPECT_THROW(chunk_sizes(-1, 2), std::invalid_argument);
}

using SamplerFn = std::function<Sizes(std::int64_t, int, const DistributedSamplerOptions&)>;

// DistributedSampler's assignment, stated as invariants: each rank gets the same
// count; reading the ranks' lists round-robin (rank 0's first, rank 1's first, ...)
// gives one global list whose first len entries are a permutation of 0..len-1
// (the identity without shuffle) and whose padding repeats that list from its start;
// with drop_last that global list is the permutation's head, no index repeated.
void sampler_is_strided_and_padded(const SamplerFn& sampler) {
  const std::int64_t len = *rc::gen::inRange<std::int64_t>(0, 300);
  DistributedSamplerOptions o;
  o.num_replicas = *rc::gen::inRange(1, 65);
  o.shuffle = *rc::gen::arbitrary<bool>();
  o.drop_last = *rc::gen::arbitrary<bool>();
  o.seed = *rc::gen::inRange<std::uint64_t>(0, 1000);
  o.epoch = *rc::gen::inRange<std::int64_t>(0, 10);
  const int n = o.num_replicas;
  std::vector<Sizes> per_rank;
  for (int r = 0; r < n; ++r) per_rank.push_back(sampler(len, r, o));
  const size_t count = per_rank[0].size();
  for (const auto& p : per_rank) RC_ASSERT(p.size() == count);
  const std::int64_t expect_total = o.drop_last ? len / n * n : (len + n - 1) / n * n;
  RC_ASSERT(static_cast<std::int64_t>(count) * n == expect_total);
  Sizes global;
  for (size_t k = 0; k < count; ++k)
    for (int r = 0; r < n; ++r) global.push_back(per_rank[size_t(r)][k]);
  const std::int64_t head = std::min<std::int64_t>(len, expect_total);
  Sizes first(global.begin(), global.begin() + head);
  Sizes sorted = first;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < head; ++i) {
    if (o.drop_last) RC_ASSERT(sorted[size_t(i)] >= 0 && sorted[size_t(i)] < len);
    else RC_ASSERT(sorted[size_t(i)] == i);  // a permutation of 0..len-1
    if (!o.shuffle) RC_ASSERT(first[size_t(i)] == i);
  }
  RC_ASSERT(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());  // no repeats
  for (std::int64_t i = len; i < expect_total; ++i) RC_ASSERT(global[size_t(i)] == global[size_t(i % len)]);
}

TEST(DistributedSampler, StridedAndPadded) {
  DPT_EXPECT_PROPERTY("DistributedSampler strided, padded, drop_last", 500,
                      [] { sampler_is_strided_and_padded(distributed_sampler_indices); });
}

TEST(DistributedSampler, PlantedBugNoPaddingIsCaught) {
  // A sampler that forgets to pad: ranks past the tail get one index fewer.
  const SamplerFn unpadded = [](std::int64_t len, int rank, const DistributedSamplerOptions& o) {
    Sizes all = distributed_sampler_indices(len, rank, o);
    if (!o.drop_last && len % o.num_replicas != 0 && rank >= len % o.num_replicas) all.pop_back();
    return all;
  };
  DPT_EXPECT_COUNTEREXAMPLE("DistributedSampler without padding", 500, [&] { sampler_is_strided_and_padded(unpadded); });
}

TEST(DistributedSampler, AssignmentOfAllRanksEqualsEachRanksIndices) {
  // Invariant: drawing the permutation once for every rank gives each rank exactly
  // what distributed_sampler_indices (checked against PyTorch) gives it alone.
  // Exhaustive over small lengths, world sizes, seeds and both flags.
  for (std::int64_t len = 0; len <= 40; ++len)
    for (int n = 1; n <= 9; ++n)
      for (bool shuffle : {false, true})
        for (bool drop_last : {false, true})
          for (std::uint64_t seed : {0u, 7u}) {
            DistributedSamplerOptions o;
            o.num_replicas = n;
            o.shuffle = shuffle;
            o.drop_last = drop_last;
            o.seed = seed;
            o.epoch = 3;
            const auto all = distributed_sampler_assignment(len, o);
            ASSERT_EQ(all.size(), static_cast<size_t>(n));
            for (int r = 0; r < n; ++r) ASSERT_EQ(all[size_t(r)], distributed_sampler_indices(len, r, o)) << len << " " << n;
          }
}

TEST(DistributedSampler, LessonExample) {
  DistributedSamplerOptions o;
  o.num_replicas = 4;
  o.shuffle = false;
  // PyTorch: DistributedSampler(range(10), 4, shuffle=False) gives [0,4,8], [1,5,9], [2,6,0], [3,7,1].
  EXPECT_EQ(distributed_sampler_indices(10, 2, o), (Sizes{2, 6, 0}));
  o.drop_last = true;
  EXPECT_EQ(distributed_sampler_indices(10, 3, o), (Sizes{3, 7}));
  EXPECT_THROW(distributed_sampler_indices(10, 4, o), std::invalid_argument);
}

}  // namespace
}  // namespace dpt
