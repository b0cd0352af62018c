#!/usr/bin/env bash
# Session 8 on one GPU: the TLB search with the order test (issue 16.2) and a check that
# nothing else moved. ptxas of ptx/pchase.ptx (init_chain_lines gained its group), two
# `--only l1,tlb -v` runs (every walk's p5/p50/p95 in the logs, the order tests), one
# default run, one --deep run, the runner's GPU tests. Binaries in ./.gpu. Usage: session8_verify.sh [TAG];
# everything in ${OUT:-/tmp/out}/TAG.tgz plus TAG-summary.txt. About 60 s of GPU time.
set -uo pipefail
tag=${1:-s8v}
o=${OUT:-/tmp/out}
out=$o/$tag
mkdir -p "$out"
m=./.gpu/memtopo
s=$out/summary.txt
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem --format=csv > "$s" 2>&1
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
for f in pchase tma asynccopy; do
  ptxas -arch=sm_${cc:-90} ptx/$f.ptx -o /tmp/$f.cubin > "$out/ptxas-$f.log" 2>&1
  echo "ptxas $f.ptx rc=$?" >> "$s"
done
for i in 1 2; do
  start=$(date +%s)
  timeout 200 $m --only l1,tlb --timings -v -o "$out/tlb$i.json" > "$out/tlb$i.txt" 2> "$out/tlb$i.log"
  echo "memtopo tlb run $i rc=$? wall $(( $(date +%s) - start )) s" >> "$s"
  grep -hE "^TLB|^note: TLB|^warning: TLB|^tlb|^total" "$out/tlb$i.txt" | cut -c1-600 >> "$s"
  grep -h "in groups of\|entry span" "$out/tlb$i.log" | sed -E 's/^.*(tlb )/\1/' | cut -c1-300 >> "$s"
done
timeout 60 $m --timings -o "$out/default.json" > "$out/default.txt" 2> "$out/default.log"
echo "default run rc=$?" >> "$s"
tail -5 "$out/default.txt" >> "$s"
start=$(date +%s)
timeout 200 $m --deep --timings -o "$out/deep.json" > "$out/deep.txt" 2> "$out/deep.log"
echo "deep run rc=$? wall $(( $(date +%s) - start )) s" >> "$s"
grep -E "^tlb|^total" "$out/deep.txt" >> "$s"
if [ -x ./.gpu/runner_it ]; then
  timeout 200 ./.gpu/runner_it gpu:: > "$out/gpu-tests.txt" 2>&1
  echo "gpu tests rc=$?" >> "$s"; grep "test result" "$out/gpu-tests.txt" >> "$s"
fi
cp "$s" "$o/$tag-summary.txt"
tar czf "$o/$tag.tgz" -C "$o" "$tag" && rm -rf "$out"
