"""PyTorch side of verify/bench_step: one training step (zero_grad, forward,
MSE loss, backward, SGD step) of the same MLP on the CPU with one thread.
Prints one JSON line: the per-step times in seconds (wall and process CPU time)
and the run's conditions, with the BLAS library and core this torch runs on.
Run with Debian's torch: /usr/bin/python3 bench_step_torch.py --widths 1024-4096-4096-1024 --batch 256."""
import argparse
import ctypes
import json
import os
import time

import torch


def blas_in_use():
    """The BLAS library mapped into this process and, for OpenBLAS, its core."""
    with open("/proc/self/maps") as f:
        libs = sorted({l.split()[-1] for l in f if "blas" in l.split()[-1].lower()})
    for lib in libs:
        if "openblas" in lib:
            try:
                core = ctypes.CDLL(lib).openblas_get_corename
                core.restype = ctypes.c_char_p
                return "OpenBLAS %s (%s)" % (core().decode(), lib)
            except (OSError, AttributeError):
                pass
    return ", ".join(libs) or "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="1024-4096-4096-1024")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5, help="timed steps")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    widths = [int(w) for w in args.widths.split("-")]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.MSELoss()
    x = torch.randn(args.batch, widths[0])
    y = torch.randn(args.batch, widths[-1])

    def step():
        opt.zero_grad()  # PyTorch 1.13's default: set_to_none=False, gradients zero-filled
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    times, cpu_times = [], []
    for _ in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    print(json.dumps({"times_s": times, "cpu_times_s": cpu_times, "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "blas": blas_in_use(),
                      "os_threads": len(os.listdir("/proc/self/task"))}))


if __name__ == "__main__":
    main()
