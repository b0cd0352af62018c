#!/usr/bin/env bash
# Session 7's merged build on one GPU: the helpers' scripts (sets, copies, instruction caches
# and MLP, TLBs), then five default runs and one --deep run with validate/render/diff
# (session6_final.sh). Binaries in ./.gpu. Usage: session7_final.sh TAG; every part tars
# itself into ${OUT:-/tmp/out}; a summary goes to stdout.
set -uo pipefail
tag=${1:?tag}
o=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,uuid --format=csv,noheader
t0=$(date +%s)
bash scripts/gpu/issue17_tma.sh "${tag}-tma" > "$o/${tag}-tma.txt" 2>&1; echo "tma rc=$? at $(( $(date +%s) - t0 )) s"; rm -rf "$o/${tag}-tma"
bash scripts/gpu/issue16_sets.sh "${tag}-sets" > "$o/${tag}-sets.txt" 2>&1; echo "sets rc=$? at $(( $(date +%s) - t0 )) s"; rm -rf "$o/${tag}-sets"
bash scripts/gpu/issue16_icache.sh "${tag}-icache" > "$o/${tag}-icache.txt" 2>&1; echo "icache rc=$? at $(( $(date +%s) - t0 )) s"; rm -rf "$o/${tag}-icache"
bash scripts/gpu/issue16_tlb.sh "${tag}-tlb" > "$o/${tag}-tlb.txt" 2>&1; echo "tlb rc=$? at $(( $(date +%s) - t0 )) s"; rm -rf "$o/${tag}-tlb"
if [ $(( $(date +%s) - t0 )) -lt 380 ]; then
  bash scripts/gpu/session6_final.sh "${tag}-final" > "$o/${tag}-final.txt" 2>&1; echo "final rc=$? at $(( $(date +%s) - t0 )) s"; rm -rf "$o/${tag}-final"
fi
cd "$o" && tar czf "${tag}-logs.tgz" ${tag}-*.txt && rm -f ${tag}-*.txt; ls "$o"
