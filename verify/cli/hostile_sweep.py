#!/usr/bin/env python3
"""Probes the dptwin executable from outside, as a hostile or careless user would.

Three kinds of case, all inside one temporary folder (never a device file):
  flags   every option of every command (read from each --help) given bad values:
          negative, zero, huge, NaN, inf, wrong or missing units, absurd sizes;
  paths   every file and folder argument given a directory, a FIFO, a missing file,
          an empty file, a symbolic-link loop, a name too long, a path below a file;
  yaml    seeded random mutations of the repository's hardware, model and scenario
          files, each run through `dptwin predict`.
Invariant of every case: the process ends within the per-run timeout (six times it
for a sweep) with exit 0 or 1 (a run that finished and found a failure: out of
memory, a target missed), or exit 2 with a message that names what was wrong (the
flag, the file or the key), and leaves no output file behind an exit 2 or 3.
A signal, a hang, exit 2 naming nothing, or exit 3 (reserved for runs that failed
while running, not for bad input) is a failure; failures are printed with the exact
command line. Exit status: 0 when no case failed, 1 otherwise.

  verify/cli/hostile_sweep.py build/release/scenarios/dptwin --mutations 2000      (everything)
  verify/cli/hostile_sweep.py build/release/scenarios/dptwin --sample 150 --mutations 100   (CI)
"""
import argparse
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "scenarios"

BAD_NUMBERS = ["-1", "0", "-0", "nan", "inf", "-inf", "1e308", "1e-308", "1e-30", "2147483648",
               "4294967297", "9223372036854775807", "99999999999999999999999", "0x10", "1,5", "",
               "abc", "1e", " 3"]
BAD_SIZES = ["0", "-1G", "1.5", "0.5", "8589934591G", "64G", "1e30", "1 GB", "1GiB", "1X", "G", "nan"]

OVERRIDES = ["gpu.memory=-1 GiB", "gpu.memory=0 GiB", "gpu.memory=1e300 GiB", "gpu.memory=40", "gpu.memory=nan GiB",
             "gpu.launch_latency=1e300 s", "gpu.launch_latency=5", "pcie.latency=1e20 s", "nodes=4294967297",
             "no.such.field=1", "gpu.memory", "=1", "gpu.memory=40 GiB=2", "host.dispatch_cost=9223372036854775807"]

# A command line each command accepts, so that the flag under test is what fails.
BASE = {
    "predict": ["--hardware", "desktop-2gpu-pcie-p2p", "--model", "mlp:8-8-8", "--strategy", "ddp",
                "--devices", "2", "--batch", "4"],
    "sweep": ["{lib}/whatif/pcie-p2p.yaml", "-j", "1"],
    "report": ["{lib}/whatif/pcie-p2p.yaml"],
    "plan": ["--model", "resnet50", "--target-samples-per-s", "1000", "--hardware", "dgx-a100:2.40",
             "--max-gpus", "8"],
    "train": ["--model", "mlp:4-4-2", "--strategy", "ddp", "--devices", "2", "--batch", "4", "--steps", "1"],
    "split": ["--batch", "8", "--devices", "2"],
    "bench": ["--backend", "sim", "--hardware", "desktop-2gpu-pcie-p2p", "-b", "1K", "-e", "4K"],
    "verify": ["--backend", "host", "--devices", "2", "--only", "correctness", "--seed", "1"],
    "compare": ["{lib}/whatif/resnet50-dgx-a100-ddp.yaml", "{lib}/whatif/resnet50-dgx-a100-dp.yaml"],
    "lesson": [],
    "hardware": ["show", "dgx-h100"],
    "model": ["show", "resnet50"],
    "fidelity": ["--only", "autodl-2080ti-allreduce-32KiB"],
    "calibrate": ["--hardware", "dgx-a100", "--from", "{repo}/verify/data/nccl-tests/dgx-a100-8gpu-all_reduce-v2.log"],
    "merge": ["{repo}/verify/fuzz/seeds/json/sweep-pcie-p2p.json"],
    "completion": ["bash"],
    "version": [],
}
# Options that take a path to read (in) or to write (out).
PATH_IN = {"--hardware", "--model", "--init", "--data", "--dir", "--library", "scenario", "input"}
PATH_OUT = {"-o", "--out", "--trace", "--report", "--trace-dir", "--checkpoint", "--junit", "--save"}


