#!/usr/bin/env bash
# Issue 12.6 / 13 leftovers on one GPU (branch `accuracy`): the L2 edge confirmation must
# raise no false alarm on a quiet GPU and must cost little; a disturbed benchmark's element
# is marked [DISTURBED] in every output; the constant L1.5's own line and the copies per SM.
# Usage: issue13_rest.sh TAG [N]   (memtopo at ./.gpu/memtopo, logs under ${OUT:-/tmp/out})
set -uo pipefail
tag=${1:?tag}; n=${2:-5}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
M=./.gpu/memtopo
# 1. N quiet runs: every exit 0 (the L2 confirmation found nothing), the L2 edges, the
#    confirmation's cost (--timings covers the session; the confirmation runs after it, so
#    the wall time of the whole command is printed too).
for i in $(seq 1 "$n"); do
  start=$(date +%s.%N)
  $M --timings -o "$out/quiet-$i.json" -o "$out/quiet-$i.md" > "$out/quiet-$i.txt" 2> "$out/quiet-$i.log"
  rc=$?; end=$(date +%s.%N)
  echo "quiet run $i: exit $rc (0 expected), wall $(awk "BEGIN{printf \"%.2f\", $end - $start}") s"
  grep -E "not confirmed|DISTURBED|disturbed" "$out/quiet-$i.txt" "$out/quiet-$i.log" | head -5
  grep -E "^(L2|  near|  far|Constant L1|Texture|L1 data) " "$out/quiet-$i.txt"
done
# 2. The L2 alone with its confirmation, verbose: the probes' sizes and shares in the log.
$M --only l2 -vv -o "$out/l2.json" > "$out/l2.txt" 2> "$out/l2.log"; echo "l2 alone: exit $? (0 expected)"
grep -E "near edge|far edge|confirm" "$out/l2.log" | head -10
# 3. A streaming load that starts during a run: exit 9, and the elements measured after it
#    are marked [DISTURBED] in the table, the Markdown, the SVG and the JSON (`disturbed`).
nvcc -O2 -o /tmp/load scripts/gpu/load.cu || exit 1
$M -o "$out/late.json" -o "$out/late.md" -o "$out/late.svg" -o "$out/late.mt4g.json" > "$out/late.txt" 2>&1 & RUN=$!
sleep 0.7; /tmp/load 6 > "$out/load.txt" 2>&1 & LOAD=$!
wait $RUN; echo "load starting during a run: exit $? (9 expected)"; wait $LOAD
grep -E "DISTURBED" "$out/late.txt" | head -12
echo "marked in: md $(grep -c 'DISTURBED' "$out/late.md"), svg $(grep -c 'DISTURBED' "$out/late.svg"), mt4g $(grep -c memtopoDisturbed "$out/late.mt4g.json")"
python3 - "$out/late.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k, e in d["elements"].items():
    if "disturbed" in e:
        print(f"  {k}: disturbed: {e['disturbed'][:160]}")
PY
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag" && rm -rf "$out"
