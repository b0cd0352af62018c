#!/usr/bin/env bash
# Session 10, issue 15 on a several-GPU node: per GPU, memtopo's memory bandwidth alone
# three times (the read's fraction of the API peak) and the hand-written kernels of
# bw_explore.cu once. Binaries in ./.gpu. Files: ${OUT:-/tmp/out}/bw-GPU.txt.
set -uo pipefail
o=${OUT:-/tmp/out}
nvcc -O3 -arch=sm_90 -o /tmp/bw scripts/gpu/bw_explore.cu > /dev/null 2>&1 || echo "bw_explore did not compile"
n=$(nvidia-smi -L | wc -l)
for g in $(seq 0 $((n - 1))); do
  uuid=$(nvidia-smi -i "$g" --query-gpu=uuid --format=csv,noheader | cut -c1-12)
  f=$o/bw-$uuid.txt
  nvidia-smi -i "$g" --query-gpu=name,uuid,pci.bus_id,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw --format=csv > "$f"
  for i in 1 2 3; do
    CUDA_VISIBLE_DEVICES=$g ./.gpu/memtopo --only bandwidth-memory -o /tmp/m$g-$i.json > /dev/null 2>&1
    python3 - /tmp/m$g-$i.json >> "$f" <<'P'
import json, sys
try:
    b = json.load(open(sys.argv[1]))['elements']['device_memory']['bandwidth']
    out = []
    for k in ('read', 'write', 'copy'):
        v = b.get(k) or {}
        frac = (v.get('peak') or {}).get('fraction')
        out.append(f"{k} {v.get('value', 0):.0f} GiB/s" + (f" ({100 * frac:.1f} % of peak)" if frac else ""))
    print('memtopo:', '; '.join(out))
except Exception as e:
    print('memtopo: no result', e)
P
  done
  CUDA_VISIBLE_DEVICES=$g timeout 120 /tmp/bw 2>&1 | grep -A8 "^SUMMARY" >> "$f"
  echo "== GPU $g $uuid"; cat "$f"
done
