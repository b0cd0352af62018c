#!/usr/bin/env bash
# Session 12, issue 15: does the bandwidth tuner find the best shape of its kernels?
# GPU 0: the exhaustive sweep of the memory levels' spaces with long launches
# (examples/bandwidth_sweep.rs, the kernels' ceiling), then the previous build
# (.gpu/memtopo-a: 100 µs search launches for device memory, two finalists) and the new
# one (.gpu/memtopo: 400 µs, three) alternating, six bandwidth-only runs each, with
# --timings. Files: ${OUT:-/tmp/out}/TAG.tgz; the summary on stdout.
set -uo pipefail
tag=${1:-s12-tuner}
o=${OUT:-/tmp/out}
d=/tmp/$tag
mkdir -p "$d"
nvidia-smi -L > "$d/gpu.txt"
cat "$d/gpu.txt"
./.gpu/bandwidth_sweep memory-read memory-write memory-copy --top 16 > "$d/sweep.txt" 2>&1
echo "sweep exit $?"
for i in 1 2 3 4 5 6; do
  for b in a b; do
    bin=./.gpu/memtopo; [ $b = a ] && bin=./.gpu/memtopo-a
    $bin --only bandwidth-l1,bandwidth-shared,bandwidth-l2,bandwidth-memory --timings -v -o "$d/$b$i.json" > "$d/$b$i.txt" 2> "$d/$b$i.log"
    echo "$b$i exit $?" >> "$d/exit.txt"
  done
done
# The device-memory benchmark alone (no L1, shared or L2 runs before it in the process).
for i in 1 2 3; do
  ./.gpu/memtopo --only bandwidth-memory --timings -v -o "$d/m$i.json" > "$d/m$i.txt" 2> "$d/m$i.log"
done
./.gpu/bandwidth_sweep memory-read --top 8 > "$d/sweep2.txt" 2>&1
python3 - "$d" <<'P'
import json, re, sys
d = sys.argv[1]
for b in "ab":
    print(f"== build {b}")
    for i in range(1, 7):
        try:
            e = json.load(open(f"{d}/{b}{i}.json"))["elements"]
        except Exception as ex:
            print(f"  run {i}: no result {ex}")
            continue
        parts = []
        for k in ("read", "write", "copy"):
            v = e["device_memory"]["bandwidth"][k]
            L = v["launch"]
            parts.append(f"{k} {100 * v['peak']['fraction']:.1f} % ({L['instruction'].replace('ld.global.', '')} {L['vector_bytes']}x{L['unroll']} {L['blocks_per_sm']}x{L['threads_per_block']})")
        l2 = e["l2"]["bandwidth"]
        parts.append("L2 %.0f/%.0f/%.0f" % tuple(l2[k]["value"] for k in ("read", "read_near_partition", "write")))
        gpu = 0.0
        for line in open(f"{d}/{b}{i}.txt"):
            m = re.match(r"bandwidth-\S+ \(.*\)\s+([\d.]+)\s+([\d.]+)", line)
            if m:
                gpu += float(m.group(2))
        parts.append(f"bandwidth GPU {gpu:.0f} ms")
        print(f"  run {i}: " + "; ".join(parts))
P
for i in 1 2 3; do python3 -c "
import json,sys; v=json.load(open(sys.argv[1]))['elements']['device_memory']['bandwidth']
print('memory alone $i:', '; '.join(f\"{k} {100*v[k]['peak']['fraction']:.1f} % ({v[k]['launch']['vector_bytes']}x{v[k]['launch']['unroll']} {v[k]['launch']['blocks_per_sm']}x{v[k]['launch']['threads_per_block']})\" for k in ('read','write','copy')))" "$d/m$i.json"; done
grep -A17 "memory read:" "$d/sweep.txt" | head -18
grep -A6 "memory write:\|memory copy:" "$d/sweep.txt"
grep -A9 "memory read:" "$d/sweep2.txt"
tar czf "$o/$tag.tgz" -C /tmp "$tag"
