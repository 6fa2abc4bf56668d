"""Closure test: the twin's prediction of a 2-process PyTorch DDP step (gloo, loopback
TCP, one thread per process) against the step PyTorch measures on this machine.

For each model of MODELS (built by scenarios/profile/examples/models.py, one copy of
the code for dptwin_profile's examples and this test):
  1. profile it with dptwin_profile on the CPU (worker rank 0, one thread), at each
     per-rank batch used below, while rank 1 profiles the same steps on the other core,
     every step started together, as the two DDP ranks run them (--profile-alone: rank 1
     idle);
  2. predict its 2-rank DDP step with `dptwin predict` on the host platform
     scenarios/hardware/host-cpu-gloo.yaml (gloo's ring over loopback TCP; rates from
     verify/oracle/host_microbench.py, never from a DDP run);
  3. run real torch DDP (backend gloo, 2 processes, torch.set_num_threads(1) each) and
     take the median step (forward, loss, backward with its all-reduces, SGD step);
  4. compare: signed error = predicted / measured - 1, within a stated tolerance.
Configurations: bucket_cap_mb 25 (PyTorch's default) and 1, and an uneven batch (the
ranks' local batches differ; the twin runs every rank at the larger one, since the step
waits for the slowest rank at its first all-reduce).

On a busy machine (1-minute load average above 1.5 per core, the rule of
`dptwin verify` for host timings) the table is printed but not judged: the
processes' timings then measure the scheduler.

Every configuration is profiled and measured in each of --rounds rounds (default 3; 1 when
the machine is busy at the start, so that the table is not judged anyway) and
judged on the medians over rounds: single profiles and measurements on this shared 2-core
machine vary by up to 2x (mlp's step measured 53.5 ms and 32.5 ms in one quick run), and
one round's outlier once put a row outside the tolerance.

Two worker processes (ranks 0 and 1 of one gloo group) run every round's profiles and DDP
measurements; the predictions run after them.

usage: closure_ddp.py DPTWIN SOURCE_DIR [--check] [--quick] [--rounds 3] [--tolerance 0.6] [--json FILE]
                      [--models mlp,cnn_bn,blocks] [--profile-alone] [--boost]
exit: 0 within tolerance (or not judged), 1 outside, 2 bad usage."""
import argparse
import concurrent.futures
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:  # ctest skips on this line
    print(f"PyTorch unavailable ({e}): run with Debian's /usr/bin/python3 and python3-torch")
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "..", "scenarios", "profile", "examples")]
import models as example_models  # noqa: E402

HOST_GPU_MODEL = "host-cpu-1-thread"  # gpu.name of scenarios/hardware/host-cpu-gloo.yaml
BUSY_LOAD_PER_CORE = 1.5

# model: (per-rank batch, uneven local batches (rank 0, rank 1))
MODELS = {"mlp": (64, (64, 40)), "cnn_bn": (32, (32, 20)), "blocks": (8, (8, 5))}
# Three shapes: a wide MLP (GEMMs, 10.5 MB of gradients: several 1 MiB buckets), a small
# CNN with BatchNorm (convolutions, little to all-reduce), a stack of transformer blocks
# (GEMMs, attention, LayerNorm, embeddings, an untied head). Seeded: every process builds
# the same parameters.
SHAPES = {"mlp": ("mlp", dict(features=512, hidden=1024, depth=3)),
          "cnn_bn": ("cnn_bn", dict(widths=(16, 32, 64))),
          "blocks": ("tied_lm", dict(vocab=1024, d=128, heads=4, layers=2, seq=32, tied=False))}


def build(name, batch):
    """(model, (inputs, targets), loss_fn) of closure model `name` at a per-rank batch."""
    fn, shape = SHAPES[name]
    return getattr(example_models, fn)(batch, **shape)
BUCKET_CAPS_MB = (25, 1)


def configs(name):
    """(label, bucket_cap_mb, local batches per rank) of one model."""
    batch, uneven = MODELS[name]
    out = [(f"b={batch}x2 cap={cap}MiB", cap, (batch, batch)) for cap in BUCKET_CAPS_MB]
    out.append((f"b={uneven[0]}+{uneven[1]} cap=25MiB", 25, uneven))
    return out


# ---- 1. profile -----------------------------------------------------------------------------------

def profile_model(name, batch, path, steps, warmup, corun):
    """Profiles on this rank's core; with corun, while the other rank profiles the same steps
    on the other core, each step started together (a barrier), as the two DDP ranks run them:
    on this VM two busy cores each run slower than one alone (host_microbench.py --corun), by
    an amount that depends on what the other core runs at the same moment. In step, both run
    the same op at once, as in DDP; a free-running second process (the earlier harness)
    overlapped random phases and left the slowdown to chance. Rank 0 writes its profile to
    `path`; without corun rank 1 waits."""
    import dptwin_profile
    if dist.get_rank() == 1 and not corun:
        return
    model, data, loss_fn = build(name, batch)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    prof = dptwin_profile.profile(model, data, loss_fn, opt, steps=steps, warmup=warmup, name=f"closure-{name}",
                                  gpu_model=HOST_GPU_MODEL, before_step=dist.barrier if corun else None)
    if dist.get_rank() == 0:
        prof.write(path)


