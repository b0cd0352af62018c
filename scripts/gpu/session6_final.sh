#!/usr/bin/env bash
# Session 6's evidence on one GPU, for the merged build: five default runs (timings, JSON,
# Markdown; raw curves and an HTML report of the first), one --deep run, validate/render,
# the runner's GPU tests. Usage: session6_final.sh TAG; binaries in ./.gpu; writes
# $OUT/TAG.tgz and prints a summary.
set -uo pipefail
tag=${1:?tag}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
m=./.gpu/memtopo
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw,compute_mode --format=csv > "$out/smi.txt" 2>&1
cat "$out/smi.txt"
for i in 1 2 3 4 5; do
  extra=()
  [ "$i" = 1 ] && extra=(--keep-raw "$out/raw1" -o "$out/run1.html")
  $m --timings -v -o "$out/run$i.json" -o "$out/run$i.md" "${extra[@]}" > "$out/run$i.txt" 2> "$out/run$i.log"
  echo "run $i rc=$?"
done
$m --deep --timings -v -o "$out/deep.json" > "$out/deep.txt" 2> "$out/deep.log"; echo "deep rc=$?"
$m validate "$out/run1.json" "$out/deep.json"; echo "validate rc=$?"
$m render "$out/run1.json" -o "$out/run1.svg" -o "$out/run1.mt4g.json"; echo "render rc=$?"
for i in 2 3 4 5; do $m diff "$out/run1.json" "$out/run$i.json" > "$out/diff1-$i.txt" 2>&1; echo "diff 1-$i rc=$?"; done
./.gpu/runner_it gpu > "$out/gpu-tests.txt" 2>&1; echo "gpu tests rc=$?"
grep -E "test result|FAILED|panicked" "$out/gpu-tests.txt" | head
sed -n '/^Element/,/^Device memory/p' "$out/run1.txt"
sed -n '/^Bandwidth/,/^$/p' "$out/run1.txt"
grep -hE "^total" "$out"/run[1-5].txt "$out/deep.txt"
grep -hE "^(note|warning)" "$out/run1.txt" | cut -c1-220 | head -30
grep -hE "^(note|warning)" "$out/deep.txt" | grep -iE "tlb|parallel|gpc|dsmem|cluster" | cut -c1-220 | head -12
rm -rf "$out/raw1/"*.svg
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag" && rm -rf "$out"
