#!/usr/bin/env bash
# Issue 15 on one GPU: the bandwidth benchmarks alone (three runs, -v shows the search), then
# two default runs with --timings (what the bandwidth set adds), then the runner's bandwidth
# GPU tests. Expects the memtopo binary at ./.gpu/memtopo (and, if present, the runner's
# integration tests at ./.gpu/runner_it). Usage: issue15.sh [TAG]; logs under ${OUT:-/tmp/out}/TAG.
set -uo pipefail
tag=${1:-issue15}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
m=./.gpu/memtopo
bw=bandwidth-l1,bandwidth-shared,bandwidth-l2,bandwidth-memory
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw,compute_mode --format=csv > "$out/smi.txt" 2>&1
cat "$out/smi.txt"
for i in 1 2 3; do
  $m --only "$bw" --timings -v -o "$out/bw$i.json" -o "$out/bw$i.md" > "$out/bw$i.txt" 2> "$out/bw$i.log"
  echo "bandwidth run $i rc=$?"
done
for i in 1 2; do
  $m --timings -o "$out/default$i.json" > "$out/default$i.txt" 2> "$out/default$i.log"
  echo "default run $i rc=$?"
done
$m validate "$out/bw1.json"; echo "validate bw1 rc=$?"
$m render "$out/bw1.json" -o "$out/bw1.mt4g.json" -o "$out/bw1.svg" -o "$out/bw1.html"; echo "render rc=$?"
if [ -x ./.gpu/runner_it ]; then
  ./.gpu/runner_it gpu_bandwidth:: gpu::every_supported_module_loads --nocapture > "$out/gpu-tests.txt" 2>&1
  echo "gpu tests rc=$?"
  grep -E "GB/s|test result|FAILED|panicked" "$out/gpu-tests.txt" | head -20
fi
echo "=== bandwidth run 1 (table and timings)"
sed -n '/^Bandwidth/,/^$/p' "$out/bw1.txt"
grep -E "^bandwidth|^total|^clock" "$out/bw1.txt"
echo "=== runs 2, 3: best per level"
for i in 2 3; do sed -n '/^Bandwidth/,/^$/p' "$out/bw$i.txt" | awk -F'  +' 'NR>2 && NF>1 {print $1": "$2" ("$5")"}'; done
echo "=== the search of run 1 (-v), memory read"
grep "bandwidth memory read" "$out/bw1.log" | head -40
grep -E "bandwidth .*after [0-9]+ shapes" "$out/bw1.log"
grep -iE "warn|error" "$out/bw1.log" | head -10
echo "=== default runs: bandwidth steps and totals"
for i in 1 2; do grep -E "^bandwidth|^total" "$out/default$i.txt"; done
grep -E "readBandwidth|writeBandwidth" -A2 "$out/bw1.mt4g.json" | head -24
