#!/usr/bin/env bash
# Everything the open issues still need from an H200 (12.8, 13, 15, 16, 17, 19 part 4, and
# session 8's TLB levels and probes), in
# one call that costs almost nothing when an H100 comes instead: it exits at once unless
# the GPU is an H200. Then: session7_final.sh (copies, sets, instruction caches and MLP,
# TLBs, five default runs and one --deep run, validate/render/diff, the GPU tests),
# issue13_rest.sh (quiet runs, the L2 confirmation, a load starting mid-run) and session 8's
# session8_probe.sh, session8_verify.sh and tlb_alias.cu, and session 9's tlb_fill.cu and
# l1_sets.cu. Binaries in ./.gpu. Usage: h200_all.sh [TAG]; about 5 minutes; at most 8
# files under ${OUT:-/tmp/out}.
set -uo pipefail
tag=${1:-h200}
o=${OUT:-/tmp/out}
gpu=$(nvidia-smi --query-gpu=name,uuid --format=csv,noheader)
case "$gpu" in
  *H200*) echo "running on $gpu" ;;
  *) echo "not an H200: $gpu"; exit 0 ;;
esac
bash scripts/gpu/session7_final.sh "$tag" 2>&1 | tee "$o/summary-$tag.log"
bash scripts/gpu/issue13_rest.sh "i13-$tag" 3 > "$o/i13-$tag.log" 2>&1
echo "issue13_rest rc=$?" | tee -a "$o/summary-$tag.log"
# Session 8: the TLB probes (grouped walks, 992 GiB aliased), the cp.async probe, and the
# tool's three TLB regions twice with --deep (about 90 s).
bash scripts/gpu/session8_probe.sh "s8p-$tag" > "$o/s8p-$tag.log" 2>&1
echo "session8_probe rc=$?" | tee -a "$o/summary-$tag.log"
bash scripts/gpu/session8_verify.sh "s8v-$tag" > "$o/s8v-$tag.log" 2>&1
echo "session8_verify rc=$?" | tee -a "$o/summary-$tag.log"
if nvcc -O2 -arch=sm_90 -o /tmp/tlb_alias scripts/gpu/tlb_alias.cu -lcuda > "$o/tlb_alias-$tag.txt" 2>&1; then
  timeout 300 /tmp/tlb_alias >> "$o/tlb_alias-$tag.txt" 2>&1
  echo "tlb_alias rc=$?" | tee -a "$o/summary-$tag.log"
fi
# Session 9: what one TLB miss fills (and the third level's halves), and the L1's sets by
# their members (about 25 s).
if nvcc -O2 -arch=sm_90 -o /tmp/tlb_fill scripts/gpu/tlb_fill.cu -lcuda > "$o/tlb_fill-$tag.txt" 2>&1; then
  timeout 120 /tmp/tlb_fill >> "$o/tlb_fill-$tag.txt" 2>&1
  echo "tlb_fill rc=$?" | tee -a "$o/summary-$tag.log"
fi
if nvcc -O2 -arch=sm_90 -o /tmp/l1_sets scripts/gpu/l1_sets.cu -lcuda > "$o/l1_sets-$tag.txt" 2>&1; then
  for u in 1 1 2 4; do timeout 120 /tmp/l1_sets $u >> "$o/l1_sets-$tag.txt" 2>&1; done
  echo "l1_sets rc=$?" | tee -a "$o/summary-$tag.log"
fi
# session7_final.sh leaves six archives; the rest goes into a seventh.
cd "$o" && tar czf "${tag}-extra.tgz" "summary-$tag.log" "i13-$tag.log" "i13-$tag.tgz" \
  s8p-"$tag"* s8v-"$tag"* "tlb_alias-$tag.txt" "tlb_fill-$tag.txt" "l1_sets-$tag.txt" \
  && rm -rf "summary-$tag.log" "i13-$tag.log" "i13-$tag.tgz" s8p-"$tag"* s8v-"$tag"* "tlb_alias-$tag.txt" \
    "tlb_fill-$tag.txt" "l1_sets-$tag.txt"
ls "$o"
