#!/usr/bin/env bash
# Issue 17 on one Hopper GPU: the GPC map and DSMEM benchmarks twice (timings, JSON, verbose
# log), a default run for their cost inside it, then what to check. Usage: issue17.sh [TAG]
# Expects the release binary at ./.gpu/memtopo. Logs under ${OUT:-/tmp/out}/TAG.
set -uo pipefail
tag=${1:-issue17}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
m=./.gpu/memtopo
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$out/smi.txt" 2>&1
cat "$out/smi.txt"
for i in 1 2; do
  $m --only gpc-map,dsmem --timings -vv -o "$out/run$i.json" > "$out/run$i.txt" 2> "$out/run$i.log"
  echo "== cluster run $i rc=$?"
  grep -E "gpc-map|dsmem|total|error|warning|cuLaunchKernelEx|cuOccupancy|cuGetProcAddress|cluster" "$out/run$i.txt" "$out/run$i.log" | grep -v "^.*TRACE" | head -40
done
$m --timings -o "$out/full.json" > "$out/full.txt" 2> "$out/full.log"
echo "== default run rc=$?  (cost of the two benchmarks: their wall times below; total beside)"
grep -E "gpc-map|dsmem|total" "$out/full.txt" "$out/full.log" | head -12
$m validate "$out/run1.json"; echo "validate rc=$?"
python3 - "$out/run1.json" "$out/run2.json" "$out/full.json" <<'P'
import json, sys
runs = []
for path in sys.argv[1:]:
    try:
        runs.append(json.load(open(path)))
    except Exception as e:
        print(path, "unreadable:", e); runs.append({})
for path, t in zip(sys.argv[1:], runs):
    c = t.get("clusters")
    print("\n###", path, "schema", t.get("schema_version"))
    if not c:
        print("no clusters section; notes:", [n["message"] for n in t.get("notes", [])][:8]); continue
    print("residency (size: clusters):", {r["cluster_size"]: r["clusters"] for r in c.get("residency", [])})
    g = c.get("gpcs", [])
    print("GPCs:", len(g), "sizes", [len(x["sms"]) for x in g], "SMs covered", sum(len(x["sms"]) for x in g),
          "consistent halves:", c.get("gpc_map_consistent"), "unassigned SMs:", c.get("unassigned_sms", []))
    for x in g:
        print("  GPC sms", x["sms"], "L2 partitions", x.get("l2_partitions"), "dsmem p50", x.get("dsmem_p50"))
    for d in c.get("dsmem", []):
        l = d["latency"]
        print(f"  size {d['cluster_size']:2}: p25/p50/p75/p95 {l.get('p25')}/{l['p50']}/{l.get('p75')}/{l['p95']} n={l['samples']}"
              f"  by rank {[(r['rank'], r['p50']) for r in d.get('latency_by_rank', [])]}"
              f"  read {d.get('read_bytes_per_cycle')} write {d.get('write_bytes_per_cycle')} B/clk/SM")
    print("  local read B/clk/SM:", c.get("local_read_bytes_per_cycle"))
    print("  notes:", [n["message"] for n in t.get("notes", []) if "cluster" in n["message"] or "dsmem" in n["message"] or "gpc" in n["message"]])
a, b = (r.get("clusters", {}) for r in runs[:2])
same = [x["sms"] for x in a.get("gpcs", [])] == [x["sms"] for x in b.get("gpcs", [])]
print("\nGPC map identical in runs 1 and 2:", same)
P
cat <<'T'

What to check:
 1. both cluster runs rc=0; no "not measured"/warning about gpc-map or dsmem; validate rc=0.
 2. residency: size 16 > 0 (non-portable allowed on H100); 1..8 all > 0.
 3. GPCs: 8 (NVIDIA: 8 GPCs on the 132-SM H100 SXM5), expected 18x6, 16, 8 from the first run's residency;
    unassigned SMs empty (if not: the pairs every size 2-16 left over; the count is then a lower bound);
    halves consistent; identical in runs 1 and 2; residency now lists every size 1-16.
 4. DSMEM p50 about 180-210 cycles (published) at sizes 2..16, ~ the same per rank; size 1 (own
    shared through the cluster window) near the shared latency (~30).
 5. read/write B/clk/SM plausible (tens of bytes per cycle); local read above the remote.
 6. default run: the wall times of gpc-map and dsmem (their cost; target <= ~1 s together).
T
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag"
