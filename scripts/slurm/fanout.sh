#!/usr/bin/env bash
# memtopo over a Slurm cluster: one task per node measures every GPU of its node
# (`memtopo --device all`), each node's results go into its own folder of a shared
# directory, then `memtopo merge` joins them into one fleet report (docs/fleet.md).
#
#   scripts/slurm/fanout.sh SHARED_DIR [MEMTOPO_ARGS...]
#
# Inside an allocation (salloc, or as the body of an sbatch script) it uses every node of
# the allocation; outside one, set FANOUT_NODES=N (srun then asks for N nodes itself).
# SHARED_DIR must be visible at the same path on every node (NFS, Lustre, …), and so must
# memtopo: MEMTOPO names the binary (default: `memtopo` on PATH). SRUN_ARGS adds options
# to srun (e.g. `--partition=gpu --time=10`). MEMTOPO_ARGS go to every node's memtopo
# (e.g. `--simulate 4xh100` for a dry run, `--only l1,l2`, `--no-peers`).
#
# Writes SHARED_DIR/NODE/GPU-….json (one per GPU), SHARED_DIR/NODE/node-NODE.json (the
# node summary), SHARED_DIR/fleet.{json,md,html} (the fleet report).
#
# Exit status: srun's when a node's memtopo failed (memtopo's own code where one node
# ran: 12 partial node, 8 busy, …; the merge still runs on what was written); else
# merge's: 0 nothing degraded, 1 a GPU degraded or not measured, 11 a result unreadable.
# A node's exit 1 (a GPU degraded against its peers, or a failed benchmark) is not a
# failure of the fan-out: the merge reports both.
# 2: bad usage of this script.
set -uo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 SHARED_DIR [MEMTOPO_ARGS...]" >&2
    exit 2
fi
shared=$1
shift
memtopo=${MEMTOPO:-memtopo}
mkdir -p "$shared" || exit 2

nodes=()
if [ -n "${FANOUT_NODES:-}" ]; then
    nodes=(--nodes="$FANOUT_NODES")
elif [ -n "${SLURM_JOB_NUM_NODES:-}" ]; then
    nodes=(--nodes="$SLURM_JOB_NUM_NODES")
else
    echo "fanout: not inside a Slurm allocation; set FANOUT_NODES=N" >&2
    exit 2
fi

# One task per node; each memtopo names its folder after its node ({node} is
# SLURMD_NODENAME, which srun sets in every task).
# shellcheck disable=SC2086
srun "${nodes[@]}" --ntasks-per-node=1 --kill-on-bad-exit=0 ${SRUN_ARGS:-} \
    "$memtopo" --device all --progress none -q -o "$shared/{node}/" "$@"
measured=$?
[ $measured -gt 1 ] && echo "fanout: srun ended with $measured (a node's memtopo failed; see above)" >&2

# The node folders only: an earlier fleet report in SHARED_DIR is not an input.
"$memtopo" merge "$shared"/*/ -o "$shared/fleet.json" -o "$shared/fleet.md" -o "$shared/fleet.html"
merged=$?
[ -f "$shared/fleet.md" ] && head -n 1 "$shared/fleet.md"
if [ $measured -gt 1 ]; then
    exit $measured
fi
exit $merged
