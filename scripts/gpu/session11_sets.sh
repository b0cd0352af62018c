#!/usr/bin/env bash
# Session 11, issue 16.1: memtopo's `sets` benchmark (deep) with the reduction to one set,
# twice, and the runner's GPU tests (the list chase among them). Files under
# ${OUT:-/tmp/out}: sets-TAG.tgz (sets-TAG-N.{txt,log,json}, tests-TAG.txt) and
# sets-TAG-summary.txt.
set -uo pipefail
gpu=$(nvidia-smi --query-gpu=name,uuid --format=csv,noheader | head -1)
case "$gpu" in *H200*) tag=h200 ;; *) tag=h100 ;; esac
top=${OUT:-/tmp/out}
o=$top/sets-$tag
mkdir -p "$o"
exec > >(tee "$top/sets-$tag-summary.txt") 2>&1
echo "$gpu"
for i in 1 2; do
  SECONDS=0
  timeout 200 ./.gpu/memtopo --only sets --timings -v -o "$o/sets-$tag-$i.json" > "$o/sets-$tag-$i.txt" 2> "$o/sets-$tag-$i.log"
  echo "sets run $i exit $? in ${SECONDS} s"
  grep -h "^sets:\|^sets \|^total" "$o/sets-$tag-$i.txt"
done
timeout 300 ./.gpu/runner_it gpu --test-threads=1 > "$o/tests-$tag.txt" 2>&1
echo "runner gpu tests exit $?: $(grep -h 'test result' "$o/tests-$tag.txt")"
grep -h "FAILED\|panicked" "$o/tests-$tag.txt" | head -5
tar czf "$top/sets-$tag.tgz" -C "$top" "sets-$tag" && rm -rf "$o"
