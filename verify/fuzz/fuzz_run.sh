#!/usr/bin/env bash
# Runs one libFuzzer target for ctest and ci/fuzz.
#   fuzz_run.sh replay TARGET CRASH_DIR
#       runs every input recorded in CRASH_DIR once; passes when there are none or
#       each now ends cleanly (a regression test for findings once fixed).
#   fuzz_run.sh fuzz TARGET WORK_DIR SEED_DIR...
#       fuzzes for DPT_FUZZ_SECONDS (default 60) seconds: new inputs go to
#       WORK_DIR/corpus, a crashing input to WORK_DIR/artifacts/ (its path is
#       printed). Fails on any crash, sanitizer report, leak, or an input slower
#       than DPT_FUZZ_INPUT_TIMEOUT_S (default 10) seconds.
set -euo pipefail
mode=${1:?mode: replay or fuzz}; target=${2:?target executable}
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
case "$mode" in
  replay)
    dir=${3:?crash directory}
    mapfile -t inputs < <(find "$dir" -type f ! -name '*.md' 2>/dev/null | sort)
    if [ "${#inputs[@]}" -eq 0 ]; then
      echo "$(basename "$target"): no recorded crash inputs in $dir"
      exit 0
    fi
    echo "$(basename "$target"): replaying ${#inputs[@]} recorded input(s) from $dir"
    exec "$target" -timeout="${DPT_FUZZ_INPUT_TIMEOUT_S:-10}" "${inputs[@]}"
    ;;
  fuzz)
    work=${3:?work directory}; shift 3
    mkdir -p "$work/corpus" "$work/artifacts"
    seconds=${DPT_FUZZ_SECONDS:-60}
    echo "$(basename "$target"): fuzzing for $seconds s from $* (new inputs in $work/corpus)"
    exec "$target" -max_total_time="$seconds" -timeout="${DPT_FUZZ_INPUT_TIMEOUT_S:-10}" -rss_limit_mb=2048 -print_funcs=0 \
      -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$@"
    ;;
  *) echo "fuzz_run.sh: unknown mode '$mode' (replay or fuzz)" >&2; exit 2 ;;
esac
