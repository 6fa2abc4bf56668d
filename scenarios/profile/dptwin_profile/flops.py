"""FLOPs of the tensor operations whose cost is known from their shapes (a
multiply-add is 2 FLOPs, as scenarios/models/generate.py counts): linear, the
convolutions and the matrix products. Counted with a TorchFunctionMode, so
functional calls inside a module's forward (attention's q @ k^T) count too."""
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


_RULES = {
    "linear": _linear,
    "conv1d": _conv, "conv2d": _conv, "conv3d": _conv,
    "matmul": _matmul, "mm": _matmul, "bmm": _matmul, "__matmul__": _matmul, "__rmatmul__": None,
    "addmm": _addmm, "baddbmm": _addmm,
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
        if rule is not None and isinstance(out, torch.Tensor):
            try:
                self.sink(int(rule(args, kwargs, out)))
            except (AttributeError, IndexError, TypeError):
                pass  # an unusual call form: its FLOPs stay unknown (not guessed)
        return out
