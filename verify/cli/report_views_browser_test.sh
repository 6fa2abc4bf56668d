#!/usr/bin/env bash
# Three reports rendered by headless Chromium (Debian's chromium), as a reader opens
# them: the default report, the bucket-size what-if and a capacity plan. In the
# rendered DOM: the swept field is a table column and the throughput chart's x-axis
# (bucket-size), every report has its Assumptions section, and the memory chart
# draws the GPUs' capacity line. Screenshots are kept: OUT_DIR/{default,bucket,plan}.png.
# The column check is shown to fail on the default report, which sweeps no such field.
# Usage: report_views_browser_test.sh DPTWIN_EXE SCENARIOS_DIR OUT_DIR
# Exit: 0 pass, 1 fail, 77 skipped (no chromium).
set -euo pipefail
exe=$1
scenarios=$2
out=$3
source "$(dirname "${BASH_SOURCE[0]}")/chromium_setup.sh"
rm -rf "$out"
mkdir -p "$out"
cd "$out"
"$exe" report -o default >default-stdout.txt
"$exe" report "$scenarios/whatif/bucket-size.yaml" -o bucket >bucket-stdout.txt
# A small plan (two candidates, up to 16 GPUs) keeps the test short; exit 1 would mean no winner.
"$exe" plan --model resnet50 --target-samples-per-s 10000 --hardware dgx-a100-cluster:2.40 \
  --hardware dgx-h100-cluster:4.50 --strategies ddp --max-gpus 16 --currency USD --report plan >plan-stdout.txt
chromium_headless_flags
for r in default bucket plan; do
  timeout 120 "$chromium" "${flags[@]}" --dump-dom "file://$out/$r/report.html" >"$r-dom.html" 2>"$r-dom.log"
  timeout 120 "$chromium" "${flags[@]}" --window-size=1100,3000 --screenshot="$out/$r.png" \
    "file://$out/$r/report.html" >/dev/null 2>"$r-screenshot.log"
done
fail=0
check() {  # check NAME FILE PATTERN: the fixed string must be in the rendered page
  if ! grep -qF -- "$3" "$2"; then echo "FAIL: $1 ($2 lacks '$3')"; fail=1; fi
}
swept_column='<th class="num">DDP bucket size (MiB)</th>'
swept_axis='>DDP bucket size (MiB)</text>'
check "bucket-size: swept field as a column" bucket-dom.html "$swept_column"
check "bucket-size: swept field as the x-axis" bucket-dom.html "$swept_axis"
# The same checks must fail on a report that sweeps no bucket size.
if grep -qF -- "$swept_column" default-dom.html || grep -qF -- "$swept_axis" default-dom.html; then
  echo "FAIL: the swept-field checks pass on the default report: they prove nothing"
  fail=1
fi
for r in default bucket plan; do
  check "$r: assumptions section" "$r-dom.html" '<h2>Assumptions</h2>'
  check "$r: simulated, not measured" "$r-dom.html" 'simulated by the dptwin twin'
  check "$r: memory chart" "$r-dom.html" 'id="chart-memory"'
  [ -s "$out/$r.png" ] || { echo "FAIL: no screenshot $r.png"; fail=1; }
done
check "default: capacity line" default-dom.html '>capacity 80.00 GiB</text>'
check "bucket-size: capacity line" bucket-dom.html '>capacity 44.99 GiB</text>'  # L40S: 46,068 MiB, what CUDA reports
check "plan: verdicts with a currency" plan-dom.html 'price per hour (USD)'
check "plan: a winner" plan-dom.html 'winner: cheapest configuration that meets the target'
if grep -q "<title>gnuplot_plot_\|id=\"gnuplot_" default-dom.html bucket-dom.html plan-dom.html; then
  echo "FAIL: SVG tooltips say gnuplot_plot_N, or ids repeat across the page's charts"
  fail=1
fi
[ "$fail" -eq 0 ] && echo "PASS: swept-field column and axis, assumptions, capacity lines; screenshots in $out"
exit "$fail"
