#!/usr/bin/env bash
# Issue 12 evidence on one GPU: five default runs (timings, JSON, Markdown; raw curves and
# L2 samples of the first), then the runner's GPU tests. Usage: issue12_final.sh TAG
set -uo pipefail
tag=${1:?tag}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw,compute_mode --format=csv > "$out/smi.txt" 2>&1
for i in 1 2 3 4 5; do
  raw=()
  [ "$i" = 1 ] && raw=(--keep-raw "$out/raw1")
  ./.gpu/memtopo --timings -v -o "$out/run$i.json" -o "$out/run$i.md" "${raw[@]}" > "$out/run$i.txt" 2> "$out/run$i.log"
  echo "run $i rc=$?"
done
./.gpu/runner_it gpu:: > "$out/gpu-tests.txt" 2>&1
echo "gpu tests rc=$?"
grep -E "test result|FAILED|panicked" "$out/gpu-tests.txt" | head
cat "$out/run1.txt"
grep -hE "^(note|warn)" "$out"/run[2-5].txt | cut -c1-300 | sort | uniq -c | head -40
tail -25 "$out/run1.log"
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag" && rm -rf "$out"
