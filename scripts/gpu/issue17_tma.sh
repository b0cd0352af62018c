#!/usr/bin/env bash
# Issue 17 item 3 on one GPU: copies from global to shared memory (benchmark async-copy, --deep):
# a standalone CUDA check of the latencies (scripts/gpu/tma_check.cu, if nvcc is there), then
# `memtopo --only async-copy` twice (timings, JSON, -v log), validate, diff, and a summary of
# what to compare. Usage: issue17_tma.sh [TAG]. Expects the release binary at ./.gpu/memtopo.
# Writes ${OUT:-/tmp/out}/TAG/{summary.txt,run1.json,run1.log,run2.json,run2.log} and TAG.tgz.
# GPU time: the standalone check well under 1 s; each memtopo run an estimated 1-3 s (JIT of
# two small modules, 12 sizes x 7 paths x 2 launches) plus its clock calibration.
set -uo pipefail
tag=${1:-issue17_tma}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
m=./.gpu/memtopo
s="$out/summary.txt"
{
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1
  echo "== standalone check (scripts/gpu/tma_check.cu)"
  if command -v nvcc > /dev/null; then
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
    if nvcc -arch=sm_${arch:-90} -O2 -o /tmp/tma_check scripts/gpu/tma_check.cu 2>&1; then
      timeout 120 /tmp/tma_check 2>&1; echo "tma_check rc=$?"
    else
      echo "nvcc failed"
    fi
  else
    echo "no nvcc: skipped"
  fi
} > "$s" 2>&1
cat "$s"
for i in 1 2; do
  timeout 300 $m --only async-copy --timings -v -o "$out/run$i.json" > "$out/run$i.log" 2>&1
  rc=$?
  echo "== async-copy run $i rc=$rc" | tee -a "$s"
  grep -E "async-copy|total|error|warn|WrongResult|cuTensorMap|not applicable|asynccopy|tma" "$out/run$i.log" | head -30 | tee -a "$s"
done
{
  echo "== validate"; $m validate "$out/run1.json" "$out/run2.json"; echo "validate rc=$?"
  echo "== diff run1 run2"; $m diff "$out/run1.json" "$out/run2.json"; echo "diff rc=$?"
} >> "$s" 2>&1
python3 - "$out/run1.json" "$out/run2.json" >> "$s" 2>&1 <<'P'
import json, sys
for path in sys.argv[1:]:
    try:
        t = json.load(open(path))
    except Exception as e:
        print(path, "unreadable:", e); continue
    c = t.get("copies_to_shared")
    print("\n###", path, "schema", t.get("schema_version"), "SM clock", t.get("conditions", {}).get("sm_clock_mhz"))
    if not c:
        print("no copies_to_shared; notes:", [n["message"] for n in t.get("notes", [])][:10]); continue
    print("source:", c.get("source"))
    for na in c.get("not_applicable", []):
        print("not applicable:", na["path"], "-", na["reason"])
    best = {}
    for p in c.get("paths", []):
        for z in p["sizes"]:
            l = z.get("latency") or {}
            b = z["bytes"]["value"] if isinstance(z["bytes"], dict) else z["bytes"]
            best.setdefault(b, []).append((l.get("p50", 1e9), p["path"], z.get("bytes_per_clock_per_sm") or 0))
            tile = f" tile {z['tile']}" if z.get("tile") else ""
            L = z.get("launch") or {}
            print(f"{p['path']:15} {b:7}{tile:16} lat p5/p50/p95 {z.get('latency_p5')}/{l.get('p50')}/{l.get('p95')}"
                  f" n={l.get('samples')}  {z.get('bytes_per_clock_per_sm')} B/clk/SM  {z.get('gigabytes_per_second')} GB/s"
                  f"  launch {L.get('blocks_per_sm')}x{L.get('threads_per_block')} depth {L.get('copies_in_flight')}")
    print("\nwinners per size (lowest p50 latency | highest B/clk/SM):")
    for b in sorted(best):
        lat = min(best[b]); bw = max(best[b], key=lambda x: x[2])
        print(f"  {b:7} B: latency {lat[1]} ({lat[0]}) | bandwidth {bw[1]} ({bw[2]})")
P
cat >> "$s" <<'T'

What to check:
 1. both runs rc=0 (exit 9 only if the GPU was disturbed); no warning "async-copy <path> at N B: ..."
    (a WrongResult there means a copy did not land where the kernel says; cuTensorMapEncodeTiled
    errors mean the driver refused the tensor map); validate rc=0.
 2. on an H100/H200 all seven paths measured, none not applicable; on an Ampere only the bulk two
    are "not applicable"; older: all seven.
 3. memtopo's bulk / cp_async_cg_16 / plain_v16 p50 within ~10 % (plus the clock overhead, tens of
    cycles, which memtopo subtracts) of the standalone check at the same sizes; check column "ok".
 4. latency grows with size (fixed part a few hundred cycles above the L2 hit latency ~270, then
    bytes / stream rate); p5 <= p50 <= p95 tight (a few %) for small sizes.
 5. bandwidth: plausible B/clk/SM (tens, under ~128); TMA bulk should win bandwidth at large sizes
    with one thread issuing; cp.async.ca 4 B well below 16 B; GB/s below the L2's ~8 TB/s.
 6. tensor tiles vs bulk at the same bytes (256 B ... 128 KiB): the 2-D form pays per row.
 7. run1 vs run2 diff: few or no changes beyond the uncertainty; the async-copy wall time in the
    --timings table (to decide whether it could join the default run).
T
cat "$s" | tail -80
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag"
