#!/usr/bin/env python3
"""Prints the GPCs of a memtopo result's cluster placement, one line of SM ids each, and the
SMs placement left over as a last line: the candidate groups gpc_contention.cu reads.

    python3 scripts/gpu/gpc_groups.py memtopo.json | ./gpc_ct > contention.csv
"""
import json
import sys


def groups(path):
    clusters = json.load(open(path))["clusters"]
    found = [g["sms"] for g in clusters["gpcs"]]
    left = clusters.get("unassigned_sms") or []
    return found + ([left] if left else [])


if __name__ == "__main__":
    for g in groups(sys.argv[1]):
        print(" ".join(str(s) for s in g))
