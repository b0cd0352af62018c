#!/usr/bin/env bash
# Issues 19 and 14 on one GPU: three default runs after the registry refactoring
# (timings, JSON, HTML report with raw curves), the JSON-Lines progress, -q, a bad device,
# diff of two runs, then the runner's GPU tests. Usage: issue19.sh TAG
set -uo pipefail
tag=${1:?tag}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
m=./.gpu/memtopo
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw,compute_mode --format=csv > "$out/smi.txt" 2>&1
for i in 1 2 3; do
  extra=()
  [ "$i" = 1 ] && extra=(--keep-raw "$out/raw1" -o "$out/run1.html")
  $m --timings -v -o "$out/run$i.json" "${extra[@]}" > "$out/run$i.txt" 2> "$out/run$i.log"
  echo "run $i rc=$?"
done
$m --progress json -o - > "$out/progress.json" 2> "$out/progress.jsonl"; echo "progress json rc=$?"
python3 - "$out/progress.jsonl" <<'P'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
started = [l for l in lines if l.get("event") == "benchmark_started"]
first = next((l for l in lines if l.get("event") == "measure_started"), {})
print("progress lines", len(lines), "all JSON; steps estimated", first.get("steps"),
      "steps run", len(started), "last", lines[-1])
P
$m -q > "$out/quiet.txt" 2> "$out/quiet.err"; echo "quiet rc=$? stdout bytes $(wc -c < "$out/quiet.txt")"; head -5 "$out/quiet.err"
$m --device 7 > /dev/null 2> "$out/device7.err"; echo "device 7 rc=$?"; cat "$out/device7.err"
$m --device -1 > /dev/null 2> "$out/device-1.err"; echo "device -1 rc=$?"; cat "$out/device-1.err"
$m diff "$out/run1.json" "$out/run2.json" > "$out/diff12.txt" 2>&1; echo "diff 1-2 rc=$?"; head -20 "$out/diff12.txt"
$m validate "$out/run1.json"; echo "validate rc=$?"
./.gpu/runner_it gpu:: > "$out/gpu-tests.txt" 2>&1
echo "gpu tests rc=$?"
grep -E "test result|FAILED|panicked" "$out/gpu-tests.txt" | head
cat "$out/run1.txt"
grep -hE "total|^clock" "$out"/run[1-3].txt | head -12
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag" && rm -rf "$out"
