#!/bin/bash
# Two sweeps started together into one --report directory, ten times. Invariant:
# the report is always one sweep's whole report (report.html and report.md name the
# same scenario); each sweep either wrote it (exit 0) or was refused before running
# (exit 2, naming the lock). Without the lock 3 of 150 such pairs left a mixed report.
set -u
dptwin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$tmp"
for name in alpha bravo; do
  printf 'schema_version: 1\nname: %s\nhardware: dgx-a100\nmodel: resnet50\nstrategy: ddp\nbatch_per_device: 32\nsweep:\n  devices: [1, 2]\n' \
    "$name" > "$name.yaml"
done
written=0 refused=0
for i in $(seq 1 10); do
  "$dptwin" sweep alpha.yaml --jobs 1 --report rep > /dev/null 2> a.err & pa=$!
  "$dptwin" sweep bravo.yaml --jobs 1 --report rep > /dev/null 2> b.err & pb=$!
  wait $pa; ra=$?; wait $pb; rb=$?
  for pair in "$ra a.err" "$rb b.err"; do
    set -- $pair
    case $1 in
      0) written=$((written + 1)) ;;
      2) grep -q "another dptwin is writing a report into this directory" "$2" || fail "exit 2 without the lock: $(cat "$2")"
         refused=$((refused + 1)) ;;
      *) fail "round $i: a sweep exited $1: $(cat "$2")" ;;
    esac
  done
  html=$(grep -o 'alpha\|bravo' rep/report.html | sort -u | tr '\n' ' ')
  md=$(grep -o 'alpha\|bravo' rep/report.md | sort -u | tr '\n' ' ')
  [ -n "$html" ] || fail "round $i: report.html names no scenario"
  [ "$html" = "$md" ] || fail "round $i: mixed report: report.html names '$html', report.md '$md'"
done
[ $written -ge 10 ] || fail "only $written of 20 sweeps wrote the report"
echo "20 sweeps in 10 concurrent pairs: $written wrote the report, $refused refused, 0 mixed reports"
