// DDP communication hooks, as torch.distributed.algorithms.ddp_comm_hooks defines
// them (PyTorch 1.13): what a bucket goes through between "all its gradients are
// ready" and "the averaged gradients are back in the bucket".
//
//   fp16_compress_hook / bf16_compress_hook (default_hooks.py):
//       compressed = bucket.buffer().to(half).div_(world_size)
//       all_reduce(compressed)                  # sum, in half precision on the wire
//       bucket.buffer().copy_(compressed)       # cast back
//   powerSGD_hook (powerSGD_hook.py), rank r: per gradient viewed as an n x m matrix,
//       compressed when (n + m) r * min_compression_rate < n m; the others (biases, small
//       matrices) are all-reduced uncompressed; P = M Q, all-reduce P, orthogonalise P,
//       Q = M^T P, all-reduce Q, M = P Q^T / world_size; with error feedback and warm start.
//
// With a hook registered, c10d's Reducer copies gradients into the bucket WITHOUT
// dividing by the world size: the hook divides (the compress hooks, in half precision).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/dtype.hpp"
#include "engine/core/tensor.hpp"

namespace dpt {

enum class CommHook { none, fp16_compress, bf16_compress, powersgd };

struct CommHookSpec {
  CommHook kind = CommHook::none;
  int powersgd_rank = 1;  // PowerSGDState.matrix_approximation_rank (PyTorch's default: 1)
  bool operator==(const CommHookSpec&) const = default;
};

// "none", "fp16_compress", "bf16_compress", "powersgd" (rank 1) or "powersgd:R" (R in
// 1..1024); throws std::invalid_argument naming the value and the choices.
CommHookSpec comm_hook_from_name(std::string_view text);
// The inverse: "fp16_compress", "powersgd:4", ...
std::string comm_hook_name(const CommHookSpec& h);
// The dtype a compress hook all-reduces in (f16, bf16); none for none and powersgd.
std::optional<DType> comm_hook_wire_dtype(CommHook h);

// `v` rounded to the nearest value of `half` (f16 or bf16), ties to even, as a cast
// does: f16 keeps 11 significant bits down to 2^-14 and subnormals to 2^-24, and
// overflows to infinity past 65504; bf16 keeps 8 bits over f32's exponent range.
double round_to_half(double v, DType half);

// The compress hook on a bucket that holds real numbers (the host backend):
// compress: x <- round(round(x) / world_size); decompress: x <- round(x), the half
// sum copied back. The all-reduce between them sums the rounded values in the
// bucket's dtype and rounds once at the end where a half all-reduce rounds each
// partial sum; the error bound in comm_hook_test allows for the latter.
// Each is charged to the bucket's device as a cast kernel. Throws
// std::invalid_argument on a device whose memory the host cannot read.
void comm_hook_compress_in_place(Tensor& bucket, DType half, int world_size);
void comm_hook_decompress_in_place(Tensor& bucket, DType half);

// What PowerSGD spends on one bucket, in PyTorch's steady state (past
// start_powerSGD_iter, warm start, error feedback; PowerSGDState's defaults).
struct PowerSgdPlan {
  Elements uncompressed_elements = 0;  // all-reduced as they are (vectors, small matrices)
  Elements p_elements = 0;             // the P all-reduce: sum of n x r
  Elements q_elements = 0;             // the Q all-reduce: sum of m x r
  double matmul_flops = 0;             // P = MQ, Q = M^T P, M = P Q^T: 3 x 2nmr per compressed matrix
  double orthogonalize_flops = 0;      // Gram-Schmidt of Q (warm start) and of P: 2kr^2 + 3kr each
};
// `shapes`: the bucket's gradients; min_compression_rate as PowerSGDState's (2).
PowerSgdPlan powersgd_plan(const std::vector<Shape>& shapes, int rank, double min_compression_rate = 2.0);

}  // namespace dpt
