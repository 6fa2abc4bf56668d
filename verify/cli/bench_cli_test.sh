#!/usr/bin/env bash
# `dptwin bench --backend host` end to end: exit 0, a valid dptwin.bench/1 file
# with exact collectives, nccl-tests' columns in the text, the host GEMM kernels
# named (as in `dptwin verify`); `--backend cuda`
# without a GPU exits 2 naming the CUDA runtime's reason.
set -uo pipefail
dptwin=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$dptwin" bench --backend host --devices 2 -b 64 -e 64K -f 32 -n 2 -w 1 --gemm-size 64 --copy-bytes 1M \
  --out "$tmp/bench.json" > "$tmp/bench.txt" 2>&1 || fail "bench --backend host exited $?: $(cat "$tmp/bench.txt")"
grep -q '#       size         count      type   redop    root     time   algbw   busbw  #wrong' "$tmp/bench.txt" \
  || fail "no nccl-tests column header in: $(head -40 "$tmp/bench.txt")"
[ "$(grep -c '^# Collective test starting:' "$tmp/bench.txt")" = 5 ] || fail "expected 5 sweeps"
# The host GEMM kernels are named, in bench and in verify.
grep -Eq '^# gemm: f32 oneDNN .*; f64 OpenBLAS ' "$tmp/bench.txt" || fail "no '# gemm:' line in: $(head -5 "$tmp/bench.txt")"
"$dptwin" verify --backend host --only correctness --cases 1 --seed 1 > "$tmp/verify.txt" 2>&1 \
  || fail "verify --backend host exited $?: $(cat "$tmp/verify.txt")"
grep -Eq '^host GEMM: f32 oneDNN .*; f64 OpenBLAS ' "$tmp/verify.txt" || fail "no 'host GEMM:' line in: $(head -5 "$tmp/verify.txt")"
grep -q '^# Out of bounds values : 0 OK' "$tmp/bench.txt" || fail "a sweep reported wrong values"
/usr/bin/python3 - "$tmp/bench.json" <<'PY' || fail "bad JSON document"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "dptwin.bench/1", d["schema"]
assert d["backend"] == "host"
assert {g["dtype"] for g in d["gemm"]} == {"f32", "f64"}
assert {b["kind"] for b in d["bandwidth"]} == {"memory", "h2d", "d2h", "peer"}
assert [c["collective"] for c in d["collectives"]] == ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"]
for c in d["collectives"]:
    assert c["rows"], c["collective"]
    for r in c["rows"]:
        assert r["wrong"] == 0, (c["collective"], r)
PY

out=$("$dptwin" bench --backend cuda -b 8 -e 8 2>&1); rc=$?
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  [ "$rc" = 0 ] || fail "bench --backend cuda exited $rc on a GPU machine: $out"
else
  [ "$rc" = 2 ] || fail "bench --backend cuda without a GPU exited $rc, expected 2: $out"
  grep -Eq "no CUDA device|built without the CUDA backend" <<<"$out" || fail "bench --backend cuda says: $out"
fi
echo PASS
