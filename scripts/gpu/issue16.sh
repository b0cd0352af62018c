#!/usr/bin/env bash
# Issue 16 on a GPU: the deep benchmarks `tlb` (with the L1, so that the L1 path's data
# limit is the measured L1) and `mlp` twice, each with --timings and -v (the log has every
# TLB level, the page size, the bound and the chases per path, and each MLP curve's
# unloaded latency, saturating chain count, throughput and loads in flight); then one
# default run for its cost (must stay well under 2 s on an H100). Binary: ./.gpu/memtopo.
# Usage: issue16.sh [TAG]; everything under ${OUT:-/tmp/out}/TAG (and TAG.tgz).
set -uo pipefail
tag=${1:-issue16}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
m=./.gpu/memtopo
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,memory.total,memory.used --format=csv > "$out/smi.txt" 2>&1
t=(); [ -x /usr/bin/time ] && t=(/usr/bin/time -v)
for i in 1 2; do
  "${t[@]}" $m --only l1,tlb,mlp --timings -v -o "$out/tlb$i.json" -o "$out/tlb$i.md" \
    > "$out/tlb$i.txt" 2> "$out/tlb$i.log"
  echo "tlb run $i rc=$?"
done
$m --timings -o "$out/default.json" > "$out/default.txt" 2> "$out/default.log"
echo "default run rc=$?"
# What to look at: levels per path, page size, bounds, cost.
for i in 1 2; do
  echo "== tlb run $i"
  grep -hE "tlb global_c[ag]: page|: unloaded " "$out/tlb$i.log" | sed -E 's/^.*(tlb global|mlp )/\1/' | cut -c1-400
  grep -hE "^tlb|^mlp|^total" "$out/tlb$i.txt"
  grep -h "Maximum resident\|Elapsed (wall" "$out/tlb$i.log"
  python3 - "$out/tlb$i.json" <<'P'
import json, sys
d = json.load(open(sys.argv[1]))
for l in d.get("tlb", []):
    cov = l.get("coverage", {}); page = l.get("page_size", {}); miss = l.get("miss_latency", {})
    print(l.get("path"), "level", l["level"], "entries", l.get("entries"),
          "coverage", cov.get("bytes", cov), "page", page.get("bytes", page),
          "miss p50", miss.get("p50"))
for n in d.get("notes", []):
    if "TLB" in n["message"] or "memory-level" in n["message"]:
        print("note:", n["message"])
P
done
grep -hE "^total" "$out/default.txt"
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag"
