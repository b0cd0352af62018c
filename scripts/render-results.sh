#!/usr/bin/env bash
# Regenerates what the reference-result pages show from their JSON: in each
# docs/results/<name>.md, the text between
#   <!-- generated: memtopo render <name>.json -->
#   <!-- end generated -->
# becomes `memtopo render docs/results/<name>.json` (Markdown); the hand-written text around
# it is left alone. docs/results/h100.svg, the diagram the README shows, is re-rendered from
# h100.json. No GPU is needed.
#
#   scripts/render-results.sh [MEMTOPO]     # default: cargo run -q -p memtopo --
#
# Run it after copying new reference results into docs/results/ (scripts/gpu/verify.sh
# writes them, named so, into its output folder).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ge 1 ]; then
    memtopo=("$1")
else
    memtopo=(cargo run -q -p memtopo --)
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for json in docs/results/*.json; do
    name=$(basename "$json" .json)
    page=docs/results/$name.md
    [ -f "$page" ] || { echo "no $page for $json" >&2; exit 1; }
    "${memtopo[@]}" render "$json" -o "$tmp/$name.md"
    begin="<!-- generated: memtopo render $name.json -->"
    end="<!-- end generated -->"
    grep -qxF "$begin" "$page" || { echo "$page lacks the line: $begin" >&2; exit 1; }
    grep -qxF "$end" "$page" || { echo "$page lacks the line: $end" >&2; exit 1; }
    awk -v begin="$begin" -v end="$end" -v gen="$tmp/$name.md" '
        $0 == begin { print; while ((getline line < gen) > 0) print line; skip = 1; next }
        $0 == end { skip = 0 }
        !skip { print }
    ' "$page" > "$tmp/page.md"
    cp "$tmp/page.md" "$page"
    echo "rendered $page"
done
"${memtopo[@]}" render docs/results/h100.json -o docs/results/h100.svg
echo "rendered docs/results/h100.svg"
