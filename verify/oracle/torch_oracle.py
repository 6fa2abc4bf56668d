#!/usr/bin/python3
"""PyTorch as dptwin's external oracle.

Run by Debian's interpreter (/usr/bin/python3, python3-torch 1.13):

    torch_oracle.py JOBS.safetensors RESULTS.safetensors

JOBS holds the tensors (weights, inputs, labels) and, in its "__metadata__" entry
"jobs", a JSON list of jobs. Each job names its tensors "<job name>/...". Every
job runs in this one process (Python and torch start in about 2 s, so the C++
tests batch their cases). RESULTS holds each job's output tensors under the same
"<job name>/" prefix and, in metadata, "errors": a JSON object job name -> the
exception text PyTorch raised (for jobs that expect one), plus "tables" for jobs
that return JSON.

Job kinds:
  train            loss and gradients at the given weights, then the weights (and
                   losses) after `steps` SGD steps and, from the same start, after
                   `steps` AdamW steps, all on the one batch.
  load_checkpoint  builds the MLP, loads the checkpoint file at "path" with strict
                   load_state_dict (after removing "strip_prefix" when given), and
                   returns the model's output on "<name>/x". A failing load is
                   reported in "errors".
  save_checkpoint  builds the MLP with torch's own initialisation from "seed",
                   perturbs LayerNorm parameters, saves its state_dict to "path",
                   and returns its output on "<name>/x".
  chunk_table      torch.chunk sizes for every batch size B in [0, max_batch] and
                   chunk count N in [1, max_chunks], as "tables"[name]["B,N"].
  ddp              torch DistributedDataParallel (gloo, `world_size` processes on
                   the CPU) from the given weights on the given per-rank batches:
                   every rank's gradients after each step and the parameters after
                   `steps` SGD steps (see ddp_oracle.py; all ddp jobs share one
                   set of ranks, run after the other jobs).

The safetensors reader and writer are plain Python: an 8-byte little-endian
header length, a JSON header, raw little-endian data.
"""
import json
import os
import struct
import sys
import tempfile

import torch
import torch.nn as nn

ST_DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
             "F16": torch.float16, "BF16": torch.bfloat16}
ST_NAMES = {v: k for k, v in ST_DTYPES.items()}
TORCH_DTYPES = {"f32": torch.float32, "f64": torch.float64}


def read_safetensors(path):
    """Returns ({name: tensor}, metadata) for a safetensors file, in file order."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: truncated ({len(raw)} bytes)")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header of {n} bytes runs past the end")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {}) or {}
    data = bytearray(raw[8 + n:])
    entries = sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))
    tensors = {}
    for name, info in entries:
        dtype = ST_DTYPES[info["dtype"]]
        shape = list(info["shape"])
        begin, end = info["data_offsets"]
        count = 1
        for d in shape:
            count *= d
        if end - begin != count * torch.tensor([], dtype=dtype).element_size():
            raise ValueError(f"{path}: tensor {name}: data_offsets disagree with shape")
        if count == 0:
            t = torch.empty(shape, dtype=dtype)
        else:
            t = torch.frombuffer(data, dtype=dtype, count=count, offset=begin).clone().reshape(shape)
        tensors[name] = t
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} atomically (temporary file, fsync, rename)."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        # numpy has no bfloat16: 2-byte types go out as their bits
        bits = t.view(torch.int16) if t.element_size() == 2 else t
        blob = bits.numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": ST_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)  # the data buffer starts 8-byte aligned
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".oracle.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for b in blobs:
                f.write(b)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def build_mlp(model):
    """nn.Sequential(Linear, [LayerNorm], act, ..., Linear) as dptwin's make_mlp builds it."""
    widths = model["widths"]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 == len(widths):
            break
        if model.get("layernorm", False):
            layers.append(nn.LayerNorm(widths[i + 1]))
        layers.append(nn.ReLU() if model.get("activation", "relu") == "relu" else nn.GELU())
    return nn.Sequential(*layers).to(TORCH_DTYPES[model["dtype"]])


def loss_fn(job):
    reduction = job.get("reduction", "mean")
    return nn.MSELoss(reduction=reduction) if job["loss"] == "mse" else nn.CrossEntropyLoss(reduction=reduction)


def state_of(tensors, prefix):
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def loaded_model(job, tensors):
    m = build_mlp(job["model"])
    m.load_state_dict(state_of(tensors, job["name"] + "/param/"), strict=True)
    return m


