#!/usr/bin/env bash
# Session 10 on one GPU (H100 or H200): the near partition's capacity by the half-way rule
# and the line probe's self-sizing chain A (issue 12): N `--only l2 -v` runs (exit codes,
# near capacity and its overflow note, line, far size and level, fetch granularity) and
# three default runs with their diffs; then the L1 probe's `phys` mode (issue 16: one
# physical 2 MiB chunk mapped at two virtual addresses) and, on an H100, the hand-written
# bandwidth kernels (issue 15). Binaries in ./.gpu.
# Usage: [SKIP_PROBES=1] [DEFAULTS=3] session10.sh [N]; files under ${OUT:-/tmp/out}: TAG.tgz, TAG-summary.txt,
# l1phys-TAG.txt, bw-TAG.txt (TAG h100 or h200). About 2-3 minutes.
set -uo pipefail
n=${1:-8}
o=${OUT:-/tmp/out}
gpu=$(nvidia-smi --query-gpu=name,uuid --format=csv,noheader | head -1)
case "$gpu" in
  *H200*) tag=h200 ;;
  *) tag=h100 ;;
esac
echo "running on $gpu ($tag)"
out=$o/$tag
mkdir -p "$out"
m=./.gpu/memtopo
s=$out/summary.txt
nvidia-smi --query-gpu=name,uuid,pci.bus_id,driver_version,clocks.sm,clocks.mem --format=csv > "$s" 2>&1
for i in $(seq 1 "$n"); do
  timeout 60 $m --only l2 -vv -o "$out/l2-$i.json" > "$out/l2-$i.txt" 2> "$out/l2-$i.log"
  rc=$?
  line=$(python3 - "$out/l2-$i.json" <<'P'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    l2 = d['elements']['l2']
    p = l2.get('partitions') or {}
    far = (p.get('far_latency') or {}).get('p50')
    fs = p.get('far_size') or {}
    mib = lambda v: None if v is None else round(v / 2**20, 2)
    over = [n['message'].split(': ', 1)[-1] for n in d.get('notes', []) if 'overflow' in n.get('message', '')]
    print('near', mib((p.get('size_each') or {}).get('value')), 'MiB line', (l2.get('line_size') or {}).get('value'),
          'far', mib(fs.get('value')), '-', mib(fs.get('upper')), 'far p50', far,
          'fetch', (l2.get('fetch_granularity') or {}).get('value'), 'disturbed', bool(l2.get('disturbed')), '|', *over)
except Exception as e:
    print('no json:', e)
P
)
  echo "l2 run $i exit $rc: $line" >> "$s"
  grep -h "line probe: A of\|L2 near edge .* confirmation\|line probe done" "$out/l2-$i.log" | cut -c1-200 | head -5 >> "$s"
done
for i in $(seq 1 "${DEFAULTS:-3}"); do
  timeout 60 $m --timings -vv -o "$out/default-$i.json" > "$out/default-$i.txt" 2> "$out/default-$i.log"
  echo "default run $i exit $? $(grep -h "^total" "$out/default-$i.txt") $(grep -h "^l2 latency" "$out/default-$i.txt")" >> "$s"; grep -h "GPU time" "$out/default-$i.log" | cut -c40-120 | tr "\n" ";" >> "$s"; echo >> "$s"
done
for i in 2 3; do
  $m diff "$out/default-1.json" "$out/default-$i.json" > "$out/diff1-$i.txt" 2>&1
  echo "diff 1-$i exit $?" >> "$s"; grep -v "^  run\.\|^conditions" "$out/diff1-$i.txt" | head -8 >> "$s"
done
cp "$s" "$o/$tag-summary.txt"
cat "$s"
tar czf "$o/$tag.tgz" -C "$o" "$tag" && rm -rf "$out"
# SKIP_PROBES=1: the memtopo runs only.
[ -n "${SKIP_PROBES:-}" ] && exit 0
if nvcc -O2 -arch=sm_90 -o /tmp/l1_sets scripts/gpu/l1_sets.cu -lcuda > "$o/l1phys-$tag.txt" 2>&1; then
  for a in "1 phys"; do echo "== args $a"; timeout 120 /tmp/l1_sets $a; echo "rc=$?"; done >> "$o/l1phys-$tag.txt" 2>&1
  grep -E "^capacity|^phys|^chunk|rc=" "$o/l1phys-$tag.txt" | cut -c1-220
else
  echo "l1_sets.cu did not compile"; tail -20 "$o/l1phys-$tag.txt"
fi
if [ "$tag" = h100 ] && nvcc -O3 -arch=sm_90 -o /tmp/bw scripts/gpu/bw_explore.cu > "$o/bw-$tag.txt" 2>&1; then
  timeout 90 /tmp/bw >> "$o/bw-$tag.txt" 2>&1; echo "bw_explore rc=$?"
  tail -12 "$o/bw-$tag.txt"
fi
