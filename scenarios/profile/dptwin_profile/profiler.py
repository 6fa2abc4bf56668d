"""Measures one model on one device: parameters in registration order, and per
layer the forward and backward time (median over steps after warm-up), FLOPs
where known and the bytes of activations saved for backward.

Layers are the modules that own parameters directly, the leaf modules that run,
and composite modules that do counted tensor work of their own (a functional
attention: matmuls or saved tensors). Times come from a timeline of events:
forward pre/post hooks of every layer, and in backward a hook on each layer's
output that fires when its gradient arrives. Each gap between two events belongs
to the layer running in it (forward: the innermost layer; glue between layers
goes to the layer that follows; the loss to the last layer). Each hooked step is
followed by the same step without hooks, and the layers' times are scaled to add up
to the forward and backward of those (medians), so the hooks' own cost stays out.
CPU times are perf_counter, GPU times CUDA events.
"""
import statistics
import time

import torch
from torch import nn

from .errors import ProfileError
from .flops import FlopCounter
from . import model_file

_DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16"}


class _Clock:
    """Time marks: perf_counter on the CPU, recorded CUDA events on a GPU (read after a synchronize)."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.device = device

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def seconds(self, a, b):
        return (b - a) if not self.cuda else a.elapsed_time(b) / 1e3


def _first_tensor(x):
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (list, tuple)):
        for v in x:
            t = _first_tensor(v)
            if t is not None:
                return t
    if isinstance(x, dict):
        for v in x.values():
            t = _first_tensor(v)
            if t is not None:
                return t
    return None


def _call(model, inputs):
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (list, tuple)):
        return model(*inputs)
    return model(inputs)


class _Layer:
    def __init__(self, index, name, module):
        self.index, self.name, self.module = index, name, module
        self.type = type(module).__name__
        self.flops = 0
        self.saved_bytes = 0
        self.output_numel = 0
        self.ran = False
        self.forward_s = []   # per measured step
        self.backward_s = []


class _Recorder:
    """Hooks on every module; what they record depends on the phase (census or timing)."""

    def __init__(self, model, clock):
        self.model, self.clock = model, clock
        self.names = {m: (n if n else "model") for n, m in model.named_modules()}
        self.layers = {}          # module -> _Layer (decided after the census)
        self.stack = []           # modules whose forward is running
        self.census = True
        self.census_info = {}     # module -> dict(flops, saved, out_numel, ran, leaf)
        self.pending = []         # census work done outside any module, charged to the next one
        self.events = []          # timing: (kind, module, mark)
        self.param_ptrs = set()
        self.saved_keys = set()
        self.failing = None       # the innermost module whose forward raised
        self.phase = ""           # what the step is doing (named when it fails)
        self.handles = []

    # -- hooks ------------------------------------------------------------------
    def install(self):
        for m in self.names:
            self.handles.append(m.register_forward_pre_hook(self._pre))
            self.handles.append(m.register_forward_hook(self._post))

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []

    def _info(self, m):
        return self.census_info.setdefault(m, dict(flops=0, saved=0, out_numel=0, ran=False))

    def _pre(self, m, args):
        self.stack.append(m)
        self.failing = m
        if self.census:
            info = self._info(m)
            info["ran"] = True
            if self.pending and not list(m.children()):
                for kind, v in self.pending:
                    info[kind] += v
                self.pending = []
        elif m in self.layers:
            self.events.append(("pre", m, self.clock.mark()))

    def _post(self, m, args, out):
        self.stack.pop()
        self.failing = self.stack[-1] if self.stack else None
        if self.census:
            t = _first_tensor(out)
            if t is not None:
                self._info(m)["out_numel"] = t.numel()
            return
        if m in self.layers:
            self.events.append(("post", m, self.clock.mark()))
            t = _first_tensor(out)
            if t is not None and t.requires_grad:
                t.register_hook(lambda grad, m=m: self._grad_arrived(m))

    def _grad_arrived(self, m):
        self.events.append(("grad", m, self.clock.mark()))

    def _charge(self, kind, value):
        # Census work belongs to the innermost running module, or to the next one to start.
        if self.stack:
            self._info(self.stack[-1])[kind] += value
        else:
            self.pending.append((kind, value))

    def flops_sink(self, flops):
        if self.census:
            self._charge("flops", flops)

    def pack(self, t):
        if self.census and t.data_ptr() not in self.param_ptrs:
            key = (t.data_ptr(), t.numel(), t.dtype)
            if key not in self.saved_keys:  # a tensor saved by two ops counts once
                self.saved_keys.add(key)
                self._charge("saved", t.numel() * t.element_size())
        return t


class Profile:
    """What profile() measured; write() gives the model file."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def to_yaml(self):
        return model_file.to_yaml(self)

    def write(self, path):
        model_file.write(self, path)