def run_train(job, tensors, out):
    name = job["name"]
    x, y = tensors[name + "/x"], tensors[name + "/y"]
    crit = loss_fn(job)

    m = loaded_model(job, tensors)
    loss = crit(m(x), y)
    loss.backward()
    out[name + "/loss"] = torch.tensor([loss.item()], dtype=torch.float64)
    for pname, p in m.named_parameters():
        out[f"{name}/grad/{pname}"] = p.grad

    def train(tag, make_opt):
        mm = loaded_model(job, tensors)
        opt = make_opt(mm.parameters())
        losses = []
        for _ in range(job["steps"]):
            opt.zero_grad()
            l = crit(mm(x), y)
            l.backward()
            opt.step()
            losses.append(l.item())
        out[f"{name}/{tag}_losses"] = torch.tensor(losses, dtype=torch.float64)
        for pname, p in mm.named_parameters():
            out[f"{name}/{tag}/{pname}"] = p.detach()

    s = job["sgd"]
    train("sgd", lambda ps: torch.optim.SGD(ps, lr=s["lr"], momentum=s["momentum"], dampening=s["dampening"],
                                            weight_decay=s["weight_decay"], nesterov=s["nesterov"]))
    a = job["adamw"]
    train("adamw", lambda ps: torch.optim.AdamW(ps, lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["eps"],
                                                weight_decay=a["weight_decay"]))


def run_load_checkpoint(job, tensors, out, errors):
    name = job["name"]
    state, _ = read_safetensors(job["path"])
    prefix = job.get("strip_prefix", "")
    if prefix:
        torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state, prefix)
    m = build_mlp(job["model"])
    try:
        m.load_state_dict(state, strict=True)
    except RuntimeError as e:
        errors[name] = str(e)
        return
    with torch.no_grad():
        out[name + "/out"] = m(tensors[name + "/x"])


def run_save_checkpoint(job, tensors, out):
    name = job["name"]
    torch.manual_seed(job["seed"])
    m = build_mlp(job["model"])
    with torch.no_grad():
        for mod in m:
            if isinstance(mod, nn.LayerNorm):  # away from 1 and 0 so a skipped load shows
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)
        out[name + "/out"] = m(tensors[name + "/x"])
    state = m.state_dict()
    if "save_dtype" in job:
        # A half-precision state dict (model.half().state_dict(), a bf16 checkpoint); the
        # output is the float model's after load_state_dict casts it back in.
        state = {k: v.to(ST_DTYPES[job["save_dtype"]]) for k, v in state.items()}
        m.load_state_dict(state, strict=True)
        with torch.no_grad():
            out[name + "/out"] = m(tensors[name + "/x"])
        for k, v in m.state_dict().items():
            out[name + "/param/" + k] = v
    write_safetensors(job["path"], state, {"format": "pt"})


def run_chunk_table(job, tables):
    table = {}
    for b in range(job["max_batch"] + 1):
        x = torch.arange(b)
        for n in range(1, job["max_chunks"] + 1):
            table[f"{b},{n}"] = [len(c) for c in torch.chunk(x, n, dim=0)]
    tables[job["name"]] = table


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: torch_oracle.py JOBS.safetensors RESULTS.safetensors\n")
        return 2
    torch.set_num_threads(1)
    tensors, metadata = read_safetensors(argv[1])
    jobs = json.loads(metadata["jobs"])
    out, errors, tables = {}, {}, {}
    ddp_jobs = []
    for job in jobs:
        kind = job["kind"]
        if kind == "train":
            run_train(job, tensors, out)
        elif kind == "load_checkpoint":
            run_load_checkpoint(job, tensors, out, errors)
        elif kind == "save_checkpoint":
            run_save_checkpoint(job, tensors, out)
        elif kind == "chunk_table":
            run_chunk_table(job, tables)
        elif kind == "ddp":
            ddp_jobs.append(job)
        else:
            raise ValueError(f"unknown job kind '{kind}' in job '{job.get('name')}'")
    if ddp_jobs:
        import ddp_oracle  # only DDP jobs need torch.distributed; all share one set of ranks
        ddp_oracle.run_ddp_jobs(ddp_jobs, tensors, out, os.path.dirname(os.path.abspath(argv[2])))
    write_safetensors(argv[2], out, {"errors": json.dumps(errors), "tables": json.dumps(tables),
                                     "torch_version": torch.__version__})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
