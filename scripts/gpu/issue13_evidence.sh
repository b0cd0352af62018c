#!/usr/bin/env bash
# Issue 13 evidence on one GPU: a clean run, runs beside a heavy load (refused, then
# --allow-busy), a load that starts during a run, two instances at once, and N
# back-to-back runs. Usage: issue13_evidence.sh TAG [N]
set -uo pipefail
tag=${1:?tag}; n=${2:-20}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
M=./.gpu/memtopo
nvcc -O2 -o /tmp/load scripts/gpu/load.cu || exit 1
$M -o "$out/clean.json" > "$out/clean.txt" 2>&1; echo "clean: exit $?"
/tmp/load 40 > "$out/load1.txt" 2>&1 & LOAD=$!; sleep 5
$M -o "$out/busy-refused.json" > "$out/busy-refused.txt" 2>&1; echo "beside a load: exit $? (8 expected)"; tail -3 "$out/busy-refused.txt"
$M --allow-busy -o "$out/busy.json" -o "$out/busy.md" > "$out/busy.txt" 2>&1; echo "--allow-busy beside a load: exit $?"; head -3 "$out/busy.txt"; grep -E "^(L1 data|L2|  near|  far)" "$out/busy.txt"
wait $LOAD
$M -o "$out/late.json" > "$out/late.txt" 2>&1 & RUN=$!; sleep 0.7; /tmp/load 6 > "$out/load2.txt" 2>&1 & LOAD=$!
wait $RUN; echo "load starting during a run: exit $? (9 expected)"; grep -E "disturbed|WARNING" "$out/late.txt" | head -5; wait $LOAD
$M -q -o "$out/first.json" > "$out/first.txt" 2>&1 & FIRST=$!; sleep 0.3
$M -q --wait 0 -o "$out/second.json" > "$out/second.txt" 2>&1; echo "second instance, --wait 0: exit $? (8 expected)"; tail -2 "$out/second.txt"
$M -q --wait 60 -o "$out/third.json" > "$out/third.txt" 2>&1; echo "third instance, --wait 60: exit $? (0 expected)"
wait $FIRST; echo "first instance: exit $?"
for i in $(seq 1 "$n"); do
  $M -q -o "$out/b2b-$i.json" > /dev/null 2> "$out/b2b-$i.log"; echo -n "$? "
done; echo " (back-to-back exits)"
python3 - "$out" "$n" <<'PY'
import json, sys, collections
out, n = sys.argv[1], int(sys.argv[2])
vals = collections.defaultdict(list)
for i in range(1, n + 1):
    try:
        d = json.load(open(f"{out}/b2b-{i}.json"))
    except Exception as e:
        print("run", i, "unreadable:", e); continue
    for k, e in d["elements"].items():
        s = e.get("size") or {}
        if "value" in s: vals[k + " size"].append(s["value"])
        l = e.get("latency") or {}
        if "p50" in l: vals[k + " p50"].append(l["p50"])
    p = d["elements"].get("l2", {}).get("partitions", {})
    for q in ["size_each", "far_size"]:
        if "value" in p.get(q, {}): vals["l2 " + q].append(p[q]["value"])
    for q in ["near_latency", "far_latency"]:
        if "p50" in p.get(q, {}): vals["l2 " + q + " p50"].append(p[q]["p50"])
for k, v in sorted(vals.items()):
    print(f"{k:32s} n={len(v):2d} min={min(v)} max={max(v)} distinct={len(set(v))}")
PY
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag" && rm -rf "$out"
