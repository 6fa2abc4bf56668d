#!/usr/bin/env bash
# cmake --install into a temporary prefix, then moved elsewhere (the install is
# relocatable): the binary, the scenario library, the completions and the man page
# are where packagers expect them, and the installed binary, run from another
# directory with DPTWIN_SCENARIOS_DIR unset, finds its library beside itself (not
# in the checkout it was built from) and predicts.
# Usage: install_test.sh BUILD_DIR
set -uo pipefail
build=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
mv "$tmp/prefix" "$tmp/moved"
p=$tmp/moved
for f in bin/dptwin share/man/man1/dptwin.1 share/bash-completion/completions/dptwin share/zsh/site-functions/_dptwin \
         share/dptwin/scenarios/hardware/dgx-h100.yaml share/dptwin/scenarios/models/resnet50.yaml \
         share/dptwin/scenarios/whatif/resnet50-dgx-a100-ddp.yaml share/dptwin/scenarios/lesson/split-64-on-2.yaml \
         share/dptwin/scenarios/faults/dgx1-slow-link.yaml share/dptwin/scenarios/models/hf/gpt2/config.json; do
  [ -f "$p/$f" ] || fail "not installed: $f"
done
cd "$tmp"
unset DPTWIN_SCENARIOS_DIR DPTWIN_HARDWARE_DIR
out=$("$p/bin/dptwin" hardware list) || fail "installed hardware list exited $?"
grep -qx "library: $p/share/dptwin/scenarios/hardware" <<<"$out" || fail "the installed binary reads another library: $(tail -2 <<<"$out")"
"$p/bin/dptwin" predict --hardware dgx-a100 --model resnet50 --strategy ddp --devices 8 --batch-per-device 32 \
  >predict.txt 2>&1 || { cat predict.txt >&2; fail "installed predict exited non-zero"; }
"$p/bin/dptwin" predict "$p/share/dptwin/scenarios/whatif/resnet50-dgx-a100-ddp.yaml" >/dev/null 2>&1 \
  || fail "installed predict of a shipped what-if scenario failed"
"$p/bin/dptwin" lesson --only split-64-on-2 >/dev/null 2>&1 || fail "installed lesson failed"
man -l "$p/share/man/man1/dptwin.1" >/dev/null 2>&1 || ! command -v man >/dev/null || fail "man cannot render the installed page"
echo "install_test: ok"
