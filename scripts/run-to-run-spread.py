#!/usr/bin/env python3
"""The run-to-run spread of every quantity in the repeated runs of one GPU kept under
docs/evidence/, the source of `topology::tolerance`'s table (docs/fleet.md).

Per quantity path (the paths of `topology::fleet::key_values`) and GPU it prints the
runs' values and their relative range, (max - min) / max; per path the largest range over
the GPUs and the tolerance derived from it: that range plus a quarter, rounded up to a
whole percent. Latencies are the tables' medians (the result's mean is not printed in
them); a quantity equal in every run has range 0 and takes its kind's tolerance.

    python3 scripts/run-to-run-spread.py            # from the repository root
"""

import math
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
EVIDENCE = ROOT / "docs" / "evidence"

# Table rows of a run's text output and the path of their latency (median column).
LATENCY_ROWS = {
    "L1 data": "elements.l1_data.latency",
    "Texture": "elements.texture.latency",
    "Read-only": "elements.read_only.latency",
    "Constant L1": "elements.constant_l1.latency",
    "Constant L1.5": "elements.constant_l15.latency",
    "Shared memory": "elements.shared_memory.latency",
    "L2": "elements.l2.latency",
    "near partition": "elements.l2.partitions.near_latency",
    "far partition ×1": "elements.l2.partitions.far_latency",
    "Device memory": "elements.device_memory.latency",
}
BANDWIDTH_ROWS = {
    "L1 data read": "elements.l1_data.bandwidth.read",
    "Shared memory read": "elements.shared_memory.bandwidth.read",
    "L2 read": "elements.l2.bandwidth.read",
    "L2 read, near partition": "elements.l2.bandwidth.read_near_partition",
    "L2 write": "elements.l2.bandwidth.write",
    "Device memory read": "elements.device_memory.bandwidth.read",
    "Device memory write": "elements.device_memory.bandwidth.write",
    "Device memory copy (read + write)": "elements.device_memory.bandwidth.copy",
}


def runs_txt(path):
    """The values of each `=== bN.txt` run of a default-runs folder's runs.txt."""
    runs = []
    for line in path.read_text().splitlines():
        if line.startswith("=== "):
            runs.append({})
            continue
        if not runs:
            continue
        run = runs[-1]
        clock = re.search(r"SM clock (\d+) MHz measured", line)
        if clock and "conditions.sm_clock_mhz" not in run:
            run["conditions.sm_clock_mhz"] = float(clock.group(1))
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) < 3:
            continue
        name = cells[0]
        if name in BANDWIDTH_ROWS and re.fullmatch(r"[\d.]+", cells[1]):
            run.setdefault(BANDWIDTH_ROWS[name], float(cells[1]))
        elif name in LATENCY_ROWS and len(cells) >= 4:
            median = re.match(r"([\d.]+) \[", cells[3])
            if median:
                run.setdefault(LATENCY_ROWS[name], float(median.group(1)))
    return runs


def node_per_run(path):
    """Per GPU, the runs of the two-H100 node's memory-read-per-run.txt."""
    paths = [
        "elements.device_memory.bandwidth.read",
        None,
        "elements.device_memory.bandwidth.copy",
        "elements.l2.bandwidth.write",
        "elements.constant_l15.latency",
    ]
    gpus = {}
    for line in path.read_text().splitlines()[1:]:
        cells = line.split()
        if len(cells) != 7:
            continue
        run = {p: float(v) for p, v in zip(paths, cells[2:]) if p}
        gpus.setdefault(cells[1], []).append(run)
    return gpus


def percent_runs(path):
    """Per GPU, the runs of the four-H200 node's summary.txt (percent of one peak)."""
    gpus = {}
    pattern = re.compile(r"(GPU-\w+) read ([\d.]+) write ([\d.]+) copy ([\d.]+) %")
    for line in path.read_text().splitlines():
        m = pattern.search(line)
        if m:
            gpus.setdefault(m.group(1), []).append({
                "elements.device_memory.bandwidth.read": float(m.group(2)),
                "elements.device_memory.bandwidth.write": float(m.group(3)),
                "elements.device_memory.bandwidth.copy": float(m.group(4)),
            })
    return gpus


def values_tsv(path):
    """Per node and GPU, the runs of a node folder's values.tsv (node, run, GPU, quantity,
    value)."""
    gpus = {}
    for line in path.read_text().splitlines()[1:]:
        node, run, gpu, quantity, value = line.split("\t")
        gpus.setdefault((node, gpu), {}).setdefault(run, {})[quantity] = float(value)
    return {key: list(runs.values()) for key, runs in gpus.items()}


def sources():
    """(label, list of runs) per GPU and source."""
    out = []
    for gpu, folder in [("H100 GPU-d5b006f4", "2026-11-26-h100-default-runs"),
                        ("H200 GPU-8de7f546", "2026-11-26-h200-default-runs")]:
        out.append((f"{gpu} ({folder}, runs b1-b4)", runs_txt(EVIDENCE / folder / "runs.txt")))
    folder = "2026-11-25-h100x2-node"
    for gpu, runs in node_per_run(EVIDENCE / folder / "memory-read-per-run.txt").items():
        out.append((f"H100 {gpu} ({folder}, {len(runs)} runs)", runs))
    folder = "2026-11-26-h200x4-memory-bandwidth"
    for gpu, runs in percent_runs(EVIDENCE / folder / "summary.txt").items():
        out.append((f"H200 {gpu} ({folder}, {len(runs)} runs)", runs))
    # Node runs of scripts/gpu/node.sh: GPUs at once and one after another.
    # Every folder whose values.tsv names its node in the first column.
    for tsv in sorted(EVIDENCE.glob("*/values.tsv")):
        if not tsv.read_text().startswith("node\t"):
            continue
        folder = tsv.parent.name
        model = "H200" if "h200" in folder else "H100"
        for (node, gpu), runs in values_tsv(tsv).items():
            out.append((f"{model} {gpu} ({folder}, {node}, {len(runs)} runs)", runs))
    return out


def main():
    largest = {}
    for label, runs in sources():
        if len(runs) < 2:
            sys.exit(f"{label}: fewer than two runs read; has the file's format changed?")
        print(f"== {label}")
        paths = sorted({p for run in runs for p in run})
        for path in paths:
            values = [run[path] for run in runs if path in run]
            spread = (max(values) - min(values)) / max(values)
            print(f"  {path}: {', '.join(f'{v:g}' for v in values)}; range {spread * 100:.2f} %")
            if spread > largest.get(path, (-1, ""))[0]:
                largest[path] = (spread, label.split(" (")[0])
    print("== largest range per quantity, and the tolerance (range + 25 %, whole percent up)")
    for path, (spread, gpu) in sorted(largest.items()):
        tolerance = math.ceil(round(spread * 1.25 * 100, 6))
        print(f"  {path}: {spread * 100:.2f} % ({gpu}) -> {tolerance} %")


if __name__ == "__main__":
    main()
