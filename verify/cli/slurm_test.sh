#!/usr/bin/env bash
# The README's Slurm job array for real: starts slurmctld and slurmd on localhost
# with a minimal configuration in a temporary folder (no munge: auth/none, and no
# cgroups), runs `sbatch --array=0-7 --wrap 'dptwin sweep S.yaml --shard
# $SLURM_ARRAY_TASK_ID/8 -o shard-$SLURM_ARRAY_TASK_ID.json'`, merges the shards,
# writes the report, and checks that the merged result equals an unsharded run
# point for point. The daemons are stopped on every exit path and the whole run is
# bounded (ctest TIMEOUT, and `timeout` on each wait). Exit 77 (ctest SKIP) when
# Slurm is not installed (ci/install-deps installs Debian's slurm-wlm).
# Usage: slurm_test.sh path/to/dptwin
set -uo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in slurmctld slurmd sbatch squeue scontrol; do
  command -v "$tool" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin"
  command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: $tool not found (apt-get install slurm-wlm)"; exit 77; }
done
exe=$(readlink -f "$1")
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || { echo "SKIP: python3 not found (compares the JSON results)"; exit 77; }

tmp=$(mktemp -d); daemons=()
stop() {
  for pid in "${daemons[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${daemons[@]}"; do timeout 10 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -9 "$pid" 2>/dev/null; done
  rm -rf "$tmp"
}
trap stop EXIT
show_logs() { for f in "$tmp"/slurmctld.log "$tmp"/slurmd.log "$tmp"/work/*.out; do [ -f "$f" ] && { echo "== $f"; tail -20 "$f"; }; done >&2; }

# Two free TCP ports for the controller and the node daemon.
read -r ctld_port slurmd_port < <("$py" -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
host=$(hostname -s)
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/work"
cat >"$tmp/slurm.conf" <<CONF
ClusterName=dptwin-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=dptnode NodeAddr=127.0.0.1 NodeHostname=$host CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=dptnode Default=YES MaxTime=10 State=UP
CONF
export SLURM_CONF="$tmp/slurm.conf"
slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.stdout" 2>&1 & daemons+=($!)
slurmd -D -N dptnode -f "$SLURM_CONF" >"$tmp/slurmd.stdout" 2>&1 & daemons+=($!)

# Wait (bounded) until the node is idle.
ready=0
for _ in $(seq 1 60); do
  state=$(timeout 5 sinfo -h -n dptnode -o %t 2>/dev/null | head -1)
  case "$state" in idle*|mix*) ready=1; break ;; esac
  sleep 0.5
done
[ "$ready" = 1 ] || { show_logs; fail "slurmd did not come up (node state '${state:-none}')"; }

# An 8-point sweep (2 machines x 2 strategies x 2 GPU counts), as the README's array splits it.
cd "$tmp/work"
cat >S.yaml <<YAML
schema_version: 1
model: resnet50
batch_per_device: 32
hardware: desktop-2gpu-pcie-p2p
strategy: ddp
sweep:
  hardware: [desktop-2gpu-pcie-p2p, desktop-2gpu-pcie-nop2p]
  strategy: [dp, ddp]
  devices: [1, 2]
YAML
export PATH="$(dirname "$exe"):$PATH"
# The README's command, word for word, plus --wait so the test knows when it ended.
timeout 300 sbatch --wait --array=0-7 --output=slurm-%A_%a.out \
  --wrap 'dptwin sweep S.yaml --shard $SLURM_ARRAY_TASK_ID/8 -o shard-$SLURM_ARRAY_TASK_ID.json' \
  || { show_logs; fail "sbatch --array failed"; }
shards=$(ls shard-*.json 2>/dev/null | wc -l)
[ "$shards" -eq 8 ] || { show_logs; fail "expected 8 shard files, found $shards"; }
dptwin merge shard-*.json -o all.json && dptwin report all.json --report report/ >/dev/null \
  || fail "merge or report failed"
[ -f report/report.html ] || fail "no report/report.html"
dptwin sweep S.yaml --jobs 2 -o whole.json >/dev/null || fail "the unsharded sweep failed"

# Merged equals unsharded: every point's configuration, status and step report
# (the prediction's own wall time aside: it measures the simulator, not the step).
"$py" - all.json whole.json <<'PY' || fail "merged result differs from the unsharded run"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for r in (a, b):
    r.pop("dptwin", None)
    for p in r["points"]:
        p.pop("wall_s", None)
assert a["total_points"] == b["total_points"] == 8, (a["total_points"], b["total_points"])
assert len(a["points"]) == 8, len(a["points"])
for pa, pb in zip(a["points"], b["points"]):
    assert pa == pb, (pa.get("index"), json.dumps(pa)[:400], json.dumps(pb)[:400])
assert a == b, "headers differ"
print("slurm: 8 array tasks, merged result equals the unsharded sweep")
PY
echo "slurm_test: ok ($(scontrol version 2>/dev/null))"
