// DDP communication hooks on the host backend (real numerics): fp16_compress_hook and
// bf16_compress_hook cast each bucket to half precision, divide by the world size,
// all-reduce and cast back. Properties, each with a planted bug:
//  * the compressed gradient is within a bound derived from half-precision rounding
//    of the exact mean of the ranks' local gradients;
//  * bf16_compress equals its definition, evaluated in the test with its own bf16
//    rounding (the upper half of an f32, ties to even);
// plus round_to_half against known values and PowerSGD's compression plan.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/core/fault_injection.hpp"
#include "engine/host/host_backend.hpp"
#include "engine/parallel/ddp/comm_hook.hpp"
#include "engine/parallel/ddp/ddp.hpp"
#include "verify/support/rc_cases.hpp"
#include "verify/support/strategy_fixtures.hpp"

namespace dpt {
namespace {

using namespace dpt::test;
using Grads = std::vector<std::vector<double>>;

StrategyOptions ddp_options(const MlpCase& c, CommHookSpec hook) {
  StrategyOptions o;
  o.kind = StrategyKind::ddp;
  o.loss = c.loss;
  o.comm_hook = hook;
  return o;
}

MlpCase gen_case(DType dtype) {
  MlpCase c = gen_mlp_case(1, 4, 16);
  c.dtype = dtype;
  c.devices = *rc::gen::inRange(2, 5);  // one rank has nothing to divide
  c.batch = c.devices * *rc::gen::inRange<std::int64_t>(1, 5);
  RC_LOG() << describe(c) << "\n";
  return c;
}

// Every rank's local gradient (no_sync: nothing reduced).
std::vector<Grads> local_grads(HostBackend& backend, const MlpCase& c, const Batch& b) {
  DistributedDataParallel ddp(backend, ddp_options(c, {}), mlp_builder(c), sgd_builder());
  ddp.no_sync_step(b.x, b.target);
  std::vector<Grads> out;
  for (int r = 0; r < c.devices; ++r) out.push_back(grads_of(ddp.rank_module(r)));
  return out;
}

Grads hooked_grads(HostBackend& backend, const MlpCase& c, const Batch& b, CommHook hook, int rank) {
  DistributedDataParallel ddp(backend, ddp_options(c, {hook, 1}), mlp_builder(c), sgd_builder());
  ddp.train_step(b.x, b.target);
  return grads_of(ddp.rank_module(rank));
}

// Invariant: with u the half format's unit roundoff (2^-11 f16, 2^-8 bf16), eta half
// its smallest subnormal spacing (2^-25 f16, 2^-134 bf16), and N ranks, each element
// of the hooked gradient differs from the exact mean m = sum_i g_i / N by at most
//   ((1+u)^(N+2) - 1) sum_i |g_i| / N + (N+2) eta + N u_b sum_i |g_i| / N:
// the cast, the division and the final cast each round once, a half all-reduce rounds
// its N-1 partial sums (the host emulation rounds once), and the bucket's own dtype
// (u_b: 2^-24 f32, 2^-53 f64) sums the N values.
void compressed_gradient_within_half_rounding(CommHook hook) {
  const MlpCase c = gen_case(*rc::gen::element(DType::f32, DType::f64));
  const DType half = *comm_hook_wire_dtype(hook);
  const double u = half == DType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  const double eta = half == DType::f16 ? std::ldexp(1.0, -25) : std::ldexp(1.0, -134);
  const double u_b = c.dtype == DType::f32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
  HostBackend backend(c.devices);
  const Batch b = make_batch(backend, c);
  const std::vector<Grads> local = local_grads(backend, c, b);
  const int rank = *rc::gen::inRange(0, c.devices);
  const Grads got = hooked_grads(backend, c, b, hook, rank);
  const int n = c.devices;
  const double rel = std::pow(1.0 + u, n + 2) - 1.0 + n * u_b;
  for (size_t t = 0; t < got.size(); ++t)
    for (size_t e = 0; e < got[t].size(); ++e) {
      double sum = 0, abs_sum = 0;
      for (int r = 0; r < n; ++r) {
        sum += local[static_cast<size_t>(r)][t][e];
        abs_sum += std::fabs(local[static_cast<size_t>(r)][t][e]);
      }
      const double bound = rel * abs_sum / n + (n + 2) * eta;
      const double err = std::fabs(got[t][e] - sum / n);
      if (err > bound) RC_LOG() << "tensor " << t << " element " << e << ": got " << got[t][e] << " mean " << sum / n
                                << " error " << err << " bound " << bound << "\n";
      RC_ASSERT(err <= bound);
    }
}

TEST(CommHook, Fp16CompressWithinHalfRoundingOfTheMean) {
  DPT_EXPECT_PROPERTY("fp16_compress within its bound", 30,
                      [] { compressed_gradient_within_half_rounding(CommHook::fp16_compress); });
}

TEST(CommHook, Bf16CompressWithinHalfRoundingOfTheMean) {
  DPT_EXPECT_PROPERTY("bf16_compress within its bound", 30,
                      [] { compressed_gradient_within_half_rounding(CommHook::bf16_compress); });
}

TEST(CommHook, PlantedBugHookWithoutDivisionIsCaught) {
  const ScopedFault planted(Fault::comm_hook_skip_divide);
  DPT_EXPECT_COUNTEREXAMPLE("compress hook without division", 30,
                            [] { compressed_gradient_within_half_rounding(CommHook::fp16_compress); });
}

// bf16 as the test rounds it: an f32's upper 16 bits, ties to even (finite values).
double bf16_of(double v) {
  const auto bits = std::bit_cast<std::uint32_t>(static_cast<float>(v));
  const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  return static_cast<double>(std::bit_cast<float>(rounded));
}

// Invariant (f64 gradients, so the sum of N bf16 values is exact): every rank's
// gradient is bf16(sum_i bf16(bf16(g_i) / N)), bf16_compress_hook's definition.
void bf16_hook_matches_definition() {
  const MlpCase c = gen_case(DType::f64);
  HostBackend backend(c.devices);
  const Batch b = make_batch(backend, c);
  const std::vector<Grads> local = local_grads(backend, c, b);
  for (int rank = 0; rank < c.devices; ++rank) {
    const Grads got = hooked_grads(backend, c, b, CommHook::bf16_compress, rank);
    for (size_t t = 0; t < got.size(); ++t)
      for (size_t e = 0; e < got[t].size(); ++e) {
        double sum = 0;
        for (int r = 0; r < c.devices; ++r) sum += bf16_of(bf16_of(local[static_cast<size_t>(r)][t][e]) / c.devices);
        const double want = bf16_of(sum);
        if (got[t][e] != want) RC_LOG() << "rank " << rank << " tensor " << t << " element " << e << ": got "
                                        << got[t][e] << " want " << want << "\n";
        RC_ASSERT(got[t][e] == want);
      }
  }
}

TEST(CommHook, Bf16CompressEqualsItsDefinition) {
  DPT_EXPECT_PROPERTY("bf16_compress by definition", 20, [] { bf16_hook_matches_definition(); });
}

TEST(CommHook, PlantedBugBf16WithoutDivisionIsCaught) {
  const ScopedFault planted(Fault::comm_hook_skip_divide);
  DPT_EXPECT_COUNTEREXAMPLE("bf16 hook without division", 20, [] { bf16_hook_matches_definition(); });
}

TEST(CommHook, RoundToHalfKnownValues) {
  // IEEE binary16: 1 + 2^-11 is a tie between 1 and 1 + 2^-10 (even: 1); 65519 rounds
  // to the largest finite 65504, 65520 overflows; 2^-25 ties to 0, 3 x 2^-26 to 2^-24.
  EXPECT_EQ(round_to_half(1.0 + std::ldexp(1.0, -11), DType::f16), 1.0);
  EXPECT_EQ(round_to_half(1.0 + 3 * std::ldexp(1.0, -11), DType::f16), 1.0 + std::ldexp(1.0, -9));
  EXPECT_EQ(round_to_half(65519.0, DType::f16), 65504.0);
  EXPECT_EQ(round_to_half(65520.0, DType::f16), std::numeric_limits<double>::infinity());
  EXPECT_EQ(round_to_half(-std::ldexp(1.0, -25), DType::f16), 0.0);
  EXPECT_EQ(round_to_half(3 * std::ldexp(1.0, -26), DType::f16), std::ldexp(1.0, -24));
  EXPECT_EQ(round_to_half(0.1, DType::f16), 0.0999755859375);  // 1638 x 2^-14
  // bfloat16: 8 significant bits; 0.1 is 0x3DCD (0.10009765625).
  EXPECT_EQ(round_to_half(0.1, DType::bf16), 0.10009765625);
  EXPECT_EQ(round_to_half(1.0 + std::ldexp(1.0, -8), DType::bf16), 1.0);
  EXPECT_EQ(round_to_half(3e38, DType::bf16), std::ldexp(226.0, 120));  // torch: 3.00405527047391e+38
}

TEST(CommHook, NamesRoundTripAndBadOnesAreRejected) {
  for (const char* name : {"none", "fp16_compress", "bf16_compress", "powersgd", "powersgd:4"})
    EXPECT_EQ(comm_hook_name(comm_hook_from_name(name)), name);
  EXPECT_EQ(comm_hook_from_name("powersgd:4").powersgd_rank, 4);
  for (const char* bad : {"fp16", "powersgd:0", "powersgd:x", "powersgd:2000", ""}) {
    try {
      comm_hook_from_name(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("unknown comm hook '" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(CommHook, PowerSgdCompressesOnlyWhatPyTorchCompresses) {
  // _should_compress: (n + m) r * 2 < n m. A 1024 x 768 weight at rank 4: 7,168 x 2
  // < 786,432, compressed into P 1024 x 4 and Q 768 x 4; a bias (1024 x 1) and a
  // 4 x 4 matrix ((4 + 4) x 4 x 2 = 64 > 16) go uncompressed.
  const PowerSgdPlan p = powersgd_plan({{1024, 768}, {1024}, {4, 4}}, 4);
  EXPECT_EQ(p.p_elements, 1024 * 4);
  EXPECT_EQ(p.q_elements, 768 * 4);
  EXPECT_EQ(p.uncompressed_elements, 1024 + 16);
  EXPECT_DOUBLE_EQ(p.matmul_flops, 3.0 * 2 * 1024 * 768 * 4);
}

}  // namespace
}  // namespace dpt
