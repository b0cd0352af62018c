#!/usr/bin/env bash
# Session 12, issue 15: why one H100 reads device memory below 93 % of the API peak.
# Per GPU of the node: the full `nvidia-smi -q` (clock event reasons, memory temperature,
# remapped rows), memtopo's memory and L2 bandwidth three times with NVML sampled every
# 100 ms, the hand-written kernels of bw_explore.cu once, and Nsight Compute's reading of
# the DRAM, L2 and SM clocks and of the bytes moved during the read kernels (memtopo's and
# bw_explore's). Binaries in ./.gpu. Files: ${OUT:-/tmp/out}/TAG.tgz.
set -uo pipefail
tag=${1:-s12}
o=${OUT:-/tmp/out}
d=/tmp/$tag
mkdir -p "$d"
nvcc -O3 -arch=sm_90 -o /tmp/bw scripts/gpu/bw_explore.cu > "$d/nvcc.txt" 2>&1 || echo "bw_explore did not compile"
nvidia-smi topo -m > "$d/topo.txt" 2>&1
n=$(nvidia-smi -L | wc -l)
metrics=dram__cycles_elapsed.avg.per_second,lts__cycles_elapsed.avg.per_second,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_read.sum.per_second,lts__t_sector_hit_rate.pct,gpu__time_duration.sum
for g in $(seq 0 $((n - 1))); do
  uuid=$(nvidia-smi -i "$g" --query-gpu=uuid --format=csv,noheader | cut -c1-12)
  p=$d/$uuid
  nvidia-smi -q -i "$g" > "$p-q.txt" 2>&1
  nvidia-smi -i "$g" --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_event_reasons.active,utilization.gpu --format=csv -lms 100 > "$p-smi.csv" 2>&1 &
  mon=$!
  for i in 1 2 3; do
    CUDA_VISIBLE_DEVICES=$g ./.gpu/memtopo --only bandwidth-memory,bandwidth-l2 -v -o "$p-m$i.json" > "$p-m$i.txt" 2>&1
    echo "memtopo $i exit $?" >> "$p-exit.txt"
  done
  CUDA_VISIBLE_DEVICES=$g timeout 150 /tmp/bw > "$p-bw.txt" 2>&1
  kill $mon
  CUDA_VISIBLE_DEVICES=$g timeout 150 ncu --clock-control none --cache-control none -k regex:bw_read --launch-count 6 --metrics $metrics --csv ./.gpu/memtopo --only bandwidth-memory -o /tmp/ncu-m.json > "$p-ncu-memtopo.csv" 2>&1
  CUDA_VISIBLE_DEVICES=$g timeout 150 ncu --clock-control none --cache-control none -k regex:rd --launch-count 4 --metrics $metrics --csv /tmp/bw > "$p-ncu-bw.csv" 2>&1
  echo "== GPU $g $uuid"
  python3 - "$p" <<'P'
import json, sys
p = sys.argv[1]
for i in (1, 2, 3):
    try:
        e = json.load(open(f"{p}-m{i}.json"))['elements']
        b = e['device_memory']['bandwidth']
        out = []
        for k in ('read', 'write', 'copy'):
            v = b.get(k) or {}
            frac = (v.get('peak') or {}).get('fraction')
            out.append(f"{k} {v.get('value', 0):.0f}" + (f" ({100 * frac:.1f} %)" if frac else ""))
        l2 = e['l2'].get('bandwidth') or {}
        out.append("L2 read %.0f, near %.0f, write %.0f" % tuple((l2.get(k) or {}).get('value', 0) for k in ('read', 'read_near_partition', 'write')))
        print('memtopo:', '; '.join(out), 'GiB/s')
    except Exception as ex:
        print('memtopo: no result', ex)
P
  grep -A8 "^SUMMARY" "$p-bw.txt"
  grep -h "cycles_elapsed.avg.per_second\|dram__bytes_read.sum.per\|hit_rate" "$p-ncu-memtopo.csv" "$p-ncu-bw.csv" | cut -d, -f5,13- | head -14
  grep -i -A12 "Clocks Event Reasons\|Clocks_Event_Reasons\|Clocks Throttle" "$p-q.txt" | head -14
  grep -i -A3 "Remapped Rows\|Memory Current Temp\|Memory Max Op" "$p-q.txt" | head -16
done
tar czf "$o/$tag.tgz" -C /tmp "$tag"
