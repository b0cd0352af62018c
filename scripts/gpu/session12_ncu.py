#!/usr/bin/env python3
"""Session 12, issue 15: Nsight Compute's counters against memtopo's bandwidth values.

Reads PREFIX-ncu.csv (one row per metric per profiled launch) and PREFIX-m{1,2,3}.json and
PREFIX-ncu.json (memtopo's results). Prints, per kind of launch (memory read, write, copy;
L2 read and write, told apart by the L2 hit rate), the launches of about 1 ms (memtopo's
final timing) with the DRAM bytes per second the counters saw, the L2 hit rate and the
clocks, and memtopo's values beside them.
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


def unit(name, ns):
    return ns


rows = []
for i, l in sorted(launches.items()):
    t = l.get("gpu__time_duration.sum")
    if not t:
        continue
    t *= 1e-9  # ns
    rd = l.get("dram__bytes_read.sum", 0.0)
    wr = l.get("dram__bytes_write.sum", 0.0)
    hit = l.get("lts__t_sector_hit_rate.pct", float("nan"))
    k = l["kernel"]
    if k.startswith("bw_copy"):
        kind = "memory copy"
    elif k.startswith("bw_write"):
        kind = "L2 write" if wr < 0.2 * (rd + wr + 1) and t > 0 and hit > 80 else "memory write"
    elif k.startswith("bw_read"):
        kind = "L2 read" if hit > 80 else "memory read"
    else:
        kind = k.split("_v")[0]
    rows.append((i, kind, k, l["grid"], l["block"], t, rd, wr, hit, l))

print("launch kinds:", {k: sum(1 for r in rows if r[1] == k) for k in sorted({r[1] for r in rows})})
for kind in ("memory read", "memory write", "memory copy", "L2 read", "L2 write"):
    sel = [r for r in rows if r[1] == kind]
    if not sel:
        continue
    longest = max(r[5] for r in sel)
    final = [r for r in sel if r[5] > 0.5 * longest]
    print(f"\n{kind}: {len(sel)} launches; the {len(final)} of over half the longest ({longest * 1e6:.0f} us):")
    for i, _, k, g, b, t, rd, wr, hit, l in final:
        bytes_ = rd + wr if kind == "memory copy" else (wr if "write" in kind else rd)
        print(
            f"  #{i} {k} grid {g} block {b}: {t * 1e6:.0f} us, DRAM read {rd / GIB:.3f} GiB, write {wr / GIB:.3f} GiB,"
            f" DRAM {bytes_ / t / GIB:.0f} GiB/s, L2 hit {hit:.1f} %,"
            f" clocks DRAM {l.get('dram__cycles_elapsed.avg.per_second', 0) / 1e6:.0f} / L2 {l.get('lts__cycles_elapsed.avg.per_second', 0) / 1e6:.0f} / SM {l.get('sm__cycles_elapsed.avg.per_second', 0) / 1e6:.0f} MHz"
        )
    best = max(((r[6] + r[7]) if kind == "memory copy" else (r[7] if "write" in kind else r[6])) / r[5] for r in final)
    print(f"  counters' best: {best / GIB:.0f} GiB/s")

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
