#!/usr/bin/env bash
# Session 12: the memory read's sweep (examples/bandwidth_sweep) with launches back to back
# over one buffer (.gpu/bandwidth_sweep-single, build 3ebead6's timing) and over two
# alternating buffers (.gpu/bandwidth_sweep, d4712f8), alternating, twice each, on GPU 0.
set -uo pipefail
tag=${1:-s12-buffers}
o=${OUT:-/tmp/out}
d=/tmp/$tag
mkdir -p "$d"
nvidia-smi -L | tee "$d/gpu.txt"
for i in 1 2; do
  ./.gpu/bandwidth_sweep-single memory-read --top 8 > "$d/single$i.txt" 2>&1
  ./.gpu/bandwidth_sweep memory-read --top 8 > "$d/two$i.txt" 2>&1
done
for f in single1 two1 single2 two2; do echo "== $f"; grep -A4 "shapes in" "$d/$f.txt"; done
tar czf "$o/$tag.tgz" -C /tmp "$tag"
