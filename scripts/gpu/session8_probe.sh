#!/usr/bin/env bash
# Session 8 on one GPU: the two open questions of issues 16.2 and 17.3.
#  1. TLB: scripts/gpu/tlb_regions.cu (grouped walks: is the L2 path's 16-entry level keyed
#     by 16 MiB of virtual address?) and one memtopo --only l1,tlb -v run beside it.
#  2. cp.async.cg: the SASS of memtopo's copy kernels (ptxas of ptx/asynccopy.ptx) and of
#     tma_check.cu, tma_check again, scripts/gpu/cpasync_probe.cu (specialised kernels,
#     128-1024 threads, 1x/4x unrolled), and memtopo --only async-copy, on the same GPU.
# Binary: ./.gpu/memtopo. Usage: session8_probe.sh [TAG]; everything in
# ${OUT:-/tmp/out}/TAG.tgz plus TAG-summary.txt. About 60-90 s of GPU time.
set -uo pipefail
tag=${1:-s8}
o=${OUT:-/tmp/out}
out=$o/$tag
mkdir -p "$out"
m=./.gpu/memtopo
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,memory.total,memory.used --format=csv > "$out/smi.txt" 2>&1
nvcc --version 2>/dev/null | tail -1 >> "$out/smi.txt"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
arch=sm_${cc:-90}
s=$out/summary.txt
cat "$out/smi.txt" > "$s"

echo "== SASS" >> "$s"
if ptxas -arch=$arch -O3 ptx/asynccopy.ptx -o /tmp/asynccopy.cubin > "$out/ptxas.log" 2>&1; then
  cuobjdump -sass /tmp/asynccopy.cubin > "$out/memtopo-asynccopy.sass" 2>&1
  echo "memtopo asynccopy.sass: $(wc -l < "$out/memtopo-asynccopy.sass") lines" >> "$s"
fi
for f in tma_check cpasync_probe; do
  if nvcc -O2 -arch=$arch -o /tmp/$f scripts/gpu/$f.cu > "$out/nvcc-$f.log" 2>&1; then
    cuobjdump -sass /tmp/$f > "$out/$f.sass" 2>&1
    echo "$f.sass: $(wc -l < "$out/$f.sass") lines" >> "$s"
  else
    echo "nvcc $f failed" >> "$s"; cat "$out/nvcc-$f.log" >> "$s"
  fi
done
if nvcc -O2 -arch=$arch -o /tmp/tlb_regions scripts/gpu/tlb_regions.cu -lcuda > "$out/nvcc-tlb_regions.log" 2>&1; then
  echo "tlb_regions built" >> "$s"
else
  echo "nvcc tlb_regions failed" >> "$s"; cat "$out/nvcc-tlb_regions.log" >> "$s"
fi

echo "== copies" >> "$s"
[ -x /tmp/tma_check ] && timeout 60 /tmp/tma_check > "$out/tma_check.txt" 2>&1; echo "tma_check rc=$?" >> "$s"
[ -x /tmp/cpasync_probe ] && timeout 120 /tmp/cpasync_probe > "$out/cpasync_probe.txt" 2>&1; echo "cpasync_probe rc=$?" >> "$s"
timeout 60 $m --only async-copy --timings -v -o "$out/copy.json" > "$out/copy.txt" 2> "$out/copy.log"
echo "memtopo async-copy rc=$?" >> "$s"
grep -E "cp_async_cg_16|plain_v16" "$out/tma_check.txt" | tail -6 >> "$s"
cat "$out/cpasync_probe.txt" >> "$s" 2>/dev/null
grep -E "^cp.async|^TMA bulk" "$out/copy.txt" | grep -E "KiB" >> "$s"

echo "== TLB" >> "$s"
[ -x /tmp/tlb_regions ] && timeout 300 /tmp/tlb_regions > "$out/tlb_regions.txt" 2>&1; echo "tlb_regions rc=$?" >> "$s"
cat "$out/tlb_regions.txt" >> "$s" 2>/dev/null
timeout 150 $m --only l1,tlb --timings -v -o "$out/tlb.json" > "$out/tlb.txt" 2> "$out/tlb.log"
echo "memtopo tlb rc=$?" >> "$s"
grep -hE "^TLB|^note: TLB|^warning: TLB" "$out/tlb.txt" | cut -c1-400 >> "$s"

cp "$s" "$o/$tag-summary.txt"
tar czf "$o/$tag.tgz" -C "$o" "$tag" && rm -rf "$out"
ls -la "$o"
