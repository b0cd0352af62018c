#!/usr/bin/env python3
"""Reads gpc_contention.cu's CSV and the memtopo result whose groups it used; per probe SM
and group, the probe's L2 bandwidth (mode 0) and L2 hit latency (mode 1) with the group
loading, against the probe alone. Places each SM in the GPC whose load hurts it most, says
how often that agrees with cluster placement, and where the left-over SMs go (and which
placed SMs the left-over group's load hurts).

    python3 scripts/gpu/gpc_contention_analysis.py contention.csv memtopo.json
"""
import csv
import json
import sys
from collections import defaultdict

from gpc_groups import groups


def main(csv_path, json_path):
    gs = groups(json_path)
    clusters = json.load(open(json_path))["clusters"]
    gpcs = len(clusters["gpcs"])  # groups 0 .. gpcs-1; a last group is the left-over SMs
    left = set(gs[gpcs]) if len(gs) > gpcs else set()
    home = {s: i for i, g in enumerate(gs[:gpcs]) for s in g}
    rows = defaultdict(dict)  # (mode, probe) -> group -> value
    every = defaultdict(list)  # mode 2: (sm, set) -> medians of the repeats
    started = False
    for r in csv.reader(open(csv_path)):
        if not r:
            continue
        if r[0] in ("mode", "mode2"):
            started = True
            continue
        if started and r[0] == "2":
            every[(int(r[1]), int(r[2]))].append(float(r[4]))
        elif started:
            rows[(int(r[0]), int(r[1]))][int(r[2])] = float(r[4])
    probes = sorted({p for (_, p) in rows})
    print(f"{len(gs)} groups: sizes {[len(g) for g in gs]} (last = left over: {sorted(left)})")
    for mode, name, sign in ((0, "bandwidth", -1), (1, "latency", 1)):
        agree, total, margins = 0, 0, []
        print(f"\n== mode {mode}: {name}; effect = relative change against the probe alone "
              f"({'a drop' if sign < 0 else 'a rise'} is contention), per group")
        for p in probes:
            v = rows.get((mode, p))
            if not v or v.get(-1, 0) == 0:
                continue
            base = v[-1]
            eff = {g: sign * (v[g] - base) / base for g in range(len(gs)) if g in v}
            order = sorted((g for g in eff if g < gpcs), key=eff.get, reverse=True)
            best, second = order[0], order[1]
            margins.append(eff[best] - eff[second])
            line = " ".join(f"{eff[g] * 100:+6.1f}" for g in range(len(gs)) if g in eff)
            if p in left:
                mark = f"  left over -> GPC {best} (next {second})"
            else:
                total += 1
                agree += best == home.get(p)
                mark = "" if best == home.get(p) else f"  DISAGREES: placement {home.get(p)}"
            print(f"SM {p:3d} base {base:8.1f}  effects % [{line}]  best {best}{mark}")
        if total:
            print(f"placed SMs whose strongest effect is their own GPC: {agree}/{total}")
        if margins:
            margins.sort()
            print(f"margin best - second: min {margins[0]:.3f}, median {margins[len(margins) // 2]:.3f}")
        if left:
            hurt = defaultdict(list)
            for p in probes:
                v = rows.get((mode, p))
                if v and v.get(-1) and gpcs in v and p not in left:
                    hurt[home.get(p)].append(sign * (v[gpcs] - v[-1]) / v[-1] * 100)
            print("left-over group's load, mean effect on the placed SMs of each GPC (%): "
                  + ", ".join(f"{g}: {sum(x) / len(x):+.1f}" for g, x in sorted(hurt.items())))


    if every:
        all_at_once(every, gs, gpcs, left, home)


def all_at_once(every, gs, gpcs, left, home):
    """Mode 2: one launch per loading set, every other SM probing. A set's threshold is the
    largest effect it has on a placed SM outside it; an SM of the set's GPC stands out above it."""
    med = {k: sorted(v)[len(v) // 2] for k, v in every.items()}
    sms = sorted({s for (s, _) in med})

    def effect(s, g):
        b, v = med.get((s, -1)), med.get((s, g))
        return None if not b or v is None else (v - b) / b

    print("\n== mode 2: every SM probing at once (L2 hit latency), effect in % against no load")
    for g in range(gpcs):
        outside = [effect(s, g) for s in sms if s not in left and home.get(s) != g]
        outside = [e for e in outside if e is not None]
        top = max(outside)
        half = [effect(s, 100 + g) for s in sms if home.get(s) == g]
        half = [e for e in half if e is not None]
        out_half = [effect(s, 100 + g) for s in sms if s not in left and home.get(s) != g]
        out_half = [e for e in out_half if e is not None]
        print(f"GPC {g} ({len(gs[g])} SMs) loading: placed SMs outside it at most {top * 100:+.1f}; "
              f"half of it loading: its other half {min(half) * 100:+.1f} to {max(half) * 100:+.1f}, "
              f"SMs outside at most {max(out_half) * 100:+.1f}")
    for s in sorted(left):
        excess = {}
        for g in range(gpcs):
            outside = [effect(q, g) for q in sms if q not in left and home.get(q) != g]
            outside = [e for e in outside if e is not None]
            e = effect(s, g)
            if e is not None and outside:
                excess[g] = e - max(outside)
        order = sorted(excess, key=excess.get, reverse=True)
        print(f"SM {s}: excess over the most-affected outsider, per GPC: "
              + " ".join(f"{g}:{excess[g] * 100:+.1f}" for g in range(gpcs) if g in excess)
              + f"  -> GPC {order[0]} (next {order[1]} at {excess[order[1]] * 100:+.1f})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
