# Sourced by the browser tests: headless Chromium (Debian's chromium, installed by
# ci/install-deps, or $CHROMIUM). Without it the test exits 77, which ctest reports as
# skipped with the reason printed here.
chromium=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  echo "SKIPPED: $chromium not found (ci/install-deps installs Debian's chromium)"
  exit 77
fi

# Sets `flags` for a headless run with its own fresh profile, removed when the test exits;
# nothing reaches the network.
chromium_headless_flags() {
  profile=$(mktemp -d)
  trap 'rm -rf "$profile"' EXIT
  flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
         --disable-component-update --disable-sync --user-data-dir="$profile")
}
