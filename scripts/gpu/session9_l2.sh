#!/usr/bin/env bash
# Session 9 on one GPU: the L2 fixes (levels split in two merged; the fetch granularity's
# miss threshold over the hits). N `--only l2 -v` runs (exit codes, near/far sizes, far
# level, fetch granularity) and three default runs with their diffs. Binaries in ./.gpu.
# Usage: session9_l2.sh [TAG] [N]; everything in ${OUT:-/tmp/out}/TAG.tgz plus
# TAG-summary.txt. About 30 s of GPU time at N = 10.
set -uo pipefail
tag=${1:-s9l2}; n=${2:-10}
o=${OUT:-/tmp/out}
out=$o/$tag
mkdir -p "$out"
m=./.gpu/memtopo
s=$out/summary.txt
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem --format=csv > "$s" 2>&1
for i in $(seq 1 "$n"); do
  timeout 60 $m --only l2 -v -o "$out/l2-$i.json" > "$out/l2-$i.txt" 2> "$out/l2-$i.log"
  rc=$?
  line=$(python3 - "$out/l2-$i.json" <<'P'
import json, sys
try:
    l2 = json.load(open(sys.argv[1]))['elements']['l2']
    p = l2.get('partitions') or {}
    far = (p.get('far_latency') or {}).get('p50')
    fs = p.get('far_size') or {}
    print('size', (l2.get('size') or {}).get('value'), 'near', (p.get('size_each') or {}).get('value'),
          'far', fs.get('value'), '-', fs.get('upper'), 'far p50', far,
          'fetch', (l2.get('fetch_granularity') or {}).get('value'), 'disturbed', bool(l2.get('disturbed')))
except Exception as e:
    print('no json:', e)
P
)
  echo "l2 run $i exit $rc: $line" >> "$s"
done
for i in 1 2 3; do
  timeout 60 $m --timings -o "$out/default-$i.json" > "$out/default-$i.txt" 2> "$out/default-$i.log"
  echo "default run $i exit $? $(grep -h '^total' "$out/default-$i.txt")" >> "$s"
done
for i in 2 3; do
  $m diff "$out/default-1.json" "$out/default-$i.json" > "$out/diff1-$i.txt" 2>&1
  echo "diff 1-$i exit $?" >> "$s"; grep -v "^  run\.\|^conditions" "$out/diff1-$i.txt" | head -6 >> "$s"
done
cp "$s" "$o/$tag-summary.txt"
tar czf "$o/$tag.tgz" -C "$o" "$tag" && rm -rf "$out"
