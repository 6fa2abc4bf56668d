"""GPU closure: the twin's prediction of a PyTorch DDP step (NCCL) on a CUDA device against
the step PyTorch measures there. The GPU counterpart of closure_ddp.py (gloo on the CPU).

Two halves, because a GPU is lent only now and then (ci/gpu-check runs the first):

  measure  (on the GPU machine, with the Python that has CUDA PyTorch)
      closure_gpu.py measure SOURCE_DIR --out DIR
    For each model of MODELS, at its per-GPU batch:
      1. profile it with dptwin_profile on cuda:0 (CUDA events, median of --steps after
         --warmup), writing DIR/profile-NAME.yaml, tied to GPU_MODEL;
      2. run real torch DDP (backend nccl, one process per GPU, --world-size of them; on a
         one-GPU machine world size 1, where the all-reduce is NCCL's single-rank copy) and a
         plain step without DDP,
         taking the median step (forward, loss, backward, SGD step), each step timed with
         a synchronize before and after (perf_counter between), the configurations interleaved.
    Writes DIR/closure-gpu.json: the device, torch/CUDA/NCCL versions and the measured steps.

  predict  (anywhere: CI runs it on the committed measurements, no GPU needed)
      closure_gpu.py predict DPTWIN SOURCE_DIR --recorded DIR [--tolerance 0.25] [--json FILE]
    Predicts each measured configuration with `dptwin predict --model DIR/profile-NAME.yaml`
    on the hardware file named in closure-gpu.json (its gpu.name equals the profile's
    gpu_model, so the twin uses the measured per-layer costs as they are) and compares:
    signed error = predicted / measured - 1.

The prediction never reads the measured step: it is built from the per-layer profile alone
(the twin's launch latency, optimizer and DDP bucket/all-reduce model fill in the rest).
exit: 0 within tolerance, 1 outside, 2 bad usage or missing files."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = "dptwin.closure_gpu/1"

# name: (builder in scenarios/profile/examples/models.py, its shape, per-GPU batches,
#        the same model in the twin's own library, or None)
# GPU-sized versions of closure_ddp.py's three shapes: a wide MLP (GEMM-bound), a CNN with
# BatchNorm (cuDNN convolutions), a transformer block stack (GEMMs, attention, LayerNorm),
# each at a small batch (launch- and dispatch-bound on a GPU this size) and a large one.
# The library models have the PyTorch models' exact parameters (same names, shapes and
# count), so `predict` also checks the twin's FLOP-based costs, which never saw a profile.
MODELS = {
    "mlp": ("mlp", dict(features=1024, hidden=4096, depth=3), (64, 512), "mlp:1024-4096-4096-4096-10"),
    "cnn_bn": ("cnn_bn", dict(widths=(64, 128, 256)), (32, 256), None),
    "blocks": ("tied_lm", dict(vocab=8192, d=1024, heads=16, layers=4, seq=256, tied=False), (4, 16),
               "transformer:layers=4,hidden=1024,heads=16,seq=256,vocab=8192"),
}
BUCKET_CAP_MB = 25  # PyTorch's default


def _imports(source_dir):
    sys.path[:0] = [os.path.join(source_dir, "scenarios", "profile"),
                    os.path.join(source_dir, "scenarios", "profile", "examples")]


def _jobs(args):
    """(model name, per-device batch) of every configuration, in order."""
    names = [n for n in args.models.split(",") if n]
    return [(n, b) for n in names for b in ([args.batch] if args.batch else MODELS[n][2])]


def _build(name, batch, dev):
    import models as example_models
    fn, shape, _batches, _spec = MODELS[name]
    model, (x, y), loss_fn = getattr(example_models, fn)(batch, **shape)
    return model.to(dev), (x.to(dev), y.to(dev)), loss_fn


def _profile_all(args, jobs):
    """Profiles every configuration on one device (this process), one model at a time."""
    import torch
    import dptwin_profile
    dev = torch.device(args.device)
    for name, batch in jobs:
        model, data, loss_fn = _build(name, batch, dev)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        prof = dptwin_profile.profile(model, data, loss_fn, opt, steps=args.steps, warmup=args.warmup,
                                      name=f"closure-gpu-{name}-b{batch}", gpu_model=args.gpu_model)
        prof.write(os.path.join(args.out, f"profile-{name}-b{batch}.yaml"))
        del model, opt, prof
        if dev.type == "cuda":
            torch.cuda.empty_cache()


def _measure_rank(rank, args, jobs, store, result):
    """One DDP rank (one process per GPU, as torchrun runs them): every configuration's DDP
    step and plain step, interleaved, each started together on all ranks (a barrier) and
    timed with a synchronize before and after. Rank 0 writes the medians to `result`."""
    import torch
    import torch.distributed as dist
    _imports(args.source_dir)
    cuda = args.device.startswith("cuda")
    dev = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    else:
        torch.set_num_threads(1)
    dist.init_process_group("nccl" if cuda else "gloo", init_method=f"file://{store}", world_size=args.world_size,
                            rank=rank)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    rows = []
    for name, batch in jobs:
        runs = []
        for label in ("ddp", "plain"):
            model, (x, y), loss_fn = _build(name, batch, dev)
            net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev] if cuda else None,
                                                            bucket_cap_mb=BUCKET_CAP_MB) \
                if label == "ddp" else model
            runs.append((label, net, torch.optim.SGD(net.parameters(), lr=1e-3), x, y, loss_fn, []))
        for _ in range(args.warmup + args.steps):
            for label, net, opt, x, y, loss_fn, times in runs:
                dist.barrier()
                sync()
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                loss_fn(net(x), y).backward()
                opt.step()
                sync()
                times.append(time.perf_counter() - t0)
        measured = {label: times[args.warmup:] for label, *_rest, times in runs}
        rows.append({"model": name, "batch_per_device": batch, "bucket_cap_mb": BUCKET_CAP_MB,
                     "profile": f"profile-{name}-b{batch}.yaml", "library_model": MODELS[name][3],
                     "measured_ddp_step_s": statistics.median(measured["ddp"]),
                     "measured_plain_step_s": statistics.median(measured["plain"]),
                     "ddp_steps_s": measured["ddp"], "plain_steps_s": measured["plain"]})
        if rank == 0:
            print(f"{name:8} b={batch:<4} ddp {rows[-1]['measured_ddp_step_s'] * 1e3:8.3f} ms   "
                  f"plain {rows[-1]['measured_plain_step_s'] * 1e3:8.3f} ms", flush=True)
        del runs
        if cuda:
            torch.cuda.empty_cache()
    dist.destroy_process_group()
    if rank == 0:
        with open(result, "w") as f:
            json.dump(rows, f)


def _measure(args):
    import torch
    _imports(args.source_dir)
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("closure_gpu: no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    if cuda and args.world_size > torch.cuda.device_count():
        print(f"closure_gpu: --world-size {args.world_size}: only {torch.cuda.device_count()} CUDA device(s) visible",
              file=sys.stderr)
        return 2
    unknown = [n for n in args.models.split(",") if n and n not in MODELS]
    if unknown:
        print(f"closure_gpu: unknown model(s) {unknown} (known: {', '.join(MODELS)})", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    jobs = _jobs(args)
    # 1. profile on one device, 2. measure DDP on world_size processes
    _profile_all(args, jobs)
    scratch = tempfile.mkdtemp(prefix="closure-gpu-")
    store, result = os.path.join(scratch, "store"), os.path.join(scratch, "rows.json")
    if args.world_size == 1:
        _measure_rank(0, args, jobs, store, result)
    else:
        import torch.multiprocessing as mp
        mp.spawn(_measure_rank, args=(args, jobs, store, result), nprocs=args.world_size)
    with open(result) as f:
        rows = json.load(f)
    dev = torch.device(args.device)
    props = torch.cuda.get_device_properties(dev) if cuda else None
    doc = {"schema": SCHEMA, "device": props.name if cuda else "cpu", "gpu_model": args.gpu_model,
           "hardware": args.hardware, "memory_bytes": props.total_memory if cuda else None,
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()) if cuda else None,
           "world_size": args.world_size, "steps": args.steps, "warmup": args.warmup,
           "tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "tf32_cudnn": torch.backends.cudnn.allow_tf32,
           "rows": rows}
    tmp = os.path.join(args.out, "closure-gpu.json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, os.path.join(args.out, "closure-gpu.json"))
    return 0


def _predict_one(dptwin, hardware, model_file, batch, cap_mb, devices):
    cmd = [dptwin, "predict", "--hardware", hardware, "--model", model_file, "--strategy", "ddp",
           "--devices", str(devices), "--batch-per-device", str(batch), "--bucket-cap-mb", str(cap_mb),
           "--optimizer", "sgd", "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({run.returncode}): {run.stderr.strip()}")
    return json.loads(run.stdout)["step_time_s"]


def _predict(args):
    path = os.path.join(args.recorded, "closure-gpu.json")
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"closure_gpu: cannot read {path}: {e}", file=sys.stderr)
        return 2
    if doc.get("schema") != SCHEMA:
        print(f"closure_gpu: {path}: schema {doc.get('schema')!r}, expected {SCHEMA!r}", file=sys.stderr)
        return 2
    hardware = os.path.join(args.source_dir, doc["hardware"])
    profiles = args.recorded
    if args.plant_bug == "no-backward":
        # Self-test: a twin that lost every layer's backward time must fall outside the tolerance.
        profiles = tempfile.mkdtemp(prefix="closure-gpu-planted-")
        for r in doc["rows"]:
            with open(os.path.join(args.recorded, r["profile"])) as f:
                text = re.sub(r"^(\s+backward_s:) .*$", r"\1 0", f.read(), flags=re.M)
            with open(os.path.join(profiles, r["profile"]), "w") as f:
                f.write(text)
        print("PLANTED BUG no-backward: every layer's measured backward time set to 0")
    print(f"device {doc['device']} (twin GPU {doc['gpu_model']}, {doc['hardware']}); torch {doc['torch']}, "
          f"CUDA {doc['cuda']}, NCCL {doc['nccl']}; DDP world size {doc['world_size']}, median of {doc['steps']} steps")
    print("predicted from the profile (measured per-layer costs) and from the twin's library model (FLOPs and")
    print("datasheet rates; '-' where the library has no such model), against the measured DDP step")
    print(f"{'model':8} {'batch':>5} {'measured':>10} {'profile':>10} {'error':>7} {'library':>10} {'error':>7}")
    out, worst_profile, worst_library = [], 0.0, 0.0
    for r in doc["rows"]:
        meas = r["measured_ddp_step_s"]
        pred = _predict_one(args.dptwin, hardware, os.path.join(profiles, r["profile"]), r["batch_per_device"],
                            r["bucket_cap_mb"], doc["world_size"])
        lib = None
        if r.get("library_model"):
            lib = _predict_one(args.dptwin, hardware, r["library_model"], r["batch_per_device"], r["bucket_cap_mb"],
                               doc["world_size"])
        err, lib_err = pred / meas - 1, (lib / meas - 1 if lib is not None else None)
        worst_profile = max(worst_profile, abs(err))
        if lib_err is not None:
            worst_library = max(worst_library, abs(lib_err))
        out.append({"model": r["model"], "batch_per_device": r["batch_per_device"], "measured_s": meas,
                    "predicted_from_profile_s": pred, "error_profile": err,
                    "library_model": r.get("library_model"), "predicted_from_library_s": lib,
                    "error_library": lib_err})
        lib_cols = f"{lib * 1e3:8.3f}ms {lib_err * 100:+6.1f}%" if lib is not None else f"{'-':>10} {'-':>7}"
        print(f"{r['model']:8} {r['batch_per_device']:5d} {meas * 1e3:8.3f}ms {pred * 1e3:8.3f}ms "
              f"{err * 100:+6.1f}% {lib_cols}")
    ok = worst_profile <= args.tolerance and worst_library <= args.library_tolerance
    print(f"worst |error|: from the profile {worst_profile * 100:.1f} % (tolerance {args.tolerance * 100:.0f} %), "
          f"from the library {worst_library * 100:.1f} % (tolerance {args.library_tolerance * 100:.0f} %): "
          f"{'within' if ok else 'OUTSIDE'}")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"device": doc["device"], "rows": out, "tolerance": args.tolerance,
                       "library_tolerance": args.library_tolerance, "within": ok}, f, indent=1)
        os.replace(tmp, args.json)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("measure", help="profile and measure on this machine's GPU 0")
    m.add_argument("source_dir")
    m.add_argument("--out", required=True, help="folder for closure-gpu.json and the profiles")
    m.add_argument("--models", default=",".join(MODELS))
    m.add_argument("--device", default="cuda:0", help="cuda:N (nccl), or cpu (gloo: to try this script without a GPU)")
    m.add_argument("--batch", type=int, help="per-device batch for every model (default: each model's own)")
    m.add_argument("--world-size", type=int, default=1,
                   help="DDP processes, one per GPU (default 1; on a machine of N GPUs give N and a --hardware "
                        "file of that machine)")
    m.add_argument("--steps", type=int, default=20)
    m.add_argument("--warmup", type=int, default=5)
    m.add_argument("--gpu-model", default="H200-SXM-141GB", help="the hardware file's gpu.name for this GPU")
    m.add_argument("--hardware", default="scenarios/hardware/h200-1x.yaml",
                   help="hardware file (relative to SOURCE_DIR) the predictions use")
    p = sub.add_parser("predict", help="predict the recorded configurations and compare")
    p.add_argument("dptwin")
    p.add_argument("source_dir")
    p.add_argument("--recorded", required=True, help="a folder that `measure` wrote")
    p.add_argument("--tolerance", type=float, default=0.25,
                   help="largest |predicted / measured - 1| predicted from the profile (default 0.25)")
    p.add_argument("--library-tolerance", type=float, default=0.35,
                   help="the same for the twin's library model, from FLOPs and datasheet rates (default 0.35)")
    p.add_argument("--json")
    p.add_argument("--plant-bug", choices=["no-backward"],
                   help="self-test: predict from profiles with every backward time zeroed (must fail)")
    args = ap.parse_args()
    return _measure(args) if args.mode == "measure" else _predict(args)


if __name__ == "__main__":
    sys.exit(main())
