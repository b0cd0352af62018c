#!/usr/bin/env bash
# Issue 18 on a machine with several GPUs (nothing here has run on one yet):
#   1. the node as the driver and NVML see it (nvidia-smi -L, topo -m, nvlink -s);
#   2. `memtopo --device all`: one result per GPU (by UUID), the node summary with the
#      peer links (first run of the CUDA peer path: cuda/peer.rs), its exit code and time;
#   3. a list, and an index past the last (exit 4 expected);
#   4. evidence for or against measuring GPUs concurrently: GPUs 0 and 1 measured one
#      after the other and at the same time, N times each, every concurrent result diffed
#      against the sequential ones of its GPU (`memtopo diff`, exit 1 = differs);
#   5. `memtopo merge` of everything (spread across GPUs and runs, flags).
# Usage: scripts/gpu/issue18.sh TAG [N]; memtopo from MEMTOPO (default ./.gpu/memtopo).
# Writes $OUT/TAG.tgz. What to look for: docs/fleet.md, "Running it on a GPU node".
set -uo pipefail
tag=${1:?tag}; n=${2:-3}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
M=${MEMTOPO:-./.gpu/memtopo}
export MEMTOPO_LOCK_DIR=$out/locks

{ nvidia-smi -L; nvidia-smi topo -m; nvidia-smi nvlink -s; } > "$out/node.txt" 2>&1
count=$(nvidia-smi -L | grep -c '^GPU')
echo "GPUs: $count"; grep '^GPU' "$out/node.txt"
if [ "$count" -lt 2 ]; then
    echo "one GPU: the node run and the peer path need two; running what one allows"
fi

start=$(date +%s%N)
$M --device all -o "$out/all/" --summary "$out/all/node.md" --summary "$out/all/node.json" \
    > "$out/all.txt" 2>&1
code=$?
echo "--device all: exit $code (0 expected) in $(( ($(date +%s%N) - start) / 1000000 )) ms"
sed -n '/^Node /,/^Spread/p' "$out/all.txt" | head -60

$M --device 0,$((count - 1)) --no-peers -q -o "$out/list/{index}-{uuid}.json" \
    > "$out/list.txt" 2>&1
echo "--device 0,$((count - 1)): exit $? (0 expected)"; ls "$out/list"
$M --device 0,$count -q > "$out/bad-index.txt" 2>&1
echo "--device 0,$count: exit $? (4 expected)"; tail -1 "$out/bad-index.txt"

if [ "$count" -ge 2 ]; then
    for i in $(seq 1 "$n"); do
        s=$(date +%s%N)
        $M -d 0 -q -o "$out/seq-0-$i.json" > "$out/seq-0-$i.txt" 2>&1; a=$?
        $M -d 1 -q -o "$out/seq-1-$i.json" > "$out/seq-1-$i.txt" 2>&1; b=$?
        echo "sequential $i: exits $a $b, $(( ($(date +%s%N) - s) / 1000000 )) ms"
        s=$(date +%s%N)
        $M -d 0 -q -o "$out/con-0-$i.json" > "$out/con-0-$i.txt" 2>&1 & p0=$!
        $M -d 1 -q -o "$out/con-1-$i.json" > "$out/con-1-$i.txt" 2>&1 & p1=$!
        wait $p0; a=$?; wait $p1; b=$?
        echo "concurrent $i: exits $a $b, $(( ($(date +%s%N) - s) / 1000000 )) ms"
    done
    for g in 0 1; do
        for i in $(seq 1 "$n"); do
            for j in $(seq 1 "$n"); do
                $M diff "$out/seq-$g-$j.json" "$out/con-$g-$i.json" > "$out/diff-$g-$j-$i.txt" 2>&1
                echo -n "$? "
            done
        done
        echo " (GPU $g: diff sequential vs concurrent, 0 = equal within tolerances)"
        for j in $(seq 2 "$n"); do
            $M diff "$out/seq-$g-1.json" "$out/seq-$g-$j.json" > "$out/diff-$g-seq-$j.txt" 2>&1
            echo -n "$? "
        done
        echo " (GPU $g: diff sequential vs sequential, the baseline)"
    done
    grep -h "→" "$out"/diff-*.txt | sed 's/:.*//' | sort | uniq -c | sort -rn | head -20
fi

# The node's GPUs (a GPU given twice is kept once, so repeated runs are diffed above).
$M merge "$out/all" -o "$out/fleet.json" -o "$out/fleet.md" > "$out/merge.txt" 2>&1
echo "merge: exit $? (1 when something is flagged)"
head -40 "$out/fleet.md"
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag" && rm -rf "$out"
