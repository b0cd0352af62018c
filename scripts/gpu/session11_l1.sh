#!/usr/bin/env bash
# Session 11, issue 16.1: the L1's smallest overflowing set of lines (`l1_sets.cu 1 reduce`:
# capacity, then a greedy reduction and the miss share of chases over fewer and more of its
# lines), at two shared-memory configurations.
# Files: ${OUT:-/tmp/out}/l1reduce-TAG.txt.
set -uo pipefail
o=${OUT:-/tmp/out}
gpu=$(nvidia-smi --query-gpu=name,uuid --format=csv,noheader | head -1)
case "$gpu" in *H200*) tag=h200 ;; *) tag=h100 ;; esac
f=$o/l1reduce-$tag.txt
echo "$gpu" > "$f"
if nvcc -O2 -arch=sm_90 -o /tmp/l1_sets scripts/gpu/l1_sets.cu -lcuda >> "$f" 2>&1; then
  # The 32 KiB shared-memory configuration (30 KiB static), then the 100 KiB one (60 KiB
  # more, dynamic): the L1 at 218.5 and about 149 KiB.
  for dyn in 0 60 0; do
    echo "== dynamic shared ${dyn} KiB" >> "$f"
    SECONDS=0
    timeout 270 /tmp/l1_sets 1 reduce "$dyn" >> "$f" 2>&1
    echo "rc=$? in ${SECONDS} s" >> "$f"
  done
else
  echo "l1_sets.cu did not compile" >> "$f"
fi
grep -E "^capacity|^reduced|^member|^curve|^extra|^ways|^dynamic|^==|rc=|stop" "$f" | cut -c1-400