# ---- 2. predict -----------------------------------------------------------------------------------

def predict(dptwin, hardware, model_file, batch, cap_mb):
    cmd = [dptwin, "predict", "--hardware", hardware, "--model", model_file, "--strategy", "ddp", "--devices", "2",
           "--batch-per-device", str(batch), "--bucket-cap-mb", str(cap_mb), "--optimizer", "sgd", "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({run.returncode}): {run.stderr.strip()}")
    doc = json.loads(run.stdout)
    # The step, and what gloo's CPU work on the ranks' cores added to it (the contention).
    return doc["step_time_s"], doc["breakdown_s"]["interference"]


# ---- 3. measure real DDP ----------------------------------------------------------------------------

def measure_ddp(name, cfgs, steps, warmup):
    """Median step of each configuration on this rank (rank 0's is the step: each step ends on
    both ranks together, at its last all-reduce)."""
    # Every configuration's DDP model at once, their steps interleaved, so that a busy spell
    # of the machine falls on all configurations alike.
    runs = []
    for label, cap, batches in cfgs:
        model, (x, y), loss_fn = build(name, batches[dist.get_rank()])
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap)
        runs.append((label, ddp, torch.optim.SGD(ddp.parameters(), lr=1e-3), x, y, loss_fn, []))
    for _ in range(warmup + steps):
        for _label, ddp, opt, x, y, loss_fn, times in runs:
            dist.barrier()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss_fn(ddp(x), y).backward()
            opt.step()
            times.append(time.perf_counter() - t0)
    return {run[0]: statistics.median(run[-1][warmup:]) for run in runs}


def raise_priority():
    """Best effort, for root on Linux: this process in a session of its own whose autogroup
    has nice -20. With autogroups (the default), CPU time is shared first between sessions,
    so a plain nice value does nothing against other sessions' builds; a -20 autogroup gets
    about 87 times the weight of each nice-0 one, and its threads still share its core as
    usual (gloo's threads with the rank's). Elsewhere (no permission, no autogroups) nothing
    changes."""
    try:
        os.setsid()
        with open("/proc/self/autogroup", "w") as fh:
            fh.write("-20")
    except OSError:
        pass


def _rank(rank, port, source_dir, plan, boost, queue):
    """One of the two worker processes: every round's profiles and DDP measurements, in the
    order of `plan`, in one process per rank (spawning and importing torch anew for each
    took most of the test's time)."""
    torch.set_num_threads(1)
    if boost:
        raise_priority()
    sys.path.insert(0, os.path.join(source_dir, "scenarios", "profile"))
    # A rank left waiting by a failed peer gives up after 2 minutes instead of gloo's 30.
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=120))
    try:
        for what, args in plan:
            if what == "profile":
                profile_model(*args)
            else:
                measured = measure_ddp(*args[1:])
                if rank == 0:
                    queue.put((args[0], measured))
    finally:
        if rank == 0:
            queue.put(None)
        dist.barrier()
        dist.destroy_process_group()