def run(exe, args, cwd, timeout_s):
    try:
        p = subprocess.run([exe] + args, cwd=cwd, capture_output=True, timeout=timeout_s, text=True,
                           errors="replace", stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", "", ""


def commands(exe, tmp):
    _, out, _ = run(exe, ["--help"], tmp, 10)
    names = []
    for line in out.splitlines():
        m = re.match(r"^  ([a-z][a-z-]+)\s{2,}\S", line)
        if m and m.group(1) not in ("help",):
            names.append(m.group(1))
    return names


def options(exe, cmd, tmp):
    """(names, takes a value) for each option in `dptwin CMD --help`: names holds the
    long name first, then the short one if any. CLI11 prints a value's type (INT,
    TEXT:{a,b}=a, FLOAT ...) one space after the name, the description two or more."""
    _, out, _ = run(exe, [cmd, "--help"], tmp, 10)
    found = []
    for line in out.splitlines():
        m = re.match(r"^\s+(?:(-\w),)?(--[\w-]+)(?: ([A-Z]+(?:[:= ]\S*)?))?(?:\s|$)", line)
        if not m or m.group(2) in ("--help", "--version"):
            continue
        found.append(([m.group(2)] + ([m.group(1)] if m.group(1) else []), m.group(3) is not None))
    return found


def names_something(err, words):
    """A clean error names at least one of `words` (flag, file, key) and is one or a few lines."""
    return any(w and w in err for w in words) and "terminate called" not in err and "std::" not in err


class Sweep:
    def __init__(self, exe, tmp, timeout_s, jobs):
        self.exe, self.tmp, self.timeout_s, self.jobs = exe, Path(tmp), timeout_s, jobs
        self.cases = []  # (category, args, words a clean error may name, output path or None)
        self.counts = {}
        self.failures = []

    def add(self, cat, args, words, out=None):
        self.cases.append((cat, [a.replace("{lib}", str(LIB)).replace("{repo}", str(REPO)) for a in args], words, out))

    def judge(self, case):
        cat, args, words, out = case
        if out is not None and out.exists():
            out.unlink() if out.is_file() and not out.is_symlink() else None
        # A sweep predicts every point of its axes: allow it several predictions' time. Each case
        # runs in a directory of its own: cases run --jobs at a time, and two `report` runs in one
        # directory contend for its default dptwin-report/ (the second rightly refuses the lock).
        cwd = tempfile.mkdtemp(prefix="case-", dir=self.tmp)
        rc, _, err = run(self.exe, args, cwd, self.timeout_s * (6 if args[0] == "sweep" else 1))
        why = None
        if rc == "timeout":
            why = f"no end within {self.timeout_s} s"
        elif rc < 0:
            why = f"killed by signal {-rc}"
        elif rc == 2 and not names_something(err, words):
            why = "exit 2 naming none of " + ", ".join(w for w in words if w)
        elif rc == 3:
            why = "exit 3 for bad input"
        elif rc not in (0, 1, 2):
            why = f"exit {rc}"
        elif rc >= 2 and out is not None and out.is_file() and out.stat().st_size > 0:
            why = f"exit {rc} left {out.name} behind"
        return cat, args, rc, why, err.strip().splitlines()[-1:] if err.strip() else []

    def run_all(self):
        with ThreadPoolExecutor(self.jobs) as pool:
            for cat, args, rc, why, last in pool.map(self.judge, self.cases):
                c = self.counts.setdefault(cat, {"tried": 0, "exit 0/1": 0, "exit 2": 0, "failed": 0})
                c["tried"] += 1
                if why:
                    c["failed"] += 1
                    self.failures.append((cat, args, why, last))
                elif rc == 2:
                    c["exit 2"] += 1
                else:
                    c["exit 0/1"] += 1


def flag_cases(sw, exe):
    for cmd in commands(exe, sw.tmp):
        base = BASE.get(cmd, [])
        for names, takes in options(exe, cmd, sw.tmp):
            flag = names[0]
            if flag in PATH_IN or flag in PATH_OUT or not takes:
                continue
            values = BAD_SIZES if set(names) & {"-b", "-e", "--copy-bytes"} else BAD_NUMBERS
            # plan and report read flags as scenario keys: "batch_per_device" names --batch-per-device.
            words = names + [flag.lstrip("-").replace("-", "_") + ":"]
            for v in values:
                sw.add("flags", [cmd] + base + [flag, v], words)
            sw.add("flags", [cmd] + base + [flag], names)  # value missing
        if any(names[0] == "--override" for names, _ in options(exe, cmd, sw.tmp)):
            for v in OVERRIDES:
                sw.add("flags", [cmd] + base + ["--override", v], ["--override", v.partition("=")[0]])


# Failures found by this sweep and not fixed yet, by (command, flag): reported as OPEN, not
# counted, so that the sweep fails on anything new. Fix one, then remove its line.
KNOWN_OPEN = {}  # every path case found open before is fixed (cli_limits_test carries them)


def known_open(args):
    """The KNOWN_OPEN reason of a failed path case, or None."""
    for (cmd, flag), why in KNOWN_OPEN.items():
        if args and args[0] == cmd and flag in args:
            return why
    return None


def path_cases(sw, exe):
    t = sw.tmp
    (t / "a-dir").mkdir(exist_ok=True)
    (t / "empty.yaml").write_text("")
    (t / "plain-file").write_text("x\n")
    if not (t / "fifo").exists():
        os.mkfifo(t / "fifo")
    for a, b in (("loop-a", "loop-b"), ("loop-b", "loop-a")):
        if not (t / a).is_symlink():
            os.symlink(t / b, t / a)
    bad = {"dir": str(t / "a-dir"), "fifo": str(t / "fifo"), "missing": str(t / "no-such.yaml"),
           "empty": str(t / "empty.yaml"), "loop": str(t / "loop-a"), "long": str(t / ("n" * 300 + ".yaml")),
           "below-file": str(t / "plain-file" / "x.yaml")}
    for cmd in commands(exe, sw.tmp):
        base = BASE.get(cmd, [])
        flags = [n for n, takes in options(exe, cmd, sw.tmp) if takes and (n[0] in PATH_IN or n[0] in PATH_OUT)]
        for names in flags:
            flag = names[0]
            for kind, p in bad.items():
                if flag in PATH_OUT and kind in ("missing", "empty", "fifo"):
                    continue  # a new file, a file to replace; a FIFO gets the bytes written through
                # any of the flag's names (-o or --out) counts as naming it
                words = list(names) + [Path(p).name[:40], "a-dir", "fifo", "loop-a", "plain-file",
                                       "File name too long", "too long"]
                sw.add("paths", [cmd] + base + [flag, p], words)
    for cmd in ("sweep", "report", "compare", "predict"):
        for kind, p in bad.items():
            # compare needs two inputs: the bad one and a good one, so that the bad one is what fails
            good = [BASE["compare"][0].format(lib=LIB, repo=REPO)] if cmd == "compare" else []
            sw.add("paths", [cmd, p] + good, [Path(p).name[:40], "a-dir", "fifo", "loop-a", "plain-file", "too long"])


def mutate(text, rng):
    lines = text.splitlines()
    if not lines:
        return text
    i = rng.randrange(len(lines))
    op = rng.randrange(9)
    nums = list(re.finditer(r"-?\d+(\.\d+)?(e[-+]?\d+)?", lines[i]))
    if op == 0:
        del lines[i]
    elif op == 1:
        lines.insert(i, lines[i])  # a duplicate key
    elif op == 2 and nums:
        m = rng.choice(nums)
        v = rng.choice(["0", "-1", "1e300", "1e-300", "nan", ".inf", "-.inf", "9223372036854775807",
                        "4294967297", "18446744073709551616", "0.0", "1e20"])
        lines[i] = lines[i][:m.start()] + v + lines[i][m.end():]
    elif op == 3 and ":" in lines[i]:
        k, _, _ = lines[i].partition(":")
        lines[i] = k + ": " + rng.choice(["!!binary AAAA", "[", "{a: 1}", "~", "''", "[1, 2]", "&a x", "*b",
                                          "yes", "1 parsec", "-5 GiB", "1e300 s"])
    elif op == 4:
        lines[i] = " " * rng.randrange(1, 5) + lines[i]
    elif op == 5:
        lines = lines[: i + 1]  # truncated
    elif op == 6 and nums:
        m = rng.choice(nums)
        lines[i] = lines[i][: m.end()] + rng.choice([" s", " GiB", " GB/s", " ms", " parsec", "%", " B"]) + \
            lines[i][m.end():]
    elif op == 7:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    else:
        s = lines[i]
        if s:
            p = rng.randrange(len(s))
            lines[i] = s[:p] + rng.choice(["\t", "#", "\"", "'", "\\", "\x00", "%", "@", "é"]) + s[p + 1:]
    return "\n".join(lines) + "\n"


def yaml_cases(sw, n, seed):
    rng = random.Random(seed)
    hw = sorted((LIB / "hardware").glob("*.yaml"))
    models = sorted((LIB / "models").glob("*.yaml"))
    whatif = sorted(p for p in (LIB / "whatif").glob("*.yaml") if "memory" not in p.name and "plan" not in p.name)
    d = sw.tmp / "mutants"
    d.mkdir(exist_ok=True)
    for k in range(n):
        kind = rng.choice(["hardware", "hardware", "model", "scenario"])
        src = rng.choice({"hardware": hw, "model": models, "scenario": whatif}[kind])
        text = src.read_text()
        for _ in range(rng.choice([1, 1, 2, 3])):
            text = mutate(text, rng)
        f = d / f"m{k}-{src.name}"
        f.write_text(text, errors="replace")
        out = d / f"m{k}.json"
        if kind == "hardware":
            args = ["predict", "--hardware", str(f), "--model", "mlp:16-16-16", "--strategy", "ddp", "--batch", "8",
                    "-o", str(out)]
        elif kind == "model":
            args = ["predict", "--hardware", "desktop-2gpu-pcie-p2p", "--model", str(f), "--strategy", "dp",
                    "--devices", "2", "--batch", "8", "-o", str(out)]
        else:
            args = ["sweep" if "scaling" in src.name or "size" in src.name or "generation" in src.name
                    or "p2p" in src.name else "predict", str(f), "-o", str(out)] + \
                (["-j", "1"] if "scaling" in src.name or "size" in src.name or "generation" in src.name
                 or "p2p" in src.name else [])
        sw.add(f"yaml:{kind}", args, [f.name, "line", "key", "--" + kind], out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dptwin")
    ap.add_argument("--mutations", type=int, default=200, help="mutated YAML files run through dptwin")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=10.0, help="per-run limit in seconds")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", choices=["flags", "paths", "yaml"], action="append")
    ap.add_argument("--sample", type=int, default=0,
                    help="run only this many of the flag and path cases, drawn with --seed (0: all of them)")
    a = ap.parse_args()
    exe = str(Path(a.dptwin).resolve())
    with tempfile.TemporaryDirectory(prefix="dptwin-hostile-") as tmp:
        sw = Sweep(exe, tmp, a.timeout, a.jobs)
        only = set(a.only or ["flags", "paths", "yaml"])
        if "flags" in only:
            flag_cases(sw, exe)
        if "paths" in only:
            path_cases(sw, exe)
        if a.sample and a.sample < len(sw.cases):
            sw.cases = random.Random(a.seed).sample(sw.cases, a.sample)
        if "yaml" in only:
            yaml_cases(sw, a.mutations, a.seed)
        sw.run_all()
    still_open = [f for f in sw.failures if f[0] == "paths" and known_open(f[1])]
    sw.failures = [f for f in sw.failures if f not in still_open]
    for cat, args, why, last in still_open:
        print(f"OPEN [{cat}] {why} ({known_open(args)}): dptwin {shlex.join(args)}")
        sw.counts[cat]["failed"] -= 1
        sw.counts[cat]["open"] = sw.counts[cat].get("open", 0) + 1
    for cat, args, why, last in sw.failures:
        print(f"FAIL [{cat}] {why}: dptwin {shlex.join(args)}\n    {last[0] if last else ''}")
    total = {"tried": 0, "failed": 0}
    for cat, c in sorted(sw.counts.items()):
        print(f"{cat:16} tried {c['tried']:6}  exit 0/1 {c['exit 0/1']:6}  exit 2 {c['exit 2']:6}  "
              f"failed {c['failed']:4}  known open {c.get('open', 0):3}")
        total["tried"] += c["tried"]
        total["failed"] += c["failed"]
    print(f"{'all':16} tried {total['tried']:6}  failed {total['failed']:4}")
    return 1 if sw.failures else 0


if __name__ == "__main__":
    sys.exit(main())