def _check_inputs(model, batch, loss_fn, optimizer):
    if not isinstance(model, nn.Module):
        raise ProfileError(f"model is a {type(model).__name__}, not a torch.nn.Module")
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        raise ProfileError("the batch must be a pair (inputs, targets)")
    if not callable(loss_fn):
        raise ProfileError(f"loss_fn is a {type(loss_fn).__name__}, not callable")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise ProfileError(f"optimizer is a {type(optimizer).__name__}, not a torch.optim.Optimizer")
    x = _first_tensor(batch[0])
    if x is None or x.dim() == 0:
        raise ProfileError("the inputs hold no tensor with a batch dimension (dim 0)")
    return x


def _device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return "cpu: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"


def _step(model, inputs, targets, loss_fn, optimizer, rec, clock):
    """One training step; returns the marks (start, model end, loss end, backward end, step end)."""
    optimizer.zero_grad(set_to_none=True)
    rec.phase = "the model's forward"
    t0 = clock.mark()
    out = _call(model, inputs)
    t1 = clock.mark()
    rec.phase = "the loss"
    loss = loss_fn(out, targets)
    t2 = clock.mark()
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise ProfileError(f"loss_fn returned {type(loss).__name__} {getattr(loss, 'shape', '')}, not a scalar tensor")
    if not loss.requires_grad:
        raise ProfileError("the loss has no backward: it does not depend on any parameter that requires grad "
                           "(all parameters frozen, or the loss detached)")
    rec.phase = "backward"
    loss.backward()
    t3 = clock.mark()
    rec.phase = "the optimizer step"
    optimizer.step()
    t4 = clock.mark()
    return t0, t1, t2, t3, t4


def _census(model, inputs, targets, loss_fn, optimizer, rec, clock):
    rec.census = True
    rec.param_ptrs = {p.data_ptr() for p in model.parameters()}
    try:
        with torch.autograd.graph.saved_tensors_hooks(rec.pack, lambda t: t), FlopCounter(rec.flops_sink):
            _step(model, inputs, targets, loss_fn, optimizer, rec, clock)
    except ProfileError:
        raise
    except Exception as e:  # the user's model failed: say where
        where = f" in module '{rec.names[rec.failing]}' ({type(rec.failing).__name__})" if rec.failing else ""
        raise ProfileError(f"the model does not run on the example batch: {rec.phase} failed{where}: "
                           f"{type(e).__name__}: {e}") from e
    finally:
        rec.stack = []
    grads = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
    if not grads:
        raise ProfileError("the trace has no backward: no parameter received a gradient")


def _choose_layers(model, rec):
    layers = {}
    for name, m in model.named_modules():
        info = rec.census_info.get(m, dict(flops=0, saved=0, out_numel=0, ran=False))
        leaf = not list(m.children())
        own_params = bool(list(m.parameters(recurse=False)))
        own_work = info["flops"] > 0 or info["saved"] > 0
        if own_params or (info["ran"] and (leaf or own_work)):
            layer = _Layer(len(layers), name if name else "model", m)
            layer.flops, layer.saved_bytes, layer.ran = info["flops"], info["saved"], info["ran"]
            layer.output_numel = info["out_numel"]
            layers[m] = layer
    return layers


def _attribute(rec, marks, clock):
    """Splits one timed step's forward and backward into the layers (see the module docstring)."""
    t0, t1, t2, t3, _ = marks
    fwd = {m: 0.0 for m in rec.layers}
    bwd = {m: 0.0 for m in rec.layers}
    f_events = [e for e in rec.events if e[0] != "grad"]
    g_events = [e for e in rec.events if e[0] == "grad"]
    stack, prev, pending, last = [], t0, 0.0, None
    for kind, m, mark in f_events:
        dt = clock.seconds(prev, mark)
        if stack:
            fwd[stack[-1]] += dt
        else:
            pending += dt
        if kind == "pre":
            fwd[m] += pending
            pending = 0.0
            stack.append(m)
        else:
            stack.pop()
            last = m
        prev = mark
    if last is not None:  # the tail of forward and the loss go to the last layer
        fwd[last] += pending + clock.seconds(prev, t1) + clock.seconds(t1, t2)
    prev = t2
    for i, (_, m, mark) in enumerate(g_events):
        dt = clock.seconds(prev, mark)
        bwd[m if i == 0 else g_events[i - 1][1]] += dt
        prev = mark
    if g_events:
        bwd[g_events[-1][1]] += clock.seconds(prev, t3)
    return fwd, bwd


