#!/usr/bin/env bash
# Session 12, the final build on one GPU: four default runs of session 11's build
# (.gpu/memtopo-a) and of this one (.gpu/memtopo), alternating, with --timings; the run
# record's new memory conditions (schema 1.7); `memtopo diff` between the builds; the
# memory levels' sweep (examples/bandwidth_sweep) and the runner's GPU tests.
# Files: ${OUT:-/tmp/out}/TAG.tgz; the summary on stdout.
set -uo pipefail
tag=${1:-s12-final}
o=${OUT:-/tmp/out}
d=/tmp/$tag
mkdir -p "$d"
nvidia-smi -L | tee "$d/gpu.txt"
for i in 1 2 3 4; do
  for b in a b; do
    bin=./.gpu/memtopo; [ $b = a ] && bin=./.gpu/memtopo-a
    $bin --timings -o "$d/$b$i.json" > "$d/$b$i.txt" 2> "$d/$b$i.log"
    echo "$b$i exit $?" >> "$d/exit.txt"
  done
done
./.gpu/memtopo diff "$d/a1.json" "$d/b1.json" > "$d/diff-a1-b1.txt" 2>&1; echo "diff a1 b1 exit $?" >> "$d/exit.txt"
./.gpu/memtopo diff "$d/b1.json" "$d/b2.json" > "$d/diff-b1-b2.txt" 2>&1; echo "diff b1 b2 exit $?" >> "$d/exit.txt"
cat "$d/exit.txt" | tr '\n' ' '; echo
python3 - "$d" <<'P'
import json, re, sys
d = sys.argv[1]
for b in "ab":
    print(f"== build {b}")
    for i in range(1, 5):
        try:
            t = json.load(open(f"{d}/{b}{i}.json"))
        except Exception as ex:
            print(f"  run {i}: no result {ex}")
            continue
        e = t["elements"]
        bw = e["device_memory"]["bandwidth"]
        wall = gpu = None
        for line in open(f"{d}/{b}{i}.txt"):
            m = re.match(r"total \(including context creation\)\s+([\d.]+)\s+([\d.]+)", line)
            if m:
                wall, gpu = float(m.group(1)), float(m.group(2))
        l1 = (e.get("l1_data") or {}).get("size") or {}
        run = t.get("run") or {}
        cond = {k: (run.get("before") or {}).get(k) for k in ("memory_temperature_c", "remapped_rows", "row_remap_pending")}
        print(f"  run {i}: {wall} ms wall, {gpu} ms GPU; read {100 * bw['read']['peak']['fraction']:.1f} %, write {100 * bw['write']['peak']['fraction']:.1f} %,"
              f" copy {100 * bw['copy']['peak']['fraction']:.1f} %; L1 {l1.get('value')} {l1.get('unit', '')}; memory conditions before {cond}")
P
grep -h "state (before" "$d/b1.txt"
head -20 "$d/diff-a1-b1.txt"
tar czf "$o/$tag.tgz" -C /tmp "$tag"
# What reading the memory's conditions from NVML costs (twice a run).
RUST_LOG=memtopo=debug ./.gpu/memtopo --only shared -o "$d/shared.json" 2>&1 | grep "NVML: memory" | tee "$d/nvml-cost.txt"
# The kernels' ceiling with this build's timing (launches back to back).
./.gpu/bandwidth_sweep memory-read memory-write memory-copy --top 5 > "$d/sweep.txt" 2>&1
grep -A3 "shapes in" "$d/sweep.txt"
# The runner's GPU tests (the bandwidth tuner's among them) on this build.
./.gpu/runner_it gpu --test-threads=1 > "$d/runner-gpu-tests.txt" 2>&1
echo "runner GPU tests exit $?"; grep -E "^test result|FAILED|skipped" "$d/runner-gpu-tests.txt" | head -5
tar czf "$o/$tag.tgz" -C /tmp "$tag"
