#!/usr/bin/env bash
# Session 7, after the fixes the merged build's first run asked for (TLB rule, instruction-
# cache ramps, L2 line rule): the TLB and instruction-cache scripts, the GPC fingerprint,
# then five default runs and one --deep run (session6_final.sh). Binaries in ./.gpu.
# Usage: session7_verify.sh TAG; each part tars itself into ${OUT:-/tmp/out}.
set -uo pipefail
tag=${1:?tag}
o=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,uuid --format=csv,noheader
t0=$(date +%s)
bash scripts/gpu/issue16_tlb.sh "${tag}-tlb" > "$o/${tag}-tlb.txt" 2>&1; echo "tlb rc=$? at $(( $(date +%s) - t0 )) s"; rm -rf "$o/${tag}-tlb"
bash scripts/gpu/issue16_icache.sh "${tag}-icache" > "$o/${tag}-icache.txt" 2>&1; echo "icache rc=$? at $(( $(date +%s) - t0 )) s"; rm -rf "$o/${tag}-icache"
nvcc -O2 -arch=sm_90 -o /tmp/gpc_fp scripts/gpu/gpc_fingerprint.cu && /tmp/gpc_fp > "$o/${tag}-fp.csv" 2> "$o/${tag}-fp.err"; echo "fingerprint rc=$?"
gzip -f "$o/${tag}-fp.csv"
bash scripts/gpu/session6_final.sh "${tag}-final" > "$o/${tag}-final.txt" 2>&1; echo "final rc=$? at $(( $(date +%s) - t0 )) s"; rm -rf "$o/${tag}-final"
grep -hE "^L2  " "$o/${tag}-final.txt"
cd "$o" && tar czf "${tag}-logs.tgz" ${tag}-*.txt ${tag}-fp.err && rm -f ${tag}-*.txt ${tag}-fp.err; ls "$o"