def _scale_to_totals(layers, forward_s, backward_s):
    """Per layer the median over hooked steps, scaled so the layers add up to the
    median forward and backward of the steps without hooks: a noisy step shifts one
    layer's median little but the sum of medians falls below the median of sums
    (right-skewed noise), and the hooks' own cost is left out."""
    for attr, total in (("forward_s", forward_s), ("backward_s", backward_s)):
        medians = {layer: statistics.median(getattr(layer, attr)) for layer in layers}
        s = sum(medians.values())
        for layer in layers:
            setattr(layer, attr + "_median", medians[layer] * (total / s) if s > 0 else 0.0)


def profile(model, batch, loss_fn, optimizer=None, *, steps=10, warmup=3, device=None, name=None,
            gpu_model=None, before_step=None):
    """Profiles `model` on `batch` = (inputs, targets) with `loss_fn(model(inputs), targets)`
    and `optimizer` (default AdamW over the trainable parameters, PyTorch's defaults).
    The model and batch must already be on `device` (default: where the parameters are).
    before_step, when given, is called with no arguments before each warm-up and timed step
    (hooked or not), outside the timing (e.g. a barrier that keeps another process's steps in
    step with these)."""
    x = _check_inputs(model, batch, loss_fn, optimizer)
    if before_step is not None and not callable(before_step):
        raise ProfileError(f"before_step is a {type(before_step).__name__}, not callable")
    if steps < 1 or warmup < 0:
        raise ProfileError(f"steps must be >= 1 and warmup >= 0, got steps={steps} warmup={warmup}")
    params = list(model.parameters())  # registration order, shared (tied) tensors once
    if not params:
        raise ProfileError(f"{type(model).__name__} has no parameters: nothing to train")
    device = torch.device(device) if device is not None else params[0].device
    trainable = [p for p in params if p.requires_grad]
    opt_name = "adamw"
    if optimizer is None:
        if not trainable:
            raise ProfileError("the trace has no backward: every parameter is frozen (requires_grad=False)")
        optimizer = torch.optim.AdamW(trainable)
    else:
        opt_name = type(optimizer).__name__.lower()
    inputs, targets = batch
    batch_size = x.shape[0]
    clock = _Clock(device)
    rec = _Recorder(model, clock)
    rec.install()
    try:
        model.train()
        _census(model, inputs, targets, loss_fn, optimizer, rec, clock)
        rec.layers = _choose_layers(model, rec)
        rec.census = False
        step_s, opt_s, fwd_total, bwd_total = [], [], [], []
        for i in range(warmup + steps):
            if before_step is not None:
                before_step()
            rec.events = []
            marks = _step(model, inputs, targets, loss_fn, optimizer, rec, clock)
            clock.sync()
            if i < warmup:
                continue
            fwd, bwd = _attribute(rec, marks, clock)
            for m, layer in rec.layers.items():
                layer.forward_s.append(fwd[m])
                layer.backward_s.append(bwd[m])
            # The same step without the hooks, right after the hooked one (a busy spell falls on
            # both): the totals come from these, so the hooks' own cost stays out of the profile.
            rec.remove()
            if before_step is not None:
                before_step()
            t0, _, t2, t3, t4 = _step(model, inputs, targets, loss_fn, optimizer, rec, clock)
            clock.sync()
            rec.install()
            step_s.append(clock.seconds(t0, t4))
            opt_s.append(clock.seconds(t3, t4))
            fwd_total.append(clock.seconds(t0, t2))
            bwd_total.append(clock.seconds(t2, t3))
    finally:
        rec.remove()
    _scale_to_totals(rec.layers.values(), statistics.median(fwd_total), statistics.median(bwd_total))
    if not any(layer.backward_s and max(layer.backward_s) > 0 for layer in rec.layers.values()):
        raise ProfileError("the trace has no backward: no layer's output received a gradient")
    dtype = params[0].dtype
    return Profile(
        name=name or type(model).__name__,
        model=model,
        layers=list(rec.layers.values()),
        batch=batch_size,
        input_numel=x.numel(),
        dtype=_DTYPES.get(dtype, str(dtype).replace("torch.", "")),
        element_bytes=params[0].element_size(),
        device=_device_name(device),
        device_kind=device.type,
        gpu_model=gpu_model,
        torch_version=torch.__version__,
        threads=torch.get_num_threads() if device.type == "cpu" else None,
        optimizer=opt_name,
        steps=steps,
        warmup=warmup,
        step_s=statistics.median(step_s),
        optimizer_step_s=statistics.median(opt_s),
        forward_s=statistics.median(fwd_total),
        backward_s=statistics.median(bwd_total),
        parameter_count=sum(p.numel() for p in params),
        frozen_count=sum(p.numel() for p in params if not p.requires_grad),
        buffer_count=sum(b.numel() for b in model.buffers()),
    )
