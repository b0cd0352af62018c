#!/usr/bin/env bash
# Measures every GPU of this node with all of them at once and one after another, and
# checks that measuring them at once changes no value.
#
# What it checks: that `memtopo --device all` (every GPU at once, each on a thread of its
# own) gives each GPU the values that `--device all --sequential` gives it, within
# `memtopo diff`'s tolerances, as closely as sequential runs agree among themselves; and
# how long each node run takes, peer links included.
#
#   scripts/gpu/node.sh [MEMTOPO [OUT [RUNS]]]
#
# MEMTOPO is the memtopo binary (default: ./.gpu/memtopo, else target/release/memtopo);
# OUT the folder for what it writes (default: $OUT if set, else /tmp/memtopo-node); RUNS
# how many node runs of each kind (default 3), taken in turns (at once, one after another,
# at once, ...) so that a drift of the machine touches both kinds alike:
#   at-once-N/, sequential-N/     each run's results (-o DIR/: DIR/{uuid}.json and the node
#                                 summary), its table (stdout.txt), stderr.txt and
#                                 wall.txt (seconds, as a user waits for it)
#   diff/A--B--UUID.txt           memtopo diff of one GPU's result in run A against run B
#   diffs.tsv                     every diff: kind (at-once-vs-sequential or
#                                 sequential-vs-sequential), GPU, runs, exit code
#   summary.txt                   wall times and, per kind of pair, how many diffs were clean
#   topo.txt                      nvidia-smi topo -m, when nvidia-smi is there
#
# Exit status: 0 when every run exited 0 and every at-once-vs-sequential diff was clean; 1
# when a diff found differences; otherwise the exit code of the node run that failed.
# Extra memtopo arguments go in MEMTOPO_ARGS (e.g. MEMTOPO_ARGS="--simulate 4xh100", with
# which the script runs on any machine).
set -uo pipefail
cd "$(dirname "$0")/../.."

memtopo=${1:-}
if [ -z "$memtopo" ]; then
    if [ -x .gpu/memtopo ]; then memtopo=.gpu/memtopo; else memtopo=target/release/memtopo; fi
fi
out=${2:-${OUT:-/tmp/memtopo-node}}
runs=${3:-3}
read -r -a extra <<< "${MEMTOPO_ARGS:-}"
[ -x "$memtopo" ] || { echo "node: no memtopo binary at $memtopo" >&2; exit 2; }
mkdir -p "$out/diff"
command -v nvidia-smi > /dev/null && nvidia-smi topo -m > "$out/topo.txt" 2>&1

status=0
# One node run into $out/$1/; the rest are extra memtopo arguments.
node_run() {
    local name=$1; shift
    local dir="$out/$name"
    mkdir -p "$dir"
    local start end rc
    start=$(date +%s%N)
    "$memtopo" --device all "${extra[@]}" --timings -o "$dir/" "$@" \
        > "$dir/stdout.txt" 2> "$dir/stderr.txt"
    rc=$?
    end=$(date +%s%N)
    local ms=$(( (end - start) / 1000000 ))
    printf '%d.%03d\n' $((ms / 1000)) $((ms % 1000)) > "$dir/wall.txt"
    echo "node: $name exit $rc in $(cat "$dir/wall.txt") s" >&2
    if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then status=$rc; fi
}

for i in $(seq 1 "$runs"); do
    node_run "at-once-$i"
    node_run "sequential-$i" --sequential
done

# Diffs one GPU's result of run $2 against run $3; $1 is the kind of pair.
compare() {
    local kind=$1 a=$2 b=$3 file=$4
    local uuid
    uuid=$(basename "$file" .json)
    [ -f "$out/$b/$uuid.json" ] || return 0
    # NODE_DIFF_ARGS (e.g. --ignore-notes) go to every diff.
    # shellcheck disable=SC2086
    "$memtopo" diff ${NODE_DIFF_ARGS:-} "$out/$a/$uuid.json" "$out/$b/$uuid.json" \
        > "$out/diff/$a--$b--$uuid.txt" 2>&1
    local rc=$?
    printf '%s\t%s\t%s\t%s\t%s\n' "$kind" "$uuid" "$a" "$b" "$rc" >> "$out/diffs.tsv"
    if [ "$kind" = at-once-vs-sequential ] && [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then
        status=1
    fi
}

printf 'kind\tgpu\ta\tb\texit\n' > "$out/diffs.tsv"
for i in $(seq 1 "$runs"); do
    for file in "$out/at-once-$i"/GPU-*.json; do
        [ -f "$file" ] || continue
        for j in $(seq 1 "$runs"); do
            compare at-once-vs-sequential "at-once-$i" "sequential-$j" "$file"
            if [ "$j" -gt "$i" ]; then
                compare sequential-vs-sequential "sequential-$i" "sequential-$j" \
                    "$out/sequential-$i/$(basename "$file")"
            fi
        done
    done
done

{
    echo "node runs (wall seconds):"
    for dir in "$out"/at-once-* "$out"/sequential-*; do
        printf '  %-14s %s\n' "$(basename "$dir")" "$(cat "$dir/wall.txt")"
    done
    echo "diffs (clean / all):"
    for kind in at-once-vs-sequential sequential-vs-sequential; do
        total=$(awk -F'\t' -v k="$kind" '$1 == k' "$out/diffs.tsv" | wc -l)
        clean=$(awk -F'\t' -v k="$kind" '$1 == k && $5 == 0' "$out/diffs.tsv" | wc -l)
        printf '  %-26s %s / %s\n' "$kind" "$clean" "$total"
    done
} | tee "$out/summary.txt"
echo "node: exit $status (results in $out)" >&2
exit "$status"
