"""FLOPs of the tensor operations whose cost is known from their shapes (a
multiply-add is 2 FLOPs, as scenarios/models/generate.py counts): linear, the
convolutions and the matrix products, and the fused attention functions. Counted
with a TorchFunctionMode, so functional calls inside a module's forward (attention's
q @ k^T) count too. The mode is off while a function it intercepted runs, so a
Python-level function that calls others (F.multi_head_attention_forward, behind
nn.MultiheadAttention and nn.TransformerEncoderLayer) is counted whole, from its
arguments' shapes."""
import math

import torch
from torch.overrides import TorchFunctionMode


def _numel(shape):
    return math.prod(shape) if len(shape) else 1


def _linear(args, kwargs, out):
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    rows = x.numel() // w.shape[-1]
    return 2 * rows * w.shape[0] * w.shape[1] + (rows * w.shape[0] if bias is not None else 0)


def _conv(args, kwargs, out):
    w = args[1]
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    # Each output element: Cin/groups x kernel multiply-adds (w is [Cout, Cin/groups, k...]).
    per_output = _numel(w.shape[1:])
    return 2 * per_output * out.numel() + (out.numel() if bias is not None else 0)


def _matmul(args, kwargs, out):
    a = args[0]
    inner = a.shape[-1] if a.dim() >= 1 else 1
    return 2 * out.numel() * inner


def _addmm(args, kwargs, out):
    # addmm(input, mat1, mat2): the product plus the add.
    return 2 * out.numel() * args[1].shape[-1] + out.numel()


def _mha(args, kwargs, out):
    # F.multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
    # in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
    # out_proj_weight, out_proj_bias, ...): query [L, N, E] or [L, E], key [S, N, Ek],
    # value [S, N, Ev]. The q, k and v projections, q k^T and the weights times v over
    # all heads (heads x head_dim = E), and the output projection, with their biases.
    names = ("query", "key", "value", "embed_dim_to_check", "num_heads", "in_proj_weight",
             "in_proj_bias", "bias_k", "bias_v", "add_zero_attn", "dropout_p",
             "out_proj_weight", "out_proj_bias")
    a = dict(zip(names, args))
    a.update({k: v for k, v in kwargs.items() if k in names})
    q, k, v = a["query"], a["key"], a["value"]
    e = q.shape[-1]
    batch = q.shape[1] if q.dim() == 3 else 1
    l_len, s_len = q.shape[0], k.shape[0]
    has_in_bias = a.get("in_proj_bias") is not None
    flops = 2 * l_len * batch * e * e + 2 * s_len * batch * (k.shape[-1] + v.shape[-1]) * e
    if has_in_bias:
        flops += (l_len + 2 * s_len) * batch * e
    s_len += (1 if a.get("bias_k") is not None else 0) + (1 if a.get("add_zero_attn") else 0)
    flops += 2 * 2 * batch * l_len * s_len * e
    flops += 2 * l_len * batch * e * e + (l_len * batch * e if a.get("out_proj_bias") is not None else 0)
    return flops


def _sdpa(args, kwargs, out):
    # scaled_dot_product_attention(q [..., L, E], k [..., S, E], v [..., S, Ev]) (torch 2).
    q, k, v = args[0], args[1], args[2]
    batch = _numel(q.shape[:-2])
    return 2 * batch * q.shape[-2] * k.shape[-2] * (q.shape[-1] + v.shape[-1])


_RULES = {
    "linear": _linear,
    "conv1d": _conv, "conv2d": _conv, "conv3d": _conv,
    "matmul": _matmul, "mm": _matmul, "bmm": _matmul, "__matmul__": _matmul, "__rmatmul__": None,
    "addmm": _addmm, "baddbmm": _addmm,
    "multi_head_attention_forward": _mha, "scaled_dot_product_attention": _sdpa,
}


class FlopCounter(TorchFunctionMode):
    """Calls `sink(flops)` for every counted operation run under it."""

    def __init__(self, sink):
        super().__init__()
        self.sink = sink

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        rule = _RULES.get(getattr(func, "__name__", ""))
        result = out[0] if isinstance(out, tuple) and out else out  # (attention output, weights)
        if rule is not None and isinstance(result, torch.Tensor):
            try:
                self.sink(int(rule(args, kwargs, result)))
            except (AttributeError, IndexError, TypeError):
                pass  # an unusual call form: its FLOPs stay unknown (not guessed)
        return out