def run_plan(source_dir, plan, boost):
    """Runs `plan` on two worker ranks; returns rank 0's measurements by key."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    # Daemons: a rank stuck after its peer failed ends with this process.
    procs = [ctx.Process(target=_rank, args=(r, port, source_dir, plan, boost, queue), daemon=True)
             for r in range(2)]
    for p in procs:
        p.start()
    results = {}
    while (item := queue.get(timeout=600)) is not None:
        results[item[0]] = item[1]
    for rank, p in enumerate(procs):
        p.join(timeout=60)
        if p.exitcode != 0:
            state = "still running 60 s after the plan ended" if p.exitcode is None else f"exit {p.exitcode}"
            raise RuntimeError(f"closure worker rank {rank} failed ({state}; its traceback is above)")
    return results


# ---- 4. compare -----------------------------------------------------------------------------------

def busy_reason():
    load = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    if load / cores <= BUSY_LOAD_PER_CORE:
        return None
    return f"host busy (load average {load:.1f} on {cores} cores): reported, not judged; rerun on a quiet machine"


def main():
    ap = argparse.ArgumentParser(description="twin vs PyTorch gloo DDP on this CPU")
    ap.add_argument("dptwin")
    ap.add_argument("source_dir")
    # 0.6: the largest error seen at the lowest load so far (3.1-5.3 on 2 cores) was 49 %; no
    # run below 1.5 per core (where the test judges) exists to tighten it on. The aim is 0.25.
    ap.add_argument("--tolerance", type=float, default=0.6, help="largest |predicted / measured - 1|")
    ap.add_argument("--check", action="store_true", help="exit 1 when a row is outside the tolerance")
    ap.add_argument("--quick", action="store_true", help="fewer steps (the ctest)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--rounds", type=int, help="profile-and-measure rounds; rows judged on their medians (default 3; "
                    "1 when the machine is busy at the start, since the table is then not judged)")
    ap.add_argument("--json", help="write the rows here")
    # Off by default: at load 15 it kept the profiles near their quiet times but not DDP's
    # steps (errors -24..-46 %, spreads over rounds up to 101 %), whose many hand-offs between
    # threads and processes still wait on the busy cores.
    ap.add_argument("--boost", action="store_true",
                    help="raise the workers' priority where permitted (see raise_priority)")
    ap.add_argument("--profile-alone", action="store_true", help="profile without the second process")
    args = ap.parse_args()
    if args.rounds is None:
        # A run that starts busy is not judged whatever follows: one round prints its table.
        args.rounds = 1 if busy_reason() else 3
    if args.rounds < 1:
        print(f"closure_ddp: --rounds: {args.rounds} is not a positive count of rounds", file=sys.stderr)
        return 2
    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in MODELS:
            print(f"closure_ddp: --models: unknown model '{n}' (known: {', '.join(MODELS)})", file=sys.stderr)
            return 2
    sys.path.insert(0, os.path.join(args.source_dir, "scenarios", "profile"))
    hardware = os.path.join(args.source_dir, "scenarios", "hardware", "host-cpu-gloo.yaml")
    steps, warmup = (6, 2) if args.quick else (15, 3)
    load_before = os.getloadavg()
    t_start = time.perf_counter()
    # Rounds: each profiles and measures every configuration once, so that a busy spell of
    # this shared machine falls on one round's profile or measurement, not on the verdict;
    # each row is judged on the medians over rounds.
    samples = {}  # (name, label) -> {"cap", "predicted": [], "contention": [], "measured": []}
    with tempfile.TemporaryDirectory(prefix="dptwin-closure-") as tmp:
        plan, jobs = [], []  # jobs: (round, name, label, cap, profile path, batch)
        for rnd in range(args.rounds):
            for name in names:
                cfgs = configs(name)
                plan.append(("measure", ((rnd, name), name, cfgs, steps, warmup)))
                for b in sorted({max(batches) for _, _, batches in cfgs}):
                    path = os.path.join(tmp, f"round{rnd}-{name}-b{b}.yaml")
                    plan.append(("profile", (name, b, path, steps, warmup, not args.profile_alone)))
                for label, cap, batches in cfgs:
                    b = max(batches)
                    jobs.append((rnd, name, label, cap, os.path.join(tmp, f"round{rnd}-{name}-b{b}.yaml"), b))
        measured = run_plan(args.source_dir, plan, args.boost)
        t_measured = time.perf_counter()
        # The predictions run after the measurements (they would disturb them), several at once:
        # each is mostly the wait for its forked simulation.
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            predictions = list(pool.map(lambda j: predict(args.dptwin, hardware, j[4], j[5], j[3]), jobs))
        for (rnd, name, label, cap, path, b), (pred, contention) in zip(jobs, predictions):
            s = samples.setdefault((name, label), {"predicted": [], "contention": [], "measured": []})
            s["predicted"].append(pred)
            s["contention"].append(contention)
            s["measured"].append(measured[(rnd, name)][label])
    rows = []
    for (name, label), s in samples.items():
        pred, meas = statistics.median(s["predicted"]), statistics.median(s["measured"])
        rows.append({"model": name, "config": label, "predicted_s": pred,
                     "contention_s": statistics.median(s["contention"]), "measured_s": meas,
                     "error": pred / meas - 1, "tolerance": args.tolerance,
                     "rounds": {k: v for k, v in s.items()},
                     # how far this machine's own repeats of the step disagree: (max - min) / median
                     "measured_spread": (max(s["measured"]) - min(s["measured"])) / meas})
    load_after = os.getloadavg()
    print(f"medians over {args.rounds} rounds; spread: (max - min) / median of the measured step over rounds")
    print(f"{'model':8} {'config':22} {'predicted':>10} {'contention':>11} {'measured':>10} {'spread':>7} "
          f"{'error':>8} {'tolerance':>9}")
    for r in rows:
        print(f"{r['model']:8} {r['config']:22} {r['predicted_s'] * 1e3:8.1f}ms {r['contention_s'] * 1e3:9.1f}ms "
              f"{r['measured_s'] * 1e3:8.1f}ms {r['measured_spread'] * 100:6.0f}% {r['error'] * 100:+7.1f}% "
              f"{r['tolerance'] * 100:8.0f}%")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} ({os.cpu_count()} cores); "
          f"{time.perf_counter() - t_start:.0f} s ({t_measured - t_start:.0f} s measuring); torch {torch.__version__}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "load_average_before": load_before, "load_average_after": load_after}, fh,
                      indent=1)
    outside = [r for r in rows if abs(r["error"]) > r["tolerance"]]
    reason = busy_reason() or (None if max(load_before[0], load_after[0]) / (os.cpu_count() or 1)
                               <= BUSY_LOAD_PER_CORE else "host busy during the run: reported, not judged")
    if reason:
        print(reason)
        return 0
    for r in outside:
        print(f"OUTSIDE: {r['model']} {r['config']}: predicted {r['predicted_s'] * 1e3:.1f} ms, measured "
              f"{r['measured_s'] * 1e3:.1f} ms ({r['error'] * 100:+.1f}%, tolerance {r['tolerance'] * 100:.0f}%)")
    return 1 if (outside and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
