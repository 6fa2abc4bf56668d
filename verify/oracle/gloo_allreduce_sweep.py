"""gloo's all-reduce alone on this machine against the twin's gloo model, size by size
(a check of sim/collectives/gloo_model.cpp, never a source of its rates).

  /usr/bin/python3 verify/oracle/gloo_allreduce_sweep.py [DPTWIN] [--rounds 30]

Two processes (torch.distributed, backend gloo, loopback TCP, one torch thread each)
all-reduce float32 buffers of 4 KiB..64 MiB. Next to each all-reduce, in the same round,
the primitive the model charges it with: an exchange of one 1 MiB segment both ways at
once (isend/irecv), from a cache-warm buffer ("hot") and walking slice by slice through a
buffer as large as the all-reduce's ("walk": the median slice, as host_microbench.py's
tcp_bandwidth_by_buffer; "as block": the whole walk timed as one, as the all-reduce is).
Sizes and primitives run interleaved round by round, so a busy spell of a shared machine
falls on all of them alike; each figure is the fastest of the rounds (the least
disturbed), the all-reduce's also the median. With DPTWIN (the dptwin
binary) it also prints the model's time from `dptwin bench --backend sim --hardware
host-cpu-gloo`. The load average is printed before and after."""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import host_microbench  # noqa: E402  (the walk primitive, one copy)

SEGMENT_BYTES = 1024 * 1024  # gloo's kMaxSegmentSize (gloo/allreduce.h)
SIZES = [4 << 10, 64 << 10, 256 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 10 << 20, 16 << 20, 32 << 20, 64 << 20]


def _worker(rank, port, rounds, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    peer = 1 - rank
    seg = SEGMENT_BYTES // 4
    bufs = {s: torch.ones(s // 4) for s in SIZES}
    walk_buffer = torch.ones(max(SIZES) // 4)
    hot_send, hot_recv = torch.ones(seg), torch.empty(seg)

    def exchange(send, recv):
        s = dist.isend(send, peer)
        r = dist.irecv(recv, peer)
        s.wait()
        r.wait()

    def walk(size):
        """(median slice, whole walk) seconds per MiB of one walk through `size` bytes."""
        t = host_microbench.walk_exchange_times(walk_buffer, size, peer)
        return statistics.median(t), sum(t) / len(t)

    times = {s: {"allreduce": [], "walk": []} for s in SIZES}
    hot = []
    for r in range(rounds + 2):
        for s in SIZES:
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(bufs[s])
            t = time.perf_counter() - t0
            dist.barrier()
            w = walk(s) if s >= 2 * SEGMENT_BYTES else None
            dist.barrier()
            t0 = time.perf_counter()
            exchange(hot_send, hot_recv)
            h = time.perf_counter() - t0
            if r >= 2:  # two warm-up rounds
                times[s]["allreduce"].append(t)
                if w is not None:
                    times[s]["walk"].append(w)
                hot.append(h)
    if rank == 0:
        queue.put((times, hot))
    dist.barrier()
    dist.destroy_process_group()


def model_times(dptwin, source_dir):
    """The twin's all-reduce time per size (seconds), from `dptwin bench` on host-cpu-gloo."""
    hw = os.path.join(source_dir, "scenarios", "hardware", "host-cpu-gloo.yaml")
    out = {}
    for size in SIZES:
        cmd = [dptwin, "bench", "--backend", "sim", "--hardware", hw, "--devices", "2", "-b", str(size), "-e",
               str(size), "--op", "all_reduce", "--json"]
        doc = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout)
        out.update({int(r["size"]): r["time_us"] * 1e-6 for r in doc["rows"]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dptwin", nargs="?", help="the dptwin binary (prints the model's times)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    source_dir = os.path.dirname(os.path.dirname(here))
    model = model_times(args.dptwin, source_dir) if args.dptwin else {}
    load_before = os.getloadavg()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, port, args.rounds, queue)) for r in range(2)]
    for p in procs:
        p.start()
    times, hot = queue.get(timeout=1800)
    for p in procs:
        p.join()
    load_after = os.getloadavg()
    print(f"# torch {torch.__version__}; {args.rounds} rounds; load average before {load_before[0]:.2f}, "
          f"after {load_after[0]:.2f} ({os.cpu_count()} cores)")
    print(f"# 1 MiB exchange, cache-warm: fastest {SEGMENT_BYTES / min(hot) / 1e9:.2f} GB/s, "
          f"median {SEGMENT_BYTES / statistics.median(hot) / 1e9:.2f} GB/s")
    print(f"{'size':>9} {'fastest':>10} {'median':>10} {'model':>10} {'walk GB/s':>10} {'as block':>9}")
    rows = []
    for s in SIZES:
        ar, wk = times[s]["allreduce"], times[s]["walk"]
        row = {"bytes": s, "fastest_s": min(ar), "median_s": statistics.median(ar), "model_s": model.get(s),
               "walk_bytes_per_s": SEGMENT_BYTES / min(w[0] for w in wk) if wk else None,
               "walk_block_bytes_per_s": SEGMENT_BYTES / min(w[1] for w in wk) if wk else None}
        rows.append(row)
        m = f"{row['model_s'] * 1e3:8.3f}ms" if row["model_s"] else f"{'-':>10}"
        wkt = (f"{row['walk_bytes_per_s'] / 1e9:10.2f} {row['walk_block_bytes_per_s'] / 1e9:9.2f}" if wk
               else f"{'-':>10} {'-':>9}")
        print(f"{s // 1024:>6}KiB {row['fastest_s'] * 1e3:8.3f}ms {row['median_s'] * 1e3:8.3f}ms {m} {wkt}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "load_average_before": load_before, "load_average_after": load_after}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
