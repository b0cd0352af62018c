#!/usr/bin/env bash
# Issue 12 exploration on a lent GPU (run from the repository root, memtopo binary in .gpu/):
# the shared-memory configurations, the L2's per-load levels and partition map, and two
# runs of the current memtopo with its raw curves. Everything lands in $OUT/<tag>-*.
set -uo pipefail
tag=${1:?tag, e.g. h100}
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/x
nvidia-smi --query-gpu=name,uuid,pci.bus_id,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw,ecc.mode.current,persistence_mode,compute_mode,mig.mode.current --format=csv > "$out/$tag-smi.txt" 2>&1
nvidia-smi -q >> "$out/$tag-smi.txt" 2>&1
nvcc --version | tail -2 >> "$out/$tag-smi.txt"
nvcc -O2 -arch=sm_90 -o /tmp/x/smem_configs scripts/gpu/smem_configs.cu || exit 1
nvcc -O2 -arch=sm_90 -o /tmp/x/l2_levels scripts/gpu/l2_levels.cu || exit 1
(time /tmp/x/smem_configs) > "$out/$tag-smem.csv" 2> "$out/$tag-smem.err"
echo "== smem"; column -s, -t < "$out/$tag-smem.csv" | head -200
(time /tmp/x/l2_levels 0) 2> "$out/$tag-l2.err" | gzip > /tmp/x/l2.csv.gz
cp /tmp/x/l2.csv.gz "$out/$tag-l2levels.csv.gz"
echo "== l2"; cat "$out/$tag-l2.err" | cut -c1-600
for i in 1 2; do
  ./.gpu/memtopo --timings -vv -o /tmp/x/run$i.json --keep-raw /tmp/x/raw$i > /tmp/x/run$i.txt 2> /tmp/x/run$i.log
  echo "memtopo run $i rc=$?"
done
cat /tmp/x/run1.txt
tar czf "$out/$tag-memtopo.tgz" -C /tmp/x run1.json run2.json run1.txt run2.txt run1.log run2.log raw1 raw2
ls -la "$out"
