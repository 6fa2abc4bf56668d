#!/bin/bash
# False-alarm check of `dptwin verify --only correctness` over many random seeds, one
# run at a time at low priority (outside CI: 500 seeds take about an hour per backend
# on a shared 2-core machine). Every run on correct code must pass; the log keeps each
# seed's exit code and the first failing line, so a failure can be rerun alone.
# Usage: verify_seeds.sh DPTWIN BACKEND FIRST_SEED COUNT LOG
#   BACKEND: host, or sim (runs the twin of dgx-h100)
set -u
dptwin=$1 backend=$2 first=$3 count=$4 log=$5
args=(verify --backend "$backend" --devices 8 --only correctness)
[ "$backend" = sim ] && args+=(--hardware dgx-h100)
pass=0 fail=0
: > "$log"
for seed in $(seq "$first" $((first + count - 1))); do
  out=$(nice -n 19 "$dptwin" "${args[@]}" --seed "$seed" 2>&1)
  rc=$?
  if [ $rc -eq 0 ]; then
    pass=$((pass + 1))
    echo "seed $seed rc 0" >> "$log"
  else
    fail=$((fail + 1))
    echo "seed $seed rc $rc: $(grep -m1 -i 'fail\|error' <<< "$out")" >> "$log"
  fi
done
echo "$backend: $count seeds from $first: $pass passed, $fail failed" | tee -a "$log"
[ $fail -eq 0 ]
