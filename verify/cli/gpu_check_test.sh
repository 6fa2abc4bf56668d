#!/usr/bin/env bash
# The parts of ci/gpu-check that run without a GPU: its flags, its probe, and a
# clear refusal (exit 2, saying why, writing nothing) on a machine without GPUs.
set -uo pipefail
script=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

out=$(bash "$script" --help 2>&1); rc=$?
[ "$rc" -eq 0 ] || fail "--help exited $rc"
grep -q "Usage: ci/gpu-check" <<<"$out" || fail "--help does not print the usage: $out"

out=$(bash "$script" --bogus 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "--bogus exited $rc, expected 2"
grep -q "unknown flag '--bogus'" <<<"$out" || fail "--bogus message: $out"

out=$(bash "$script" --bundle "$tmp/no-such.tar.xz" 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "--bundle with a missing file exited $rc, expected 2"
grep -q "no-such.tar.xz': no such file" <<<"$out" || fail "--bundle message: $out"

has_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then has_gpu=1; fi
out=$(bash "$script" --probe 2>&1); rc=$?
if [ "$has_gpu" = 1 ]; then
  [ "$rc" -eq 0 ] || fail "--probe exited $rc on a machine with GPUs: $out"
  echo "PASS (GPU present: probe found it)"
  exit 0
fi
[ "$rc" -eq 2 ] || fail "--probe exited $rc without a GPU, expected 2"
grep -q "no NVIDIA GPU on this machine" <<<"$out" || fail "--probe message: $out"

# A full run without a GPU stops before building and writes no results.
out=$(OUT="$tmp/out" bash "$script" 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "a run without a GPU exited $rc, expected 2"
grep -q "FAILED: no NVIDIA GPU" <<<"$out" || fail "a run without a GPU says: $out"
[ ! -e "$tmp/out" ] || fail "a run without a GPU created \$OUT"
echo "PASS (no GPU: refused with exit 2 and the reason)"
