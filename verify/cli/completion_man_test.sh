#!/usr/bin/env bash
# Shell completion and the man page, generated from the command line's own flag
# table: the bash script parses and completes commands, sub-commands, flags and
# library names as bash would (COMP_WORDS/COMP_CWORD driven by hand); the zsh
# script parses (when zsh is installed); the man page renders without a groff
# warning; and every command dptwin lists appears in all three.
# Usage: completion_man_test.sh path/to/dptwin
set -uo pipefail
exe=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$exe" completion bash >"$tmp/dptwin.bash" || fail "completion bash exited $?"
"$exe" completion zsh >"$tmp/_dptwin" || fail "completion zsh exited $?"
"$exe" man >"$tmp/dptwin.1" || fail "man exited $?"
bash -n "$tmp/dptwin.bash" || fail "the bash completion does not parse"
if command -v zsh >/dev/null 2>&1; then zsh -n "$tmp/_dptwin" || fail "the zsh completion does not parse"; fi

# The commands as the unknown-command message lists them.
commands=$("$exe" no-such-command 2>&1 | sed -n 's/^Commands: //p')
[ -n "$commands" ] || fail "no command list from dptwin"

# complete WORDS...: the candidates bash would offer for the last word.
complete_words() {
  bash -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
    compopt() { :; }
    _dptwin
    printf "%s\n" "${COMPREPLY[@]}"' _ "$tmp/dptwin.bash" "$@"
}
# Candidates are captured before grep reads them: grep -q stopping early would
# fail the pipeline (SIGPIPE under pipefail) in a folder with many files.
offers() {  # offers WORD WORDS...: the completion of WORDS offers WORD
  local want=$1 got; shift
  got=$(complete_words "$@")
  grep -qx -- "$want" <<<"$got"
}
expect() {
  offers "$@" || { local want=$1; shift; fail "completing '$*' does not offer '$want': $(complete_words "$@" | tr '\n' ' ')"; }
}
expect predict dptwin pred
expect --hardware dptwin predict --hard
expect dgx-h100-cluster dptwin predict --hardware dgx-h100
expect resnet50 dptwin sweep S.yaml --model res
expect show dptwin hardware ""
expect --json dptwin hardware list --js
expect --shard dptwin sweep S.yaml --sh
# A flag's value is a file, not a flag: after -o the candidates are files.
touch "$tmp/results-file.json"
(cd "$tmp" && offers results-file.json dptwin sweep S.yaml -o results-) || fail "-o does not complete files"
# ... only files: a short name takes its value as its long name does (-o and -j offered flags).
(cd "$tmp" && offers --json dptwin sweep S.yaml -o "") && fail "-o offers flags"
# The NAME of hardware show and model show: the library's names (they offered nothing).
expect dgx-h100 dptwin hardware show dgx-h1
expect resnet50 dptwin model show res
# A flag whose values are a fixed set completes them, not file names (it listed files;
# found by an outside-user review): from with_choices and from CLI11's IsMember alike.
expect ddp dptwin train --strategy ""
expect bf16-amp dptwin predict --precision bf
expect LL128 dptwin bench --proto LL
expect correctness dptwin verify --only ""
expect fp16_compress dptwin predict --comm-hook fp16
expect every dptwin predict --checkpoint ev
expect bf16_compress dptwin train --comm-hook bf
(cd "$tmp" && offers results-file.json dptwin train --strategy "") && fail "--strategy offers files"
grep -q -- "--strategy\[single | dp | ddp\]:value:(single dp ddp)" "$tmp/_dptwin" || fail "zsh does not list --strategy's values"
# No flag of another command leaks in.
offers --shard dptwin split --sh && fail "split offers sweep's --shard"

for c in $commands; do
  grep -q "^\.SS \"dptwin $c\"" "$tmp/dptwin.1" || fail "the man page has no section for '$c'"
  offers "$c" dptwin "$c" || fail "bash does not complete '$c'"
  grep -q "^        '$c:" "$tmp/_dptwin" || fail "zsh does not list '$c'"
done
# Every flag of predict (from its --help) is in the man page and completes.
for flag in $("$exe" predict --help | grep -o -- ' --[a-z][a-z0-9-]*' | sort -u); do
  roff=${flag//-/\\-}  # the man page writes every hyphen of a flag as \-
  grep -qF -- "\\fB$roff\\fR" "$tmp/dptwin.1" || fail "man page lacks predict's $flag"
  offers "$flag" dptwin predict "$flag" || fail "bash does not complete predict's $flag"
done
if command -v groff >/dev/null 2>&1; then
  warnings=$(groff -man -Tutf8 -ww -z "$tmp/dptwin.1" 2>&1)
  [ -z "$warnings" ] || fail "groff warns: $warnings"
fi
echo "completion_man_test: ok ($(echo $commands | wc -w) commands)"
