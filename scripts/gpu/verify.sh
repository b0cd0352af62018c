#!/usr/bin/env bash
# Measures this machine's GPU 0 as the reference results were measured, and diffs the
# results against the committed ones.
#
# What it checks: that memtopo, on this GPU, still gives the values of
# docs/results/<model>.json (a default run) and docs/results/<model>-deep.json (a --deep
# run) within `memtopo diff`'s tolerances, where <model> is h100 or h200, picked from the
# GPU's name. Every run is also validated against the schema and physical bounds.
#
#   scripts/gpu/verify.sh [MEMTOPO [OUT]]
#
# MEMTOPO is the memtopo binary (default: ./.gpu/memtopo, else target/release/memtopo);
# OUT is the folder for what it writes (default: $OUT if set, else /tmp/memtopo-verify):
#   <model>.json, <model>.md, <model>.log         the default run (--timings), its table
#   <model>-deep.json, <model>-deep.md, ...       the --deep run
#   diff.txt, diff-deep.txt                       memtopo diff against docs/results
# With VERIFY_DEEP=0 the --deep run (about 15 s) is left out. DIFF_ARGS are passed to both
# diffs (e.g. DIFF_ARGS="--ignore-notes").
#
# Exit status: 0 when both diffs are clean; 1 when a diff found differences; 2 when there is
# no binary or no reference result for this GPU's model; otherwise the exit code of the
# memtopo run, validation or diff that failed (docs/cli.md lists them).
# Differences between two GPUs of one model are real and expected in a few quantities: the
# constant L1.5's latency (98 or 103 cycles on H100s), device-memory bandwidth (GPUs differ
# by some 2-3 %) and the H200's L2 near-partition read (docs/results/h100.md, h200.md).
#
# Through a lent GPU machine with no toolchain: build here, carry the binary, run there.
#   cargo build --release -p memtopo && mkdir -p .gpu && cp target/release/memtopo .gpu/
#   then, on the GPU machine, from the repository root, with .gpu carried along:
#   scripts/gpu/verify.sh .gpu/memtopo "$OUT"
# (.gpu is not ignored by git: keep it out of commits.) To replace a reference result, copy
# OUT/<model>.json or OUT/<model>-deep.json into docs/results/ and run
# scripts/render-results.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."

memtopo=${1:-}
if [ -z "$memtopo" ]; then
    if [ -x .gpu/memtopo ]; then memtopo=.gpu/memtopo; else memtopo=target/release/memtopo; fi
fi
out=${2:-${OUT:-/tmp/memtopo-verify}}
deep=${VERIFY_DEEP:-1}
read -r -a diff_args <<< "${DIFF_ARGS:-}"
[ -x "$memtopo" ] || { echo "verify: no memtopo binary at $memtopo" >&2; exit 2; }
mkdir -p "$out"

# One run: measure, validate; prints the model it measured.
measure() {
    local name=$1; shift
    "$memtopo" --timings -o "$out/$name.json" -o "$out/$name.md" "$@" \
        > "$out/$name.txt" 2> "$out/$name.log"
    local rc=$?
    echo "verify: memtopo $* exit $rc (table in $out/$name.txt)" >&2
    [ -f "$out/$name.json" ] || return $((rc == 0 ? 1 : rc))
    "$memtopo" validate "$out/$name.json" >&2 || return $?
    return $rc
}

# The model from the device name the result records ("NVIDIA H100 80GB HBM3", "NVIDIA H200").
model_of() {
    local name
    name=$(grep -m1 '"name"' "$1" | sed 's/.*"name": *"\([^"]*\)".*/\1/')
    case "$name" in
        *H100*) echo h100 ;;
        *H200*) echo h200 ;;
        *) echo "verify: no reference result for $name (docs/results/ has h100 and h200)" >&2
           return 1 ;;
    esac
}

# Diff a run against its reference; returns diff's exit code.
compare() {
    local run=$1 reference=$2 report=$3
    "$memtopo" diff "${diff_args[@]}" "$reference" "$run" > "$report" 2>&1
    local rc=$?
    echo "verify: memtopo diff $reference $run exit $rc" >&2
    cat "$report"
    return $rc
}

status=0
record() { local rc=$1; if [ "$rc" -ne 0 ] && { [ "$status" -eq 0 ] || [ "$status" -eq 1 ]; }; then status=$rc; fi; }

measure run
rc=$?
if [ "$rc" -ne 0 ]; then exit "$rc"; fi
model=$(model_of "$out/run.json") || exit 2
for ext in json md txt log; do mv "$out/run.$ext" "$out/$model.$ext"; done
compare "$out/$model.json" "docs/results/$model.json" "$out/diff.txt"
record $?

if [ "$deep" != 0 ]; then
    measure "$model-deep" --deep
    rc=$?
    if [ "$rc" -ne 0 ]; then exit "$rc"; fi
    compare "$out/$model-deep.json" "docs/results/$model-deep.json" "$out/diff-deep.txt"
    record $?
fi

echo "verify: $model, exit $status (results and diffs in $out)" >&2
exit "$status"
