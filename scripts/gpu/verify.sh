#!/usr/bin/env bash
# After a change: N default runs (timings, JSON; raw curves of the first), the runner's GPU
# tests, and the device-selection checks (CUDA_VISIBLE_DEVICES by index and by UUID, an
# index that does not exist). Usage: verify.sh TAG [N]; binaries in ./.gpu.
set -uo pipefail
tag=${1:?tag}; n=${2:-3}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
m=./.gpu/memtopo
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw,compute_mode --format=csv > "$out/smi.txt" 2>&1
for i in $(seq 1 "$n"); do
  extra=()
  [ "$i" = 1 ] && extra=(--keep-raw "$out/raw1")
  $m --timings -v -o "$out/run$i.json" "${extra[@]}" > "$out/run$i.txt" 2> "$out/run$i.log"
  echo "run $i rc=$?"
done
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
CUDA_VISIBLE_DEVICES=0 $m --only shared -o "$out/cvd-index.json" > /dev/null 2> "$out/cvd-index.err"; echo "CUDA_VISIBLE_DEVICES=0 rc=$?"
CUDA_VISIBLE_DEVICES=$uuid $m --only shared -o "$out/cvd-uuid.json" > /dev/null 2> "$out/cvd-uuid.err"; echo "CUDA_VISIBLE_DEVICES=UUID rc=$?"
CUDA_VISIBLE_DEVICES=1 $m --only shared > /dev/null 2> "$out/cvd-none.err"; echo "CUDA_VISIBLE_DEVICES=1 rc=$?"; head -3 "$out/cvd-none.err"
python3 - "$out" "$uuid" <<'P'
import json, sys
out, uuid = sys.argv[1], sys.argv[2]
for f in ("cvd-index.json", "cvd-uuid.json"):
    try:
        d = json.load(open(f"{out}/{f}"))
        print(f, "run.gpu uuid:", json.dumps(d.get("run", {})).count(uuid) > 0)
    except Exception as e:
        print(f, "unreadable:", e)
P
./.gpu/runner_it gpu:: > "$out/gpu-tests.txt" 2>&1
echo "gpu tests rc=$?"
grep -E "test result|FAILED|panicked" "$out/gpu-tests.txt" | head
sed -n '/^Element/,/^Device memory/p' "$out/run1.txt"
for i in $(seq 1 "$n"); do grep -hE "^total|^l1 size|^l2 latency" "$out/run$i.txt" | awk '{print $NF, $0}' | cut -c1-90 | tr '\n' ';' ; echo; done
for i in $(seq 1 "$n"); do python3 -c "
import json; d=json.load(open('$out/run$i.json'))['elements']
l1=d['l1_data']; rows=[(r.get('shared_memory_bytes',{}) or {}, r['l1_size']) for r in l1.get('size_per_carveout',[])]
print('run $i: L2 line', d['l2'].get('line_size',{}).get('bytes'), 'L1 rows', [ (r[1].get('bytes') or r[1].get('value')) for r in rows])" 2>&1 | cut -c1-300; done
grep -h "full search" "$out"/run*.log | head -5
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag" && rm -rf "$out"
