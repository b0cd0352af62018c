#!/usr/bin/env bash
# The L2 sweep with 1, 2 and 3 warm-up passes (MEMTOPO_L2_WARMUP_PASSES), twice each:
# does the timed pass agree with the samples taken right after it once the L2 has settled?
set -uo pipefail
tag=${1:?tag}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
for p in 1 2 3; do
  for i in 1 2; do
    MEMTOPO_L2_WARMUP_PASSES=$p ./.gpu/memtopo --only l2 --timings -o "$out/w$p-$i.json" --keep-raw "$out/raw-w$p-$i" > "$out/w$p-$i.txt" 2> "$out/w$p-$i.log"
    echo "warmups $p run $i rc=$?"
    grep -E "^warning|^l2 latency" "$out/w$p-$i.txt" | cut -c1-200
  done
done
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag" && rm -rf "$out"
