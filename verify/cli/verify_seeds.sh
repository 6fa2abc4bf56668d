#!/bin/bash
# False-alarm check of `dptwin verify --only correctness` at 8 devices over many seeds,
# one run at a time at low priority (outside CI: a run takes 2-3 s alone and up to
# 20 s on a busy shared machine). Each seed runs on every backend named (default host,
# then sim on the twin of dgx-h100) before the next seed, so a stopped run has covered
# both alike. Every run on correct code must pass; the log keeps each run's exit code
# and its first failing line, so a failure can be rerun alone.
# Usage: verify_seeds.sh DPTWIN FIRST_SEED COUNT LOG [BACKEND...]
set -u
dptwin=$1 first=$2 count=$3 log=$4
shift 4
backends=("$@")
[ ${#backends[@]} -eq 0 ] && backends=(host sim)
declare -A pass fail
for b in "${backends[@]}"; do pass[$b]=0; fail[$b]=0; done
: > "$log"
for seed in $(seq "$first" $((first + count - 1))); do
  for b in "${backends[@]}"; do
    args=(verify --backend "$b" --devices 8 --only correctness --seed "$seed")
    [ "$b" = sim ] && args+=(--hardware dgx-h100)
    out=$(nice -n 19 "$dptwin" "${args[@]}" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
      pass[$b]=$((pass[$b] + 1))
      echo "$b seed $seed rc 0" >> "$log"
    else
      fail[$b]=$((fail[$b] + 1))
      echo "$b seed $seed rc $rc: $(grep -m1 -i 'fail\|error' <<< "$out")" >> "$log"
    fi
  done
done
status=0
for b in "${backends[@]}"; do
  echo "$b: $count seeds from $first: ${pass[$b]} passed, ${fail[$b]} failed" | tee -a "$log"
  [ "${fail[$b]}" -eq 0 ] || status=1
done
exit $status
