"""Analyses the output folder of l2_home.cu.

python3 l2_home_analysis.py DIR [memtopo-result.json]

1. Survey: how many SMs find SM 0's lines far (the other partition) and which do not.
2. Map: per allocation, the (writer, reader) pairs' far shares and whether they agree (a
   reader off the writer's partition finds far exactly the lines homed in the writer's), then
   per 2 MiB page the XOR of address bits 7-20 (and a constant) that gives each line's home,
   fitted by Gaussian elimination over GF(2), and the share of the page's lines it reproduces.
3. Sectors: whether the four 32-byte sectors of a line share its home.
4. Inside a partition: the near loads' latencies split at the gap between their two modes,
   and the largest aligned block whose lines all fall on one side.
5. With a memtopo result: the constant L1.5 latency of every SM (const.csv) listed GPC by GPC
   in the cluster map's order, and the SMs the placement left unassigned.
Needs numpy.
"""
import json
import struct
import sys

import numpy as np

FAR = 380  # cycles: near hits read in 255-320, far ones in 440-505 on the H100 and H200


def load(path):
    data = open(path, "rb").read()
    base, nodes, passes = struct.unpack_from("<QII", data, 0)
    tags = list(struct.unpack_from(f"<{passes}I", data, 16))
    lat = np.frombuffer(data, dtype="<u2", offset=16 + 4 * passes).reshape(passes, nodes)
    return base, tags, lat


def gf2_fit(a, y):
    """Solves a x = y over GF(2) by elimination; returns x (free unknowns 0)."""
    m = np.concatenate([a, y[:, None]], 1).astype(np.uint8)
    rows, cols = a.shape
    pivots, r = [], 0
    for c in range(cols):
        nz = np.nonzero(m[r:, c])[0]
        if len(nz) == 0:
            continue
        p = r + nz[0]
        m[[r, p]] = m[[p, r]]
        others = np.nonzero(m[:, c])[0]
        m[others[others != r]] ^= m[r]
        pivots.append(c)
        r += 1
        if r == rows:
            break
    x = np.zeros(cols, np.uint8)
    for i, c in enumerate(pivots):
        x[c] = m[i, cols]
    return x


def bits_of(x, low=7):
    return [low + i for i in range(len(x)) if x[i]]


def main():
    d = sys.argv[1]
    base, tags, lat = load(f"{d}/survey.bin")
    share = (lat > FAR).mean(1)
    other = [s for s in range(len(share)) if share[s] > 0.25]
    print(f"survey: {len(share)} SMs; {len(share) - len(other)} share SM 0's partition, "
          f"{len(other)} find half its lines far (shares {share[other].min():.3f}-"
          f"{share[other].max():.3f})")
    print(f"  SM 0's partition: {[s for s in range(len(share)) if share[s] <= 0.25]}")
    for a in (0, 1):
        base, tags, lat = load(f"{d}/home-{a}.bin")
        far = lat > FAR
        pairs = [f"{t >> 16}->{t & 0xFFFF}: far {far[k].mean():.4f}" for k, t in enumerate(tags)]
        print(f"allocation {a} at {base:#x}: " + "; ".join(pairs))
        print(f"  lines where the pairs disagree (reader 1 vs 3 same side, 0 vs 1 opposite): "
              f"{int((far[0] != far[2]).sum())}, {int((far[0] == far[1]).sum())} of {far.shape[1]}")
        home = far[0].astype(np.uint8)  # homed in the first writer's (SM 0's) partition
        va = base + np.arange(len(home), dtype=np.uint64) * 128
        a_bits = np.array([(va >> np.uint64(b)) & np.uint64(1) for b in range(7, 21)]).T
        pages = (va >> np.uint64(21)) - np.uint64(base >> 21)
        found = {}
        for pg in np.unique(pages):
            sel = pages == pg
            rows = np.concatenate([a_bits[sel], np.ones((sel.sum(), 1))], 1).astype(np.uint8)
            x = gf2_fit(rows, home[sel])
            agree = ((rows.astype(int) @ x.astype(int)) % 2 == home[sel]).mean()
            found.setdefault(tuple(bits_of(x[:-1])), []).append((int(pg), int(x[-1]), agree))
        for bits, pgs in found.items():
            print(f"  bits {list(bits)}: {len(pgs)} pages, page bits "
                  f"{''.join(str(p[1]) for p in pgs)}, agreement per page "
                  f"{min(p[2] for p in pgs):.5f}-{max(p[2] for p in pgs):.5f}")
    base, tags, lat = load(f"{d}/sectors.bin")
    n = lat.shape[1] // 4
    far = (lat[0] > FAR).reshape(4, n)
    print(f"sectors: lines whose 4 sectors do not share a home: {int((far != far[0]).any(0).sum())} of {n}")
    base, tags, lat = load(f"{d}/home-0.bin")
    for k, t in enumerate(tags):
        near = lat[k][lat[k] <= FAR].astype(int)
        hist = np.bincount(near, minlength=FAR + 1)
        # The gap: the emptiest cycle count between the two modes' peaks.
        lo, hi = np.percentile(near, 20), np.percentile(near, 80)
        gap = int(lo + np.argmin(hist[int(lo):int(hi)]))
        slow = lat[k] > gap
        pure = 128
        for g in (2, 4, 8, 16, 32):
            blocks_near = (lat[k] <= FAR).reshape(-1, g).all(1)
            s = slow.reshape(-1, g)[blocks_near]
            if len(s) and ((s.all(1)) | (~s.any(1))).all():
                pure = 128 * g
        print(f"  {t >> 16}->{t & 0xFFFF}: near loads split at {gap} cycles "
              f"({(near <= gap).mean():.3f} below); one side per aligned {pure} B")
    if len(sys.argv) > 2:
        doc = json.load(open(sys.argv[2]))
        const = {}
        for line in open(f"{d}/const.csv"):
            f = line.strip().split(",")
            if f[0] == "const":
                const[int(f[1])] = int(f[2])
        gpcs = [g["sms"] for g in doc["clusters"]["gpcs"]]
        for i, sms in enumerate(gpcs):
            side = "other" if sms[0] in other else "SM 0's"
            print(f"GPC {i} ({side} partition): " + " ".join(f"{s}:{const[s]}" for s in sms))
        un = doc["clusters"].get("unassigned_sms") or []
        print("unassigned: " + " ".join(f"{s}:{const[s]}" for s in un))


if __name__ == "__main__":
    main()
