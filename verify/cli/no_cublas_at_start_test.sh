#!/usr/bin/env bash
# Invariant: starting dptwin loads no cuBLAS (the CUDA backend opens it on first use),
# while the libraries it does link still load. The loader's own trace (LD_DEBUG=files)
# lists every object it maps; NCCL, linked by the same backend, is the control that the
# trace names what was loaded.
# Usage: no_cublas_at_start_test.sh DPTWIN
set -euo pipefail
dptwin=${1:?usage: no_cublas_at_start_test.sh DPTWIN}
trace=$(LD_DEBUG=files "$dptwin" --version 2>&1 >/dev/null)
if ! grep -q 'file=libnccl' <<<"$trace"; then
  echo "FAIL: the loader trace does not list libnccl, so it proves nothing:"; head -20 <<<"$trace"; exit 1
fi
if grep -q 'file=libcublas' <<<"$trace"; then
  echo "FAIL: dptwin --version loaded cuBLAS at start:"; grep 'file=libcublas' <<<"$trace"; exit 1
fi
echo "ok: dptwin starts without cuBLAS ($(grep -c 'file=' <<<"$trace") loader lines, libnccl among them)"
