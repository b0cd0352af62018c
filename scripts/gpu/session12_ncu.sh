#!/usr/bin/env bash
# Session 12, issue 15: a second, independent reading of memtopo's memory bandwidth.
# Nsight Compute's hardware counters (DRAM bytes read and written, L2 hit rate, the DRAM,
# L2 and SM clocks, the kernel's duration) for every bandwidth launch of one
# `memtopo --only bandwidth-memory,bandwidth-l2 -v` run, beside three plain runs whose
# values the counters are compared with (scripts/gpu/session12_ncu.py). GPU 0 of the
# machine; binaries in ./.gpu. Files: ${OUT:-/tmp/out}/TAG.tgz.
set -uo pipefail
tag=${1:-s12-ncu}
o=${OUT:-/tmp/out}
d=/tmp/$tag
mkdir -p "$d"
uuid=$(nvidia-smi -i 0 --query-gpu=uuid --format=csv,noheader | cut -c1-12)
p=$d/$uuid
nvidia-smi -q -i 0 > "$p-q.txt" 2>&1
for i in 1 2 3; do
  ./.gpu/memtopo --only bandwidth-memory,bandwidth-l2 -o "$p-m$i.json" > "$p-m$i.txt" 2>&1
  echo "memtopo $i exit $?" >> "$p-exit.txt"
done
m=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__cycles_elapsed.avg.per_second,lts__cycles_elapsed.avg.per_second,sm__cycles_elapsed.avg.per_second
timeout 400 ncu --clock-control none --cache-control none -k regex:bw_ --metrics $m --csv \
  ./.gpu/memtopo --only bandwidth-memory,bandwidth-l2 -v -o "$p-ncu.json" > "$p-ncu.csv" 2> "$p-ncu-log.txt"
echo "ncu exit $?" >> "$p-exit.txt"
cat "$p-exit.txt"
python3 scripts/gpu/session12_ncu.py "$p"
tar czf "$o/$tag.tgz" -C /tmp "$tag"
