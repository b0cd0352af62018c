#!/usr/bin/env bash
# Issue 16, items 3 and 4 (session 7): the deep benchmarks `icache` (instruction caches) and
# `mlp` (memory-level parallelism, now up to 256 chains per SM) on one GPU.
#  1. `--only icache,mlp` with -v and --timings, the generated instruction-fetch PTX dumped
#     (MEMTOPO_DUMP_PTX): the log has the JIT time of the 1 MiB module, every code size's
#     three costs (cycles per instruction), each level, and each MLP curve's summary.
#  2. `--only icache` again (the driver's JIT cache warm): the levels must repeat.
#  3. The SASS of the dumped module, assembled with this machine's ptxas for its own
#     architecture: 65536 FFMA (2048 segments × 32) and a .text of 1 MiB + a few hundred
#     bytes, i.e. 16 bytes per instruction, as the benchmark assumes.
# Binary: ./.gpu/memtopo. Usage: issue16_icache.sh [TAG]; logs under ${OUT:-/tmp/out}/TAG
# (7 files) and TAG.tgz. About 20-40 s of GPU time.
set -uo pipefail
tag=${1:-issue16_icache}
root=${OUT:-/tmp/out}
out=$root/$tag
mkdir -p "$out"
m=./.gpu/memtopo
ptx=$(mktemp -d)
check=$out/check.txt
nvidia-smi --query-gpu=name,uuid,driver_version,compute_cap,clocks.sm,clocks.mem,memory.total,memory.used --format=csv > "$check" 2>&1

MEMTOPO_DUMP_PTX=$ptx $m --only icache,mlp --timings -v -o "$out/run1.json" -o "$out/run1.md" \
  > "$out/run1.txt" 2> "$out/run1.log"
echo "run 1 (icache, mlp) rc=$?"
$m --only icache --timings -v -o "$out/run2.json" > "$out/run2.log" 2>&1
echo "run 2 (icache again) rc=$?"

# The SASS size of the module the runner generated.
{
  echo "== SASS of the generated module"
  ls -l "$ptx"
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
  src=$(ls "$ptx"/icache_*.ptx 2>/dev/null | head -1)
  PTXAS=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
  CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  if [ -n "$src" ] && [ -x "$PTXAS" ] && [ -x "$CUOBJDUMP" ]; then
    "$PTXAS" --version | tail -1
    /usr/bin/time -f "ptxas wall %e s" "$PTXAS" -arch=sm_$cc -o "$ptx/icache.cubin" "$src" 2>&1
    echo "FFMA in the SASS: $("$CUOBJDUMP" -sass "$ptx/icache.cubin" | grep -c FFMA) (expected 32 x segments of $src)"
    echo "instructions in the SASS: $("$CUOBJDUMP" -sass "$ptx/icache.cubin" | grep -cE '^\s+/\*[0-9a-f]{4,}\*/')"
    "$CUOBJDUMP" -elf "$ptx/icache.cubin" | grep -E "PROGBITS.*\.text\.icache_ffma" \
      | awk '{print "text section size (hex):", $3}'
    echo "-- the loop head and the first segment:"
    "$CUOBJDUMP" -sass "$ptx/icache.cubin" | grep -E '^\s+/\*[0-9a-f]{4,}\*/' | grep -B2 -A3 BRX | head -12
  else
    echo "no dumped PTX ($src) or no ptxas/cuobjdump ($PTXAS, $CUOBJDUMP)"
  fi
} >> "$check" 2>&1
rm -rf "$ptx"

summary() {
  echo "== $1"
  grep -hE "JIT-compiled icache|icache level|icache: .*KiB of code|: unloaded " "$out/$2" \
    | sed -E 's/^.*(JIT-compiled|icache|mlp )/\1/' | cut -c1-300
  grep -hE "^(icache|mlp|total)" "$out/${3:-$2}" 2>/dev/null
  python3 - "$out/$4" <<'P'
import json, sys
d = json.load(open(sys.argv[1]))
for l in d.get("instruction_caches", []):
    size = l.get("size")
    print("icache level", l["level"], "size", size and size.get("value", size),
          "cycles/instr %.3f" % l["cycles_per_instruction"], "tried up to", l.get("tried_up_to"))
for n in d.get("notes", []):
    if "memory-level" in n["message"] or "instruction" in n["message"]:
        print("note:", n["severity"], n["message"][:400])
P
}
summary "run 1" run1.log run1.txt run1.json
summary "run 2" run2.log run2.log run2.json
cat "$check"
tar czf "$root/$tag.tgz" -C "$root" "$tag"
