#!/usr/bin/env python3
"""Session 12, issue 15: Nsight Compute's counters against memtopo's bandwidth values.

Reads PREFIX-ncu.csv (one row per metric per profiled launch) and PREFIX-m{1,2,3}.json and
PREFIX-ncu.json (memtopo's results). Prints, per kind of device-memory launch (read, write,
copy), the DRAM bytes each moved, the L2 hit rate, the DRAM and L2 clocks and the rate the
counters saw, and memtopo's values (from runs without the profiler) beside them.
"""
import csv
import json
import sys

GIB = 1 << 30
p = sys.argv[1]
launches = {}
for r in csv.reader(open(f"{p}-ncu.csv")):
    if len(r) < 12 or not r[0].isdigit():
        continue
    l = launches.setdefault(int(r[0]), {"kernel": r[4], "grid": r[7], "block": r[8]})
    try:
        l[r[-3]] = float(r[-1].replace(",", ""))
    except ValueError:
        pass


rows = []
MIB = 1 << 20
for i, l in sorted(launches.items()):
    t = l.get("gpu__time_duration.sum")
    if not t:
        continue
    t *= 1e-9  # ns
    rd = l.get("dram__bytes_read.sum", 0.0)
    wr = l.get("dram__bytes_write.sum", 0.0)
    hit = l.get("lts__t_sector_hit_rate.pct", float("nan"))
    k = l["kernel"]
    # Under the profiler memtopo's own timings are inflated, so its launches are as short
    # as a level allows: device-memory launches still cover their buffer (256 MiB and
    # more), the L2's stay within it. Tell them apart by the DRAM bytes.
    memory = max(rd, wr) >= 64 * MIB
    if k.startswith("bw_copy"):
        kind = "memory copy"
    elif k.startswith("bw_write"):
        kind = "memory write" if memory else "L2 write"
    elif k.startswith("bw_read"):
        # An L2 read that the profiler's replays left partly in DRAM still hits mostly.
        kind = "memory read" if memory and hit < 20 else "L2 read"
    else:
        kind = k.split("_v")[0]
    rows.append((i, kind, k, l["grid"], l["block"], t, rd, wr, hit, l))

print("launch kinds:", {k: sum(1 for r in rows if r[1] == k) for k in sorted({r[1] for r in rows})})
for kind in ("memory read", "memory write", "memory copy"):
    sel = [r for r in rows if r[1] == kind]
    if not sel:
        continue
    moved = [(r[6] + r[7]) if kind == "memory copy" else (r[7] if "write" in kind else r[6]) for r in sel]
    rates = [m / r[5] / GIB for m, r in zip(moved, sel)]
    hits = [r[8] for r in sel]
    clocks = [(r[9].get("dram__cycles_elapsed.avg.per_second", 0) / 1e6, r[9].get("lts__cycles_elapsed.avg.per_second", 0) / 1e6) for r in sel]
    print(f"\n{kind}: {len(sel)} launches of {min(r[5] for r in sel) * 1e6:.0f}-{max(r[5] for r in sel) * 1e6:.0f} us;"
          f" DRAM bytes per launch {min(moved) / MIB:.1f}-{max(moved) / MIB:.1f} MiB (read {min(r[6] for r in sel) / MIB:.1f}-{max(r[6] for r in sel) / MIB:.1f},"
          f" written {min(r[7] for r in sel) / MIB:.1f}-{max(r[7] for r in sel) / MIB:.1f});"
          f" L2 hit rate {min(hits):.1f}-{max(hits):.1f} %; {min(rates):.0f}-{max(rates):.0f} GiB/s;"
          f" DRAM clock {min(c[0] for c in clocks):.0f}-{max(c[0] for c in clocks):.0f} MHz, L2 clock {min(c[1] for c in clocks):.0f}-{max(c[1] for c in clocks):.0f} MHz")
    by_kernel = {}
    for r, m, rate in zip(sel, moved, rates):
        by_kernel.setdefault((r[2], r[3], r[4]), []).append((m, rate, r[8]))
    for (k, g, b), v in sorted(by_kernel.items(), key=lambda kv: -max(x[1] for x in kv[1]))[:6]:
        print(f"  {k} (ncu grid/block columns {g} {b}): {len(v)} launches, {max(x[0] for x in v) / MIB:.1f} MiB each, up to {max(x[1] for x in v):.0f} GiB/s, L2 hits {max(x[2] for x in v):.1f} %")

names = {"memory read": ("device_memory", "read"), "memory write": ("device_memory", "write"),
         "memory copy": ("device_memory", "copy"), "L2 read": ("l2", "read"),
         "L2 near read": ("l2", "read_near_partition"), "L2 write": ("l2", "write")}
print("\nmemtopo's values (GiB/s; value = fastest launch, median beside it; fraction of the API peak):")
for f in ("m1", "m2", "m3", "ncu"):
    try:
        e = json.load(open(f"{p}-{f}.json"))["elements"]
    except Exception as ex:  # a run that failed leaves no file
        print(f"  {f}: no result ({ex})")
        continue
    parts = []
    for label, (el, key) in names.items():
        v = ((e.get(el) or {}).get("bandwidth") or {}).get(key) or {}
        if not v:
            continue
        frac = (v.get("peak") or {}).get("fraction")
        ws = v.get("working_set") or v.get("working_set_bytes")
        parts.append(f"{label} {v.get('value', 0):.0f}/{v.get('median', 0):.0f}" + (f" ({100 * frac:.1f} %)" if frac else ""))
    print(f"  {f}: " + "; ".join(parts))
