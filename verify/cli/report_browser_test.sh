#!/usr/bin/env bash
# Opens a dptwin report in headless Chromium (Debian's chromium, installed by
# ci/install-deps): the page loads with no console messages, its four charts are
# inline SVG in the rendered DOM, and the answer is on the page. A screenshot is
# kept as a test artifact: OUT_DIR/report.png.
# Usage: report_browser_test.sh DPTWIN_EXE OUT_DIR
# Exit: 0 pass, 1 fail, 77 skipped (no chromium; ctest reports the reason).
set -euo pipefail
exe=$1
out=$2
source "$(dirname "${BASH_SOURCE[0]}")/chromium_setup.sh"
rm -rf "$out"
mkdir -p "$out"
cd "$out"
# The quick start's report: what a new user opens first.
"$exe" report -o report >report-stdout.txt
page="file://$out/report/report.html"
chromium_headless_flags
flags+=(--enable-logging=stderr --v=0)
timeout 120 "$chromium" "${flags[@]}" --dump-dom "$page" >dom.html 2>chromium-dom.log
timeout 120 "$chromium" "${flags[@]}" --window-size=1100,2600 --screenshot="$out/report.png" "$page" \
  >/dev/null 2>chromium-screenshot.log
fail=0
# The console check must be able to fail: a planted page that logs an error has to show up.
printf '<!DOCTYPE html><html><body><script>console.error("planted console error")</script></body></html>' >planted.html
timeout 120 "$chromium" "${flags[@]}" --dump-dom "file://$out/planted.html" >/dev/null 2>chromium-planted.log
if ! grep -q 'CONSOLE.*planted console error' chromium-planted.log; then
  echo "FAIL: the planted console error was not seen; the console check below would prove nothing"
  fail=1
fi
# Console messages (errors, warnings, logs) appear as CONSOLE lines; the page has no script, so none is expected.
if grep -h "CONSOLE" chromium-dom.log chromium-screenshot.log; then
  echo "FAIL: the page wrote to the console (above)"
  fail=1
fi
svgs=$(grep -o "<svg" dom.html | wc -l)
if [ "$svgs" -ne 4 ]; then
  echo "FAIL: expected 4 inline SVG charts in the rendered page, found $svgs"
  fail=1
fi
for id in chart-throughput chart-efficiency chart-breakdown chart-memory; do
  grep -q "id=\"$id\"" dom.html || { echo "FAIL: chart $id missing from the rendered page"; fail=1; }
done
grep -q '<p class="answer" id="answer"><strong>Answer.</strong> ' dom.html || { echo "FAIL: no answer on the page"; fail=1; }
if [ ! -s "$out/report.png" ]; then
  echo "FAIL: no screenshot written"
  fail=1
fi
[ "$fail" -eq 0 ] && echo "PASS: report.html loads with no console messages, 4 charts present; screenshot $out/report.png"
exit "$fail"
