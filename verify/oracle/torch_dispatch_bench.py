"""Microbenchmark of PyTorch's per-op host cost on one device: the figure a hardware file's
`host.dispatch_cost` stands for ("PyTorch eager per-op host overhead").

For each op (an in-place add on 16 elements, a 16x16 matmul, a ReLU), N calls are issued
back to back; on a GPU the kernels are tiny and the launches asynchronous, so the host's
time per call is the dispatch + launch cost. Also the round trip of one tiny op followed by
a synchronize (launch latency + completion + sync). Median over --rounds rounds.

usage: torch_dispatch_bench.py [--device cuda:0] [--calls 2000] [--rounds 7] [--json FILE]
Prints one line per op in microseconds; --json writes them with the device and versions."""
import argparse
import json
import os
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(dev)) if cuda else (lambda: None)
    x = torch.zeros(16, device=dev)
    a, b = torch.randn(16, 16, device=dev), torch.randn(16, 16, device=dev)
    out = torch.empty(16, 16, device=dev)
    ops = {
        "add_": lambda: x.add_(1.0),
        "mm": lambda: torch.mm(a, b, out=out),
        "relu": lambda: torch.relu(a),
    }
    results = {}
    for name, op in ops.items():
        for _ in range(100):
            op()
        sync()
        per_call = []
        for _ in range(args.rounds):
            sync()
            t0 = time.perf_counter()
            for _ in range(args.calls):
                op()
            per_call.append((time.perf_counter() - t0) / args.calls)  # host time only: no sync inside
            sync()
        results[f"{name}_host_s"] = statistics.median(per_call)
    trips = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        for _ in range(200):
            x.add_(1.0)
            sync()
        trips.append((time.perf_counter() - t0) / 200)
    results["add_sync_round_trip_s"] = statistics.median(trips)
    for k, v in results.items():
        print(f"{k:24} {v * 1e6:8.2f} us")
    if args.json:
        doc = {"schema": "dptwin.torch_dispatch/1", "device": torch.cuda.get_device_name(dev) if cuda else "cpu",
               "torch": torch.__version__, "cuda": torch.version.cuda, "calls": args.calls, "rounds": args.rounds,
               "cpu_count": os.cpu_count(), "results_s": results}
        with open(args.json + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
