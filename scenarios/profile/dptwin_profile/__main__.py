"""python3 -m dptwin_profile MODULE:FN [--batch N] [--device cpu|cuda:0] [--optimizer sgd|adamw] -o FILE.yaml

MODULE:FN names a function (MODULE a module on the Python path, or a path to a
.py file) that returns (model, (inputs, targets), loss_fn). With --batch, FN is
called as FN(batch=N) when it takes a `batch` argument; otherwise the example
batch is repeated or cut along dim 0 to N samples. Exit codes: 0 written; 2 bad
input (the message names it); 3 the output could not be written."""
import argparse
import importlib
import importlib.util
import inspect
import os
import sys

import torch

from .errors import ProfileError
from .profiler import profile


def _load(target):
    if ":" not in target:
        raise ProfileError(f"'{target}' is not MODULE:FN (e.g. my_model:build)")
    mod_name, fn_name = target.rsplit(":", 1)
    try:
        if mod_name.endswith(".py") or os.sep in mod_name:
            spec = importlib.util.spec_from_file_location("dptwin_user_model", mod_name)
            if spec is None or not os.path.isfile(mod_name):
                raise ProfileError(f"{mod_name}: no such Python file")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(mod_name)
    except ProfileError:
        raise
    except Exception as e:
        raise ProfileError(f"cannot import {mod_name}: {type(e).__name__}: {e}") from e
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise ProfileError(f"{mod_name} has no function {fn_name}")
    return fn


def _resize(t, n):
    """Repeats or cuts a tensor (or a tuple/list/dict of them) along dim 0 to n rows."""
    if isinstance(t, torch.Tensor):
        if t.dim() == 0 or t.shape[0] == n:
            return t
        reps = -(-n // t.shape[0])
        return t.repeat(reps, *([1] * (t.dim() - 1)))[:n]
    if isinstance(t, (list, tuple)):
        return type(t)(_resize(v, n) for v in t)
    if isinstance(t, dict):
        return {k: _resize(v, n) for k, v in t.items()}
    return t


def _to(t, device):
    if isinstance(t, torch.Tensor):
        return t.to(device)
    if isinstance(t, (list, tuple)):
        return type(t)(_to(v, device) for v in t)
    if isinstance(t, dict):
        return {k: _to(v, device) for k, v in t.items()}
    return t


def _build(args):
    fn = _load(args.target)
    takes_batch = "batch" in inspect.signature(fn).parameters
    try:
        built = fn(batch=args.batch) if (args.batch and takes_batch) else fn()
    except Exception as e:
        raise ProfileError(f"{args.target} raised {type(e).__name__}: {e}") from e
    if not (isinstance(built, (tuple, list)) and len(built) == 3):
        raise ProfileError(f"{args.target} must return (model, (inputs, targets), loss_fn), got a "
                           f"{type(built).__name__}")
    model, batch, loss_fn = built
    if not isinstance(model, torch.nn.Module):
        raise ProfileError(f"{args.target} returned a {type(model).__name__} as the model, not a torch.nn.Module")
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        raise ProfileError(f"{args.target}: the batch must be a pair (inputs, targets)")
    inputs, targets = batch
    if args.batch and not takes_batch:
        inputs, targets = _resize(inputs, args.batch), _resize(targets, args.batch)
    device = torch.device(args.device)
    model.to(device)
    return model, (_to(inputs, device), _to(targets, device)), loss_fn, device


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m dptwin_profile", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", help="MODULE:FN returning (model, (inputs, targets), loss_fn)")
    p.add_argument("--batch", type=int, help="samples per step (default: the example batch's)")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (default cpu)")
    p.add_argument("--optimizer", choices=["sgd", "adamw"], default="adamw",
                   help="optimizer whose step is timed, PyTorch's defaults (default adamw; sgd with lr 0.01)")
    p.add_argument("--steps", type=int, default=10, help="timed steps (median taken; default 10)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    p.add_argument("--threads", type=int, help="torch.set_num_threads on the CPU")
    p.add_argument("--name", help="model name in the file (default: MODULE:FN)")
    p.add_argument("--gpu-model", help="the hardware files' GPU model this device is (e.g. H100-SXM5-80GB): the "
                                       "twin then uses the measured times when it predicts that GPU")
    p.add_argument("-o", "--out", required=True, help="model file to write (YAML)")
    args = p.parse_args(argv)
    try:
        if args.batch is not None and args.batch < 1:
            raise ProfileError(f"--batch must be positive, got {args.batch}")
        if args.threads is not None:
            if args.threads < 1:
                raise ProfileError(f"--threads must be positive, got {args.threads}")
            torch.set_num_threads(args.threads)
        if args.device.startswith("cuda") and not torch.cuda.is_available():
            raise ProfileError(f"--device {args.device}: this torch sees no CUDA device")
        model, batch, loss_fn, device = _build(args)
        trainable = [q for q in model.parameters() if q.requires_grad]
        opt = None
        if trainable:
            opt = torch.optim.SGD(trainable, lr=0.01) if args.optimizer == "sgd" else torch.optim.AdamW(trainable)
        prof = profile(model, batch, loss_fn, opt, steps=args.steps, warmup=args.warmup, device=device,
                       name=args.name or args.target, gpu_model=args.gpu_model)
    except ProfileError as e:
        print(f"dptwin_profile: error: {e}", file=sys.stderr)
        return 2
    try:
        prof.write(args.out)
    except OSError as e:
        print(f"dptwin_profile: error: cannot write {args.out}: {e.strerror}", file=sys.stderr)
        return 3
    print(f"dptwin_profile: {prof.name}: {prof.parameter_count:,} parameters, {len(prof.layers)} layers, "
          f"step {prof.step_s * 1e3:.2f} ms on {prof.device} (batch {prof.batch}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
