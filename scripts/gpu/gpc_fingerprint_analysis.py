"""Analyses gpc_fingerprint.cu's CSV against the GPC map of a memtopo result.

python3 gpc_fingerprint_analysis.py fp.csv run.json
Per line set and repeat: each SM's fingerprint (its per-line median cycles, less its own
mean) is correlated with every other SM's; the GPCs of the placement map are compared with
the fingerprints (mean correlation inside a GPC against between GPCs, and whether each SM's
nearest GPC by fingerprint is its own), and every SM the placement left unassigned gets the
GPC whose members its fingerprint is closest to. Needs numpy.
Backs: docs/results/h100.md, GPCs (docs/evidence/2026-11-25-h100-gpc-fingerprint/ holds the
CSV and the memtopo result it was compared with).
"""
import json
import sys

import numpy as np


def load(path):
    rows = {}
    for line in open(path):
        f = line.strip().split(",")
        if len(f) < 10:
            continue
        rows.setdefault((f[0], f[1]), {})[int(f[2])] = np.array([float(x) for x in f[3:]])
    return rows


def main():
    fp, result = sys.argv[1], sys.argv[2]
    doc = json.load(open(result))
    clusters = doc["clusters"]
    gpcs = [g["sms"] for g in clusters["gpcs"]]
    unassigned = clusters.get("unassigned_sms") or []
    gpc_of = {sm: i for i, g in enumerate(gpcs) for sm in g}
    runs = load(fp)
    for key, by_sm in sorted(runs.items()):
        sms = sorted(by_sm)
        m = np.array([by_sm[s] for s in sms])
        print(f"== {key}: {len(sms)} SMs x {m.shape[1]} lines; cycles p5/p50/p95 "
              f"{np.percentile(m, 5):.0f}/{np.percentile(m, 50):.0f}/{np.percentile(m, 95):.0f}")
        z = m - m.mean(axis=1, keepdims=True)
        z /= np.linalg.norm(z, axis=1, keepdims=True)
        c = z @ z.T
        idx = {s: i for i, s in enumerate(sms)}
        inside, between = [], []
        for a in sms:
            for b in sms:
                if a < b and a in gpc_of and b in gpc_of:
                    (inside if gpc_of[a] == gpc_of[b] else between).append(c[idx[a], idx[b]])
        print(f"correlation inside a GPC {np.mean(inside):.3f} (min {np.min(inside):.3f}), "
              f"between GPCs {np.mean(between):.3f} (max {np.max(between):.3f})")
        wrong = 0
        for s in sms:
            if s not in gpc_of:
                continue
            scores = []
            for g, members in enumerate(gpcs):
                others = [idx[x] for x in members if x != s and x in idx]
                scores.append(np.mean(c[idx[s], others]))
            if int(np.argmax(scores)) != gpc_of[s]:
                wrong += 1
                print(f"  SM {s}: placement GPC {gpc_of[s]}, fingerprint nearest {int(np.argmax(scores))} "
                      f"({' '.join(f'{x:.2f}' for x in scores)})")
        print(f"SMs whose nearest GPC by fingerprint is their placement GPC: "
              f"{sum(1 for s in sms if s in gpc_of) - wrong} of {sum(1 for s in sms if s in gpc_of)}")
        for s in unassigned:
            scores = [np.mean(c[idx[s], [idx[x] for x in g if x in idx]]) for g in gpcs]
            order = np.argsort(scores)[::-1]
            print(f"  unassigned SM {s}: nearest GPC {order[0]} ({scores[order[0]]:.2f}), "
                  f"next {order[1]} ({scores[order[1]]:.2f}); with other unassigned: "
                  f"{np.mean([c[idx[s], idx[u]] for u in unassigned if u != s]):.2f}")


if __name__ == "__main__":
    main()
