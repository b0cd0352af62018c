#!/usr/bin/env bash
# Session 7, first build on one GPU: (1) the GPC fingerprint (scripts/gpu/gpc_fingerprint.cu:
# per-SM L2-hit latencies of 512 lines, two line sets, two repeats each) as a second method
# for the GPC map; (2) the bandwidth benchmarks three times with -v (the tuner's ridge moves,
# the L2 write); (3) two default runs with --timings. Binary at ./.gpu/memtopo.
# Usage: session7_a.sh TAG; writes ${OUT:-/tmp/out}/TAG.tgz.
set -uo pipefail
tag=${1:?tag}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
m=./.gpu/memtopo
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$out/smi.txt" 2>&1
cat "$out/smi.txt"
nvcc -O2 -arch=sm_90 -o /tmp/gpc_fp scripts/gpu/gpc_fingerprint.cu && /tmp/gpc_fp > "$out/fp.csv" 2> "$out/fp.err"
echo "fingerprint rc=$? lines=$(wc -l < "$out/fp.csv")"
bw=bandwidth-l1,bandwidth-shared,bandwidth-l2,bandwidth-memory
for i in 1 2 3; do
  $m --only "$bw" --timings -v -o "$out/bw$i.json" > "$out/bw$i.txt" 2> "$out/bw$i.log"
  echo "bandwidth run $i rc=$?"
  grep -E "^(L2|Device|L1|Shared)" "$out/bw$i.txt" | grep -E "GB|%" | cut -c1-150
done
for i in 1 2; do
  $m --timings -o "$out/default$i.json" > "$out/default$i.txt" 2> "$out/default$i.log"
  echo "default run $i rc=$?"; grep -E "^total|bandwidth-l2" "$out/default$i.txt"
done
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag" && rm -rf "$out"
