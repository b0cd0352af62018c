#!/usr/bin/env bash
# Issue 16 item 2 on one GPU: TLBs over all of device memory, by two methods.
#  1. memtopo --only l1,tlb -v twice: every walk's p5/p50/p95 per path (global_cg first,
#     then global_ca), per allocation (plain = one cuMemAlloc of ~total - 1/16; chunked =
#     2 MiB chunks mapped in a shuffled order through the VMM API), strides 64 KiB .. 1 GiB.
#  2. scripts/gpu/tlb_vmm.cu (nvcc), an independent cross-check: the same L2-path walk in a
#     plain cuMemAlloc and in shuffled 2 MiB chunks, at strides 2 MiB and 512 MiB, over
#     node counts around the expected levels, printing p5/p50/p95 per walk.
# Binary: ./.gpu/memtopo. Usage: issue16_tlb.sh [TAG]; logs under ${OUT:-/tmp/out}/TAG, all
# of it in ${OUT:-/tmp/out}/TAG.tgz, after which only TAG/summary.txt stays beside the
# archive (two files come back). GPU time: one or two tlb runs (the second only where the
# first took under 45 s) and the .cu check (≈ 20 s): under ~120 s.
set -uo pipefail
tag=${1:-issue16-tlb}
out=${OUT:-/tmp/out}/$tag
mkdir -p "$out"
m=./.gpu/memtopo
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,memory.total,memory.used --format=csv > "$out/smi.txt" 2>&1
nvcc --version 2>/dev/null | tail -1 >> "$out/smi.txt"
runs=0
for i in 1 2; do
  start=$(date +%s)
  timeout 150 $m --only l1,tlb --timings -v -o "$out/tlb$i.json" > "$out/tlb$i.txt" 2> "$out/tlb$i.log"
  rc=$?
  wall=$(( $(date +%s) - start ))
  runs=$i
  echo "memtopo tlb run $i rc=$rc wall ${wall} s" | tee -a "$out/summary.txt"
  [ "$wall" -lt 45 ] || break
done
if command -v nvcc > /dev/null; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
  if nvcc -O2 -arch=sm_${cc:-90} -o /tmp/tlb_vmm scripts/gpu/tlb_vmm.cu -lcuda > "$out/nvcc.log" 2>&1; then
    timeout 240 /tmp/tlb_vmm > "$out/vmm_check.txt" 2>&1
    echo "tlb_vmm rc=$?" | tee -a "$out/summary.txt"
  else
    echo "nvcc failed (see nvcc.log)" | tee -a "$out/summary.txt"
  fi
fi
# What to look at: per allocation and path, the page size, levels (entries, reach, miss)
# and bound; the L1-path note; the cost of each step.
{
  for i in $(seq 1 $runs); do
    echo "== tlb run $i"
    grep -hE "tlb (plain|chunked)( region| global_c[ag]):" "$out/tlb$i.log" | sed -E 's/^.*(tlb (plain|chunked))/\1/' | cut -c1-300
    grep -hE "^TLB|^note: TLB|^warning: TLB|^tlb|^total" "$out/tlb$i.txt"
  done
  echo "== vmm check"; cat "$out/vmm_check.txt" 2>/dev/null | tail -60
} >> "$out/summary.txt"
cat "$out/summary.txt"
tar czf "${OUT:-/tmp/out}/$tag.tgz" -C "${OUT:-/tmp/out}" "$tag"
find "$out" -type f ! -name summary.txt -delete
ls -la "${OUT:-/tmp/out}/$tag.tgz" "$out"
