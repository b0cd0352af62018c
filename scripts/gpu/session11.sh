#!/usr/bin/env bash
# Session 11 on one GPU (H100 or H200), issue 12.7 (speed): the previous build
# (.gpu/memtopo-base) against this one (.gpu/memtopo) on the same warm machine.
#   1. First runs with an empty JIT cache each (CUDA_CACHE_PATH): this build, this build
#      without the background JIT (MEMTOPO_PRECOMPILE=0), the previous build.
#   2. Warm default runs, alternating previous / this build, ROUNDS times.
#   3. `memtopo diff` of this build's results against the previous build's and itself.
#   4. The runner's GPU tests (.gpu/runner_it gpu), which exercise every launch path.
# Files under ${OUT:-/tmp/out}: TAG.tgz (every log, table and JSON) and TAG-summary.txt.
set -uo pipefail
o=${OUT:-/tmp/out}
rounds=${ROUNDS:-4}
gpu=$(nvidia-smi --query-gpu=name,uuid --format=csv,noheader | head -1)
case "$gpu" in
  *H200*) tag=h200 ;;
  *) tag=h100 ;;
esac
out=$o/$tag
mkdir -p "$out"
s=$out/summary.txt
nvidia-smi --query-gpu=name,uuid,pci.bus_id,driver_version,clocks.sm,clocks.mem --format=csv > "$s" 2>&1
# The embedded PTX through the toolkit's ptxas (the driver's JIT compiles the same text).
for f in ptx/pchase.ptx; do
  ptxas -arch=sm_90 -o /dev/null "$f" > "$out/ptxas.txt" 2>&1
  echo "ptxas $f exit $?" >> "$s"
done
# run NAME BINARY CACHE [ENV...]: one default run with --timings -vv; a summary line with the
# total, the GPU time, the benchmark rows' wall sum and the host phases.
run() {
  local name=$1 bin=$2 cache=$3; shift 3
  mkdir -p "$cache"
  env CUDA_CACHE_PATH="$cache" "$@" timeout 60 "$bin" --timings -vv -o "$out/$name.json" \
    > "$out/$name.txt" 2> "$out/$name.log"
  local rc=$?
  local rows
  rows=$(awk '/^benchmark/{on=1;next} on&&/^total/{on=0} on&&NF>=4{w+=$(NF-2)} END{printf "%.1f", w}' "$out/$name.txt")
  local phases
  phases=$(grep -h "host phase" "$out/$name.log" | sed 's/.*host phase: //; s/ done at /=/' | tr '\n' ';')
  echo "$name exit $rc | $(grep -h '^total' "$out/$name.txt" | tr -s ' ') | rows $rows | $phases" >> "$s"
}
run cold-new .gpu/memtopo /tmp/jit-new
run cold-new-noprecompile .gpu/memtopo /tmp/jit-nopre MEMTOPO_PRECOMPILE=0
run cold-base .gpu/memtopo-base /tmp/jit-base
for i in $(seq 1 "$rounds"); do
  run "base-$i" .gpu/memtopo-base /tmp/jit-base
  run "new-$i" .gpu/memtopo /tmp/jit-new
done
for pair in "base-1 new-1" "new-1 new-2" "base-1 base-2"; do
  set -- $pair
  .gpu/memtopo diff "$out/$1.json" "$out/$2.json" > "$out/diff-$1-$2.txt" 2>&1
  echo "diff $1 $2 exit $?" >> "$s"
  grep -v "^  run\.\|^conditions" "$out/diff-$1-$2.txt" | head -12 >> "$s"
done
grep -h "loaded PTX module\|created the context" "$out/cold-new.log" "$out/new-1.log" | cut -c1-120 >> "$s"
# The L2 step's phases and the line probe's launches, this build and the previous.
for f in base-1 new-1 new-2; do
  echo "$f: $(grep -h 'GPU time' "$out/$f.log" | sed 's/.*L2: //' | tr '\n' ';')" >> "$s"
  grep -h "line probe, A" "$out/$f.log" | cut -c40-200 >> "$s"
  grep -h "near partition overflow\|^  near partition\|^  far partition\|^L2 " "$out/$f.txt" | cut -c1-200 >> "$s"
done
# Per-row wall of this build against the previous one (warm, first round).
paste <(awk '/^benchmark/{on=1;next} on&&/^total/{on=0} on&&NF>=4' "$out/base-1.txt") \
  <(awk '/^benchmark/{on=1;next} on&&/^total/{on=0} on&&NF>=4' "$out/new-1.txt") > "$out/rows-base1-new1.txt"
if [ -x .gpu/runner_it ]; then
  timeout 300 .gpu/runner_it gpu --test-threads=1 > "$out/runner-gpu-tests.txt" 2>&1
  echo "runner gpu tests exit $?: $(grep -h 'test result' "$out/runner-gpu-tests.txt")" >> "$s"
fi
cp "$s" "$o/$tag-summary.txt"
cat "$s"
tar czf "$o/$tag.tgz" -C "$o" "$tag" && rm -rf "$out"
