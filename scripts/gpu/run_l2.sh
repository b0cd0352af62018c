#!/usr/bin/env bash
# The L2 and memory benchmarks of the current build, twice, with raw curves and samples.
set -uo pipefail
tag=${1:?tag}
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/r
for i in 1 2; do
  ./.gpu/memtopo --only l2,memory --timings -vv -o /tmp/r/run$i.json -o /tmp/r/run$i.md --keep-raw /tmp/r/raw$i > /tmp/r/run$i.txt 2> /tmp/r/run$i.log
  echo "run $i rc=$?"
done
cat /tmp/r/run1.txt; grep -E "note|warn" /tmp/r/run2.txt | cut -c1-400
tail -5 /tmp/r/run1.log
tar czf "$out/$tag-l2.tgz" -C /tmp/r .
