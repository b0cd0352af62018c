"""Side-by-side speed of cpd and ruptures 1.1.10 on the same seeded signals.

Single-threaded (OMP/BLAS threads pinned to 1). For every n in {1e3, 1e4, 1e5},
K in {1, 5}, search in {DP, PELT} and cost in {l2, rbf}, it times ruptures'
C path (KernelCPD; linear kernel = l2) and cpd (crates/cpd/examples/cpd_speed.rs, fit +
search), checks the objectives, and prints a Markdown table of time ratios.
ruptures' pure-Python classes (Dynp, Pelt) are timed separately where feasible
and labelled as such.

    cargo build -p cpd --release --example cpd_speed
    /work/venv-cpd/bin/python scripts/cpd/compare_ruptures.py [--timeout 120] [--max-n 100000]

KernelCPD's rbf kernel clips gamma*|x-y|^2 into [0.01, 100] in single
precision, diagonal included; cpd's RBF cost is the exact kernel. The clipped
diagonal shifts every segmentation's cost by (n - segments)(exp(-0.01) - 1), so
for PELT cpd gets the penalty pen + 1 - exp(-0.01), which makes both minimise
the same objective up to the off-diagonal clipping; the table says whether the
change points are equal and compares the objectives under cpd's exact cost.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import ruptures as rpt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
CPD = TARGET / "release" / "examples" / "cpd_speed"
MIN_SIZE = 5
TIMEOUT = 120.0


def signal_for(n, k, seed):
    rng = np.random.default_rng(seed)
    ends = np.linspace(0, n, k + 2).astype(int)[1:]
    levels = np.cumsum(rng.choice([-1, 1], k + 1) * rng.uniform(2, 5, k + 1))
    sig = np.repeat(levels, np.diff(np.r_[0, ends])) + rng.standard_normal(n)
    return sig.reshape(-1, 1)


def penalty_for(cost, n):
    # Noise variance 1: a BIC-like penalty for l2; the RBF cost is bounded by the
    # segment length, so its penalty is on the same (unit) scale.
    return 3.0 * math.log(n) if cost == "l2" else 0.5 * math.log(n)


def run_ruptures_child(spec):
    """Runs in a subprocess so a run can be abandoned after the timeout."""
    sig = np.fromfile(spec["file"]).reshape(-1, 1)
    wall, cpu = math.inf, math.inf
    for _ in range(spec.get("repeats", 1)):
        t0, c0 = time.perf_counter(), time.thread_time()
        if spec["impl"] == "kernelcpd":
            kernel = "linear" if spec["cost"] == "l2" else "rbf"
            params = None if spec["cost"] == "l2" else {"gamma": spec["gamma"]}
            algo = rpt.KernelCPD(kernel=kernel, min_size=MIN_SIZE, params=params).fit(sig)
        else:
            cls = rpt.Dynp if spec["search"] == "dp" else rpt.Pelt
            params = {} if spec["cost"] == "l2" else {"gamma": spec["gamma"]}
            algo = cls(model=spec["cost"], min_size=MIN_SIZE, jump=1, params=params).fit(sig)
        if spec["search"] == "dp":
            bkps = algo.predict(n_bkps=spec["k"])
        else:
            bkps = algo.predict(pen=spec["pen"])
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.thread_time() - c0)
    print(json.dumps({"seconds": wall, "cpu_seconds": cpu, "bkps": [int(b) for b in bkps]}))


def timed(cmd, timeout):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return None


RUPTURES_CACHE = {}


def ruptures(spec, timeout):
    """Times one ruptures run; with --ruptures-cache, a run already timed (or
    already timed out under at least this timeout) is read back instead."""
    # The signal file lives in a fresh temporary folder; it is determined by n and k.
    key = json.dumps({k: v for k, v in spec.items() if k != "file"}, sort_keys=True)
    if key in RUPTURES_CACHE:
        hit = RUPTURES_CACHE[key]
        if hit["result"] is not None or hit["timeout"] >= timeout:
            return hit["result"]
    result = timed([sys.executable, __file__, "--child", json.dumps(spec)], timeout)
    RUPTURES_CACHE[key] = {"result": result, "timeout": timeout}
    return result


def cpd(file, cost, gamma, search, arg, timeout, repeats):
    return timed([str(CPD), "search", file, "1", cost, str(gamma), search, str(arg), str(MIN_SIZE),
                  str(repeats)], timeout)


def cpd_cost(file, cost, gamma, bkps):
    out = timed([str(CPD), "eval", file, "1", cost, str(gamma), ",".join(map(str, bkps))], 3600)
    return out["cost"]


def table_row(r):
    def fmt(v):
        return "timeout" if v is None else f"{v:.4g}"

    k = r["k"] if r["search"] == "dp" else f"pen {r['pen']:.3g} (signal K={r['k']})"
    speedup = f"**{r['speedup']:.1f}x**" if "speedup" in r else "-"
    speedup_wall = f"{r['speedup_wall']:.1f}x" if "speedup_wall" in r else "-"
    diff = r.get("objective_rel_diff")
    diff = "-" if diff is None else f"{diff:.2e}"
    if not r.get("python_tried", r["n"] <= 1000):
        python = "not run"
    elif r["python_s"] is None:
        python = f"timeout ({TIMEOUT:g} s)"
    else:
        python = fmt(r["python_s"])
    timeout = f"timeout ({TIMEOUT:g} s)"
    ref_cpu = timeout if r["kernelcpd_cpu"] is None else f"{r['kernelcpd_cpu']:.4g}"
    return (f"| {r['n']} | {k} | {r['cost']} | {r['search']} | {ref_cpu} | {fmt(r['cpd_cpu'])} | "
            f"{speedup} | {speedup_wall} | {r.get('same_bkps', '-')} | {diff} | {python} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--child")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--max-n", type=int, default=100_000)
    parser.add_argument("--min-n", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=5, help="best of this many runs for n <= 1e4")
    parser.add_argument("--ruptures-cache", help="JSON file of ruptures timings, read and extended")
    parser.add_argument("--ruptures-only", action="store_true", help="only time ruptures (fills the cache)")
    args = parser.parse_args()
    if args.child:
        run_ruptures_child(json.loads(args.child))
        return
    global TIMEOUT
    TIMEOUT = args.timeout
    assert args.ruptures_only or CPD.exists(), f"build it first: cargo build -p cpd --release --example cpd_speed ({CPD})"
    cache = Path(args.ruptures_cache) if args.ruptures_cache else None
    if cache and cache.exists():
        RUPTURES_CACHE.update(json.loads(cache.read_text()))
    tmp = Path(tempfile.mkdtemp(prefix="cpd-speed-"))
    rows = []
    for n in [1_000, 10_000, 100_000]:
        if n > args.max_n or n < args.min_n:
            continue
        for k in [1, 5]:
            sig = signal_for(n, k, seed=1000 * k + n)
            file = str(tmp / f"signal_n{n}_k{k}.f64")
            sig.astype("<f8").tofile(file)
            gamma = 0.1
            for cost in ["l2", "rbf"]:
                for search in ["dp", "pelt"]:
                    pen = penalty_for(cost, n)
                    repeats = args.repeats if n <= 10_000 else 1
                    spec = dict(file=file, cost=cost, gamma=gamma, search=search, k=k, pen=pen, impl="kernelcpd",
                                repeats=repeats)
                    ref = ruptures(spec, args.timeout)
                    if cache:
                        cache.write_text(json.dumps(RUPTURES_CACHE))
                    if args.ruptures_only:
                        print(json.dumps(dict(n=n, k=k, cost=cost, search=search, kernelcpd=ref)), flush=True)
                        continue
                    # cpd minimises the same objective as KernelCPD (see the module doc).
                    cpd_pen = pen + (1 - math.exp(-0.01) if cost == "rbf" else 0.0)
                    mine = cpd(file, cost, gamma, "dynp" if search == "dp" else "pelt",
                               k if search == "dp" else cpd_pen, args.timeout * 5, repeats)
                    py = None
                    python_tried = n <= 1_000 or (n <= 10_000 and search == "pelt" and cost == "l2")
                    if python_tried:
                        py = ruptures(dict(spec, impl="python", repeats=1), args.timeout)
                        if cache:
                            cache.write_text(json.dumps(RUPTURES_CACHE))
                    row = dict(n=n, k=k, cost=cost, search=search, pen=pen if search == "pelt" else None,
                               kernelcpd_s=ref and ref["seconds"], cpd_s=mine and mine["seconds"],
                               kernelcpd_cpu=ref and ref["cpu_seconds"], cpd_cpu=mine and mine["cpu_seconds"],
                               python_s=py and py["seconds"], python_tried=python_tried)
                    if ref and mine:
                        same = ref["bkps"] == mine["bkps"]
                        row["same_bkps"] = same
                        if same:
                            row["objective_rel_diff"] = 0.0
                        else:
                            extra = cpd_pen * (len(ref["bkps"]) - 1) if search == "pelt" else 0.0
                            theirs = cpd_cost(file, cost, gamma, ref["bkps"]) + extra
                            row["objective_rel_diff"] = (theirs - mine["objective"]) / abs(mine["objective"])
                        row["speedup_wall"] = ref["seconds"] / mine["seconds"]
                        row["speedup"] = ref["cpu_seconds"] / mine["cpu_seconds"]
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    print()
    print("| n | K | cost | search | KernelCPD (C) CPU s | cpd CPU s | speed-up (CPU) | speed-up (wall) "
          "| same change points | objective (theirs-ours)/ours | ruptures pure-Python s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(table_row(r))

if __name__ == "__main__":
    main()
