#!/usr/bin/env bash
# Issue 16.1 on one GPU: the deep benchmark `sets` (sets, ways, set mapping and
# replacement of the L1 data store, the constant L1 and the constant L1.5), with the caches'
# own benchmarks first so that the search starts from their measured sizes and lines.
# Two runs with --timings and -v: the log has, for every chase, its misses, the nodes that
# missed and the first 256 loads as H/M/f (hit, miss, served by the cache in front), and
# each decision's evidence; then one `--only sets` run alone (its own cost, hints from the
# API only). Keeps well under 90 s of GPU time (each run is a few seconds).
# Binary: ./.gpu/memtopo. Usage: issue16_sets.sh [TAG]; logs under ${OUT:-/tmp/out}/TAG,
# ends with ${OUT:-/tmp/out}/TAG.tgz.
set -uo pipefail
tag=${1:-issue16_sets}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
m=./.gpu/memtopo
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,memory.total,memory.used --format=csv > "$out/smi.txt" 2>&1
for i in 1 2; do
  timeout 120 $m --only l1,constant-l15,sets --timings -v -o "$out/sets$i.json" -o "$out/sets$i.md" \
    > "$out/sets$i.txt" 2> "$out/sets$i.log"
  echo "sets run $i rc=$?"
done
timeout 120 $m --only sets --timings -v -o "$out/alone.json" > "$out/alone.txt" 2> "$out/alone.log"
echo "sets alone rc=$?"
# What to look at: each cache's geometry line, its evidence, the cost, and the chases
# around the first overflow (the per-load patterns the decisions read).
for f in sets1 sets2 alone; do
  echo "== $f"
  grep -hE "^sets:|^sets |^total" "$out/$f.txt"
  python3 - "$out/$f.json" <<'P'
import json, sys
d = json.load(open(sys.argv[1]))
for key, e in d.get("elements", {}).items():
    g = e.get("geometry")
    if not g:
        continue
    print(key, "sets", g.get("sets", {}).get("value"), "ways", g.get("associativity", {}).get("value"),
          "replacement", g.get("replacement"), "mapping", g.get("set_mapping"),
          "not determined:", g.get("not_determined"))
    for line in g.get("evidence", []):
        print("   ", line[:400])
for n in d.get("notes", []):
    if n["message"].startswith("L2 organisation"):
        print("note:", n["message"][:600])
P
done
grep -hE "sets (l1_data|constant_l1|constant_l15): " "$out/sets1.log" | cut -c1-300 | head -80 > "$out/patterns_head.txt"
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag"
