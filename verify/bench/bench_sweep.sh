#!/usr/bin/env bash
# Benchmark (prints figures; no pass/fail): the wall time and CPU time of
#  1. the sweep of ResNet-50 over 1-64 GPUs x 3 hardware files x 2 strategies
#     (scenarios/whatif/resnet50-scaling.yaml) with --jobs 2, target <= 60 s on
#     2 cores, and
#  2. the quick start (`dptwin report` on the embedded default), target < 30 s.
# CPU time (user + system of every process) is printed beside the wall time: on a
# shared machine the wall time includes waiting for other people's work.
# Usage: verify/bench/bench_sweep.sh [DPTWIN_EXE]   (default: build/release/scenarios/dptwin)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
exe=$(realpath "${1:-$root/build/release/scenarios/dptwin}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
python3 - "$exe" "$root" <<'PY'
import json, os, resource, subprocess, sys, time
exe, root = sys.argv[1], sys.argv[2]

def timed(args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    rc = subprocess.run([exe] + args, stdout=subprocess.DEVNULL).returncode
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rc, wall, cpu

rc, wall, cpu = timed(["sweep", os.path.join(root, "scenarios/whatif/resnet50-scaling.yaml"), "--jobs", "2",
                       "-o", "sweep.json"])
points = json.load(open("sweep.json"))["points"]
by = {}
for p in points:
    by[p["status"]] = by.get(p["status"], 0) + 1
detail = ", ".join(f"{n} {s}" for s, n in sorted(by.items()))
print(f"bench_sweep: ResNet-50, 1-64 GPUs x 3 hardware x 2 strategies: {len(points)} points ({detail}) "
      f"in {wall:.1f} s wall, {cpu:.1f} s CPU, --jobs 2 (target <= 60 s on 2 cores; exit {rc})")
rc, wall, cpu = timed(["report", "--report", "quickstart"])
print(f"bench_sweep: quick start (dptwin report, default scenario): {wall:.1f} s wall, {cpu:.1f} s CPU "
      f"(target < 30 s; exit {rc})")
PY
