#!/usr/bin/env bash
# Session 12: with launches back to back and alternating buffers, do device memory's
# search launches still need 400 µs and three finalists? Six `--only bandwidth-memory`
# runs each of this build (.gpu/memtopo) and of the same build with 100 µs search
# launches and two finalists (.gpu/memtopo-c), alternating. Files: ${OUT:-/tmp/out}/TAG.tgz.
set -uo pipefail
tag=${1:-s12-tuning}
o=${OUT:-/tmp/out}
d=/tmp/$tag
mkdir -p "$d"
nvidia-smi -L | tee "$d/gpu.txt"
for i in 1 2 3 4 5 6; do
  for b in b c; do
    bin=./.gpu/memtopo; [ $b = c ] && bin=./.gpu/memtopo-c
    $bin --only bandwidth-memory --timings -v -o "$d/$b$i.json" > "$d/$b$i.txt" 2> "$d/$b$i.log"
    echo "$b$i exit $?" >> "$d/exit.txt"
  done
done
cat "$d/exit.txt" | tr '\n' ' '; echo
python3 - "$d" <<'P'
import json, re, sys
d = sys.argv[1]
for b in "bc":
    rows = []
    for i in range(1, 7):
        t = json.load(open(f"{d}/{b}{i}.json"))
        bw = t["elements"]["device_memory"]["bandwidth"]
        gpu = sum(float(m.group(1)) for line in open(f"{d}/{b}{i}.txt")
                  if (m := re.match(r"bandwidth-memory \(.*\)\s+[\d.]+\s+([\d.]+)", line)))
        L = bw["read"]["launch"]
        rows.append(f"read {100 * bw['read']['peak']['fraction']:.1f} ({L['instruction'][10:]} {L['vector_bytes']}x{L['unroll']} {L['blocks_per_sm']}x{L['threads_per_block']}), write {100 * bw['write']['peak']['fraction']:.1f}, copy {100 * bw['copy']['peak']['fraction']:.1f}; {gpu:.0f} ms GPU")
    print(f"== build {b}")
    for r in rows:
        print("  " + r)
P
tar czf "$o/$tag.tgz" -C /tmp "$tag"
