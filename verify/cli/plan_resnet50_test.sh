#!/bin/bash
# ResNet-50 at 10,000 samples/s on DGX A100 nodes at 2.40 USD per GPU-hour: the
# answer is 24 A100s (3 nodes, 57.60 USD per hour), which a plan over powers of two
# never tries (it picked 32 A100s at 76.80 USD). Invariant: the winner is the
# cheapest per hour among the configurations meeting the target, checked here from
# the verdicts themselves. Then the plan file (three candidates) runs end to end.
set -u
dptwin=$1
plan=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$dptwin" plan --model resnet50 --target-samples-per-s 10000 --hardware dgx-a100-cluster:2.40 --strategies ddp \
  --max-gpus 32 --currency USD --train-samples 115305030 --json >"$tmp/plan.json" 2>"$tmp/err" \
  || fail "dptwin plan exited $?: $(cat "$tmp/err")"
python3 - "$tmp/plan.json" <<'PY' || exit 1
import json, sys
p = json.load(open(sys.argv[1]))
v = p["verdicts"]
w = v[p["winner"]]
print(p["answer"])
assert w["hardware"] == "dgx-a100-cluster" and w["gpus"] == 24 and w["strategy"] == "ddp", w
assert abs(w["price_per_hour"] - 24 * 2.40) < 1e-9, w
meeting = [x for x in v if x["throughput_samples_per_s"] and x["throughput_samples_per_s"] >= 10000]
assert min(x["price_per_hour"] for x in meeting) == w["price_per_hour"], "a cheaper configuration meets the target"
assert p["currency"] == "USD"
assert w["hours_to_train"] and w["total_cost"], w
infeasible = [x for x in v if x["verdict"] == "infeasible"]
assert all(x["price_per_hour"] is None and x["gpus"] > 0 for x in infeasible), infeasible
PY
"$dptwin" plan "$plan" --json >"$tmp/file.json" 2>"$tmp/err" || fail "dptwin plan $plan exited $?: $(cat "$tmp/err")"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["winner"] is not None and p["currency"] == "USD"; print(p["answer"])' \
  "$tmp/file.json" || fail "the plan file has no winner or no currency"
echo "PASS: the plan names 24 A100s"
