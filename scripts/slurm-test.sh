#!/usr/bin/env bash
# Tests scripts/slurm/fanout.sh against a real Slurm: a controller (slurmctld) and one
# slurmd per simulated node, all on this machine (Debian's slurm-wlm 22.05 allows several
# slurmd on one host with `slurmd -N NAME`), authenticated by a munged of its own. Every
# node runs `memtopo --device all --simulate …` on two simulated GPUs; one node's second
# GPU has a slower memory, and the merged fleet report must flag it and nothing else.
#
# Installs what is missing (apt-get, as root), builds memtopo (release), starts the
# daemons in a temporary folder with their own ports and sockets, runs the fan-out,
# checks the fleet document, and stops the daemons it started (also on failure).
#
#   scripts/slurm-test.sh            # 3 nodes
#   SLURM_TEST_NODES=4 scripts/slurm-test.sh
#
# Exit status: 0 passed; 1 a check failed; 2 the environment could not be set up.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

nodes=${SLURM_TEST_NODES:-3}
port=${SLURM_TEST_PORT:-16817}
say() { echo "slurm-test: $*" >&2; }

# 1. Slurm and munge.
missing=()
for tool in slurmctld slurmd srun sinfo munged; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "missing ${missing[*]}: installing slurmctld slurmd slurm-client munge"
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
        say "cannot install (needs root and apt-get)"
        exit 2
    fi
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null \
        || { say "apt-get install failed"; exit 2; }
fi

# 2. memtopo.
memtopo=${MEMTOPO:-$repo/target/release/memtopo}
if [ -z "${MEMTOPO:-}" ]; then
    cargo build --release --quiet -p memtopo || { say "cargo build failed"; exit 2; }
fi

work=$(mktemp -d)
# Stops the daemons this script started (by the pids in their pid files), waiting up to
# 10 s for them to go before SIGKILL.
cleanup() {
    started_pids=()
    for pidfile in "$work"/*.pid; do
        [ -f "$pidfile" ] && started_pids+=("$(cat "$pidfile")")
    done
    [ ${#started_pids[@]} -gt 0 ] && kill "${started_pids[@]}" 2>/dev/null
    for _ in $(seq 1 20); do
        alive=0
        for pid in "${started_pids[@]}"; do
            kill -0 "$pid" 2>/dev/null && alive=1
        done
        [ $alive -eq 0 ] && break
        sleep 0.5
    done
    for pid in "${started_pids[@]}"; do
        kill -9 "$pid" 2>/dev/null
    done
    [ -z "${SLURM_TEST_KEEP:-}" ] && rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/state" "$work/spool" "$work/shared" "$work/locks"

# 3. munge with its own key and socket.
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge.key"
munged --force --key-file="$work/munge.key" --socket="$work/munge.sock" \
    --pid-file="$work/munged.pid" --log-file="$work/munged.log" \
    --seed-file="$work/munged.seed" || { say "munged did not start"; exit 2; }

# 4. slurm.conf: one controller, `nodes` slurmd on localhost, each its own port.
conf=$work/slurm.conf
cat >"$conf" <<EOF
ClusterName=memtopotest
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge.sock
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd-%n.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
EOF
for i in $(seq 1 "$nodes"); do
    echo "NodeName=node$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + i)) CPUs=1 RealMemory=100 State=UNKNOWN" >>"$conf"
done
echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$conf"
export SLURM_CONF=$conf

# 5. The daemons.
slurmctld -f "$conf" || { say "slurmctld did not start"; cat "$work/slurmctld.log" >&2; exit 2; }
for i in $(seq 1 "$nodes"); do
    slurmd -f "$conf" -N "node$i" || { say "slurmd node$i did not start"; exit 2; }
done
for _ in $(seq 1 60); do
    idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
    [ "$idle" -ge "$nodes" ] && break
    sleep 0.5
done
if [ "${idle:-0}" -lt "$nodes" ]; then
    say "only ${idle:-0} of $nodes nodes came up"
    sinfo -N >&2
    tail -n 20 "$work/slurmctld.log" >&2
    exit 2
fi
sinfo -N

# 6. The fan-out. Each node runs the same command line; a wrapper gives the last node a GPU
# with a 30 % slower memory (what fanout.sh passes through to memtopo is unchanged).
cat >"$work/memtopo-node.sh" <<EOF
#!/usr/bin/env bash
if [ "\${1:-}" = merge ]; then exec "$memtopo" "\$@"; fi
if [ "\${SLURMD_NODENAME:-}" = node$nodes ]; then
    exec "$memtopo" "\$@" --simulate volta,volta:memory=+30%
fi
exec "$memtopo" "\$@" --simulate 2xvolta
EOF
chmod +x "$work/memtopo-node.sh"
started=$(date +%s)
MEMTOPO_LOCK_DIR="$work/locks" MEMTOPO="$work/memtopo-node.sh" \
    FANOUT_NODES=$nodes timeout 120 scripts/slurm/fanout.sh "$work/shared" --only shared,memory
fanout=$?
say "fan-out exit $fanout after $(( $(date +%s) - started )) s"
find "$work/shared" -type f | sed "s|$work/||" | sort

# 7. Checks: every node's folder, every GPU, one flag on the last node's GPU 1.
python3 - "$work/shared/fleet.json" "$nodes" "$fanout" <<'EOF'
import json, sys
path, nodes, fanout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
doc = json.load(open(path))
problems = []
def check(ok, what):
    if not ok:
        problems.append(what)
check(doc["fleet_schema_version"] == "1.0", "fleet_schema_version")
check(doc["kind"] == "fleet", "kind")
names = sorted(n["name"] for n in doc["nodes"])
check(names == [f"node{i}" for i in range(1, nodes + 1)], f"nodes {names}")
check(len(doc["gpus"]) == 2 * nodes, f"{len(doc['gpus'])} GPUs")
check(len({g["uuid"] for g in doc["gpus"]}) == 2 * nodes, "distinct UUIDs")
check(all(g.get("exit_code") == 0 for g in doc["gpus"]), "every GPU exit 0")
check(not doc.get("failures"), "no failures")
flags = [(f["node"], f.get("device_index"), f["path"]) for f in doc["flags"]]
check(flags == [(f"node{nodes}", 1, "elements.device_memory.latency")], f"flags {flags}")
check(fanout == 1, f"fan-out exit {fanout} (merge: 1 for a flag)")
links = sum(len(n.get("links", [])) for n in doc["nodes"])
check(links == 2 * nodes, f"{links} links (two per node)")
for p in problems:
    print("slurm-test: FAILED:", p, file=sys.stderr)
print(f"slurm-test: {len(doc['gpus'])} GPUs on {len(names)} nodes, flags: {flags}")
sys.exit(1 if problems else 0)
EOF
checked=$?
if [ $checked -eq 0 ]; then
    sed -n '1,12p' "$work/shared/fleet.md"
    say "passed"
fi
exit $checked
