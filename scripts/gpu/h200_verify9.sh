#!/usr/bin/env bash
# Session 9's checks on an H200, after its first runs: the two L2 fixes (session9_l2.sh:
# N --only l2 runs and three default runs), the hand-written bandwidth kernels for issue 15's
# L2 comparison (bw_explore.cu), and the L1 members probe's second version (l1_sets.cu, 16
# passes, with the shift test), and, where ./.gpu/memtopo_old exists (the issue-12 build),
# issue 19's same-machine comparison (build it here: `git -C /work/main worktree add
# /work/wt-old 3280fc9`, `CARGO_TARGET_DIR=/work/wt-old/target cargo build --release -p
# memtopo` in it, copy and strip target/release/memtopo to .gpu/memtopo_old; 3280fc9 is the
# issue-14 build, the last before the registry, and builds without CUDA). Exits at once on
# any other GPU. Binaries in ./.gpu.
# Usage: h200_verify9.sh [N]; five files under ${OUT:-/tmp/out}; about 3 minutes.
set -uo pipefail
n=${1:-12}
o=${OUT:-/tmp/out}
gpu=$(nvidia-smi --query-gpu=name,uuid --format=csv,noheader)
case "$gpu" in
  *H200*) echo "running on $gpu" ;;
  *) echo "not an H200: $gpu"; exit 0 ;;
esac
bash scripts/gpu/session9_l2.sh s9l2-h200 "$n"
cat "$o/s9l2-h200-summary.txt"
# Issue 19 on one H200: the issue-12 build (22aca8a, before the registry and the file split)
# and this one, alternately, three runs each, then `diff` of each pair (values the same within
# their spread; --timings no slower).
if [ -x ./.gpu/memtopo_old ]; then
  mkdir -p "$o/i19"
  for i in 1 2 3; do
    ./.gpu/memtopo_old --timings -o "$o/i19/old$i.json" > "$o/i19/old$i.txt" 2> "$o/i19/old$i.log"; echo "old $i rc=$?"
    ./.gpu/memtopo --timings -o "$o/i19/new$i.json" > "$o/i19/new$i.txt" 2> "$o/i19/new$i.log"; echo "new $i rc=$?"
    ./.gpu/memtopo diff "$o/i19/old$i.json" "$o/i19/new$i.json" > "$o/i19/diff$i.txt" 2>&1; echo "diff old-new $i rc=$?"
    grep -v "^  run\.\|^conditions" "$o/i19/diff$i.txt" | head -8
    grep -h "^total" "$o/i19/old$i.txt" "$o/i19/new$i.txt"
  done
  tar czf "$o/i19-h200.tgz" -C "$o" i19 && rm -rf "$o/i19"
fi
if nvcc -O3 -arch=sm_90 -o /tmp/bw scripts/gpu/bw_explore.cu > "$o/bw-h200.txt" 2>&1; then
  timeout 90 /tmp/bw >> "$o/bw-h200.txt" 2>&1; echo "bw_explore rc=$?"
  tail -12 "$o/bw-h200.txt"
fi
if nvcc -O2 -arch=sm_90 -o /tmp/l1_sets scripts/gpu/l1_sets.cu -lcuda > "$o/l1_sets16-h200.txt" 2>&1; then
  for a in "1" "1 shift"; do echo "== args $a"; timeout 100 /tmp/l1_sets $a; done >> "$o/l1_sets16-h200.txt" 2>&1
  echo "l1_sets rc=$?"
  grep -E "^capacity|^ways|^offset|^member" "$o/l1_sets16-h200.txt" | cut -c1-200
fi
