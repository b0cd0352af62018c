#!/usr/bin/env python3
"""How fast memtopo runs on this machine's GPU: the speed benchmark (docs/benchmarking.md).

    scripts/gpu/speed.py [OPTIONS] OUT [LABEL=]MEMTOPO [[LABEL=]MEMTOPO ...]

For each memtopo binary (a build; two or more to compare builds on one machine, in one
lease), in this order, each step taking the builds in turn:

1. the first run: a default run (`--timings -vv`) with an empty driver JIT cache: the build's
   own CUDA_CACHE_PATH, a fresh empty folder under OUT (so that the builds do not share
   cache entries, and the user's cache is not touched); the cache's size after it says how
   much the driver compiled;
2. `--runs` warm default runs (same cache, now filled), taken in turns across the builds;
3. `--deep` once (`--no-deep` leaves it out);
4. `--device all` once, when the machine has several GPUs (`--device-all`).

Each run's wall time (the process, as a user waits for it), its `--timings` split (memtopo's
total, GPU, change-point analysis, and the host rest: total - GPU - analysis) and each
module load that `-vv` logs (from its cubin or JIT-compiled from PTX, and in how many ms) are
recorded in OUT/speed.json with the build (binary path, SHA-256, memtopo version and git
commit from the result's run record, `git describe` when this is a git checkout that has the
commit), the GPU (name, UUID, driver) and the date; every run's result, table and log are
kept under OUT/runs/. A summary table goes to stdout, one column per build.

`--also-jit` adds, for each build, a second column that runs it with MEMTOPO_JIT=1 (every
module JIT-compiled from its PTX, from its own empty cache): cubins against JIT in one build.

Exit status: 0 when every run exited 0; 1 when a run failed (its exit code is recorded);
2 for bad arguments or a binary that is missing.

On a lent GPU machine with no toolchain: build here, carry the binaries, run there, e.g.
    cargo build --release -p memtopo && mkdir -p .gpu && cp target/release/memtopo .gpu/
    (and the previous build as .gpu/memtopo-main), then on the GPU machine:
    python3 scripts/gpu/speed.py "$OUT/speed" main=.gpu/memtopo-main new=.gpu/memtopo
Without a GPU, `--simulate h100` passes `--simulate h100` to every run (the parsing and the
file layout are tested this way).
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

SCHEMA = "memtopo-speed/1"

# The --timings block: a header, one line per benchmark, the total, the analysis share.
TIMINGS_HEADER = re.compile(r"^benchmark\s+wall ms\s+GPU ms\s+analysis ms\s*$")
TIMINGS_ROW = re.compile(r"^(?P<name>.*?)\s+(?P<wall>[\d.]+)\s+(?P<gpu>[\d.]+)\s+(?P<analysis>[\d.]+)\s*$")
TIMINGS_TOTAL = "total (including context creation)"

# Module loads as -vv logs them. This build and later: the loader's lines.
LOAD_CUBIN = re.compile(r"module (?P<label>.+?): loaded (?P<form>its \S+ cubin) .*?in (?P<ms>[\d.]+) ms")
LOAD_JIT = re.compile(r"module (?P<label>.+?): JIT-compiled (?P<form>its PTX(?: \([^)]*\))?) in (?P<ms>[\d.]+) ms")
# Builds before the cubins: every module JIT-compiled.
OLD_MODULE = re.compile(r"loaded PTX module (?P<label>\S+) in (?P<ms>[\d.]+) ms")
OLD_KERNEL = re.compile(r"JIT-compiled (?P<label>[a-z]\w*) in (?P<ms>[\d.]+) ms")
OLD_ICACHE = re.compile(r"JIT-compiled (?P<label>icache_ffma with \d+ segments) .*?in (?P<ms>[\d.]+) ms")


def parse_timings(text):
    r"""Every --timings block of a run's standard output (one per GPU), as dicts.

    >>> blocks = parse_timings(
    ...     "L2  50 MiB\n\n"
    ...     "benchmark                               wall ms     GPU ms  analysis ms\n"
    ...     "l1 size (8 KiB shared config)              49.3       40.2         1.20\n"
    ...     "total (including context creation)       1225.0      622.0        13.00\n"
    ...     "change-point analysis: 1.06 % of the wall time\n")
    >>> [(b["total_ms"], b["gpu_ms"], b["analysis_ms"], b["host_ms"]) for b in blocks]
    [(1225.0, 622.0, 13.0, 590.0)]
    >>> blocks[0]["benchmarks"]
    [{'name': 'l1 size (8 KiB shared config)', 'wall_ms': 49.3, 'gpu_ms': 40.2, 'analysis_ms': 1.2}]
    """
    blocks = []
    block = None
    for line in text.splitlines():
        if TIMINGS_HEADER.match(line):
            block = {"benchmarks": []}
            continue
        if block is None:
            continue
        row = TIMINGS_ROW.match(line)
        if row is None:
            block = None
            continue
        wall, gpu, analysis = (float(row.group(k)) for k in ("wall", "gpu", "analysis"))
        name = row.group("name").strip()
        if name == TIMINGS_TOTAL:
            block.update(
                total_ms=wall,
                gpu_ms=gpu,
                analysis_ms=analysis,
                host_ms=round(wall - gpu - analysis, 2),
            )
            blocks.append(block)
            block = None
        else:
            block["benchmarks"].append(
                {"name": name, "wall_ms": wall, "gpu_ms": gpu, "analysis_ms": analysis}
            )
    return blocks


def parse_module_loads(log):
    r"""Every module load a -vv log tells of: label, form (cubin or PTX) and milliseconds.

    The lines of this build and later:

    >>> for load in parse_module_loads(
    ...     "[DEBUG pchase_runner::cuda::code] module pchase: loaded its sm_90 cubin "
    ...     "(315 KiB, ptxas 12.9.86) in 2.4 ms\n"
    ...     "[DEBUG pchase_runner::cuda::code] module bandwidth, kernel bw_read_cg_v16_u4 "
    ...     "alone: JIT-compiled its PTX (no cubin for the GPU) in 41.0 ms\n"
    ...     "[DEBUG pchase_runner::cuda::code] module hopper: JIT-compiled its PTX "
    ...     "(MEMTOPO_JIT=1) in 88.5 ms\n"):
    ...     print(load)
    {'module': 'pchase', 'form': 'its sm_90 cubin', 'ms': 2.4}
    {'module': 'bandwidth, kernel bw_read_cg_v16_u4 alone', 'form': 'its PTX (no cubin for the GPU)', 'ms': 41.0}
    {'module': 'hopper', 'form': 'its PTX (MEMTOPO_JIT=1)', 'ms': 88.5}

    and of builds before the cubins, where every module was JIT-compiled:

    >>> for load in parse_module_loads(
    ...     "[DEBUG pchase_runner::cuda] loaded PTX module pchase in 640.2 ms\n"
    ...     "[DEBUG pchase_runner::cuda::bandwidth] JIT-compiled bw_write_v16_u4 in 12.5 ms\n"
    ...     "[INFO  pchase_runner::cuda::icache] JIT-compiled icache_ffma with 2048 segments "
    ...     "(1024 KiB of multiply-adds) in 2210.0 ms\n"):
    ...     print(load)
    {'module': 'pchase', 'form': 'PTX', 'ms': 640.2}
    {'module': 'bw_write_v16_u4', 'form': 'PTX', 'ms': 12.5}
    {'module': 'icache_ffma with 2048 segments', 'form': 'PTX', 'ms': 2210.0}
    """
    loads = []
    for line in log.splitlines():
        for pattern, form in (
            (LOAD_CUBIN, None),
            (LOAD_JIT, None),
            (OLD_ICACHE, "PTX"),
            (OLD_MODULE, "PTX"),
            (OLD_KERNEL, "PTX"),
        ):
            m = pattern.search(line)
            if m:
                loads.append(
                    {
                        "module": m.group("label"),
                        "form": form or m.group("form"),
                        "ms": float(m.group("ms")),
                    }
                )
                break
    return loads


def folder_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def nvidia_smi():
    """The GPUs nvidia-smi lists (index, name, uuid, driver), or [] without it."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,uuid,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    gpus = []
    for line in out.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 4:
            gpus.append(dict(zip(("index", "name", "uuid", "driver_version"), fields)))
    return gpus


def git_describe(commit):
    """`git describe` of the build's commit, when this checkout has it."""
    if not commit or commit == "unknown":
        return None
    dirty = commit.endswith("-dirty")
    base = commit[: -len("-dirty")] if dirty else commit
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--tags", base],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError:
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty else "")


class Build:
    """One column: a binary, maybe with MEMTOPO_JIT=1, and its own JIT cache."""

    def __init__(self, label, binary, out, jit=False):
        self.label = label
        self.binary = binary
        self.jit = jit
        self.cache = os.path.join(out, "jit-cache", label)
        self.runs_dir = os.path.join(out, "runs", label)
        self.record = {
            "label": label,
            "binary": binary,
            "sha256": sha256(binary),
            "memtopo_jit": "1" if jit else None,
            "jit_cache": self.cache,
        }

    def env(self):
        env = dict(os.environ)
        env["CUDA_CACHE_PATH"] = self.cache
        # A disabled cache would make every run a first run.
        env.pop("CUDA_CACHE_DISABLE", None)
        if self.jit:
            env["MEMTOPO_JIT"] = "1"
        else:
            env.pop("MEMTOPO_JIT", None)
        return env


def run_memtopo(build, name, args, options):
    """One memtopo run: its wall time, --timings blocks, module loads and files."""
    os.makedirs(build.runs_dir, exist_ok=True)
    stem = os.path.join(build.runs_dir, name)
    if "--device" in args and "all" in args:
        output = stem + "/"
        os.makedirs(output, exist_ok=True)
    else:
        output = stem + ".json"
    command = [build.binary, "--timings", "-vv", "-o", output] + args + options.extra
    if options.simulate:
        command += ["--simulate", options.simulate]
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=build.env(), timeout=options.timeout
        )
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        code = "timeout"
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall = time.monotonic() - started
    with open(stem + ".txt", "w") as f:
        f.write(stdout)
    with open(stem + ".log", "w") as f:
        f.write(stderr)
    timings = parse_timings(stdout)
    run = {
        "command": command,
        "exit_code": code,
        "wall_s": round(wall, 3),
        "timings": timings,
        "module_loads": parse_module_loads(stderr),
        "jit_cache_bytes_after": folder_bytes(build.cache),
        "table": stem + ".txt",
        "log": stem + ".log",
        "result": output,
    }
    loads = run["module_loads"]
    run["module_load_ms"] = round(sum(l["ms"] for l in loads), 1)
    if code != 0:
        print(f"speed: {build.label} {name}: memtopo exited {code} (log {stem}.log)", file=sys.stderr)
    return run


def result_record(path):
    """The run record and device of a result file, if it was written."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return {}, {}
    return doc.get("run") or {}, doc.get("device") or {}


def summarise(runs):
    """Medians and ranges of warm runs."""
    ok = [r for r in runs if r["exit_code"] == 0 and r["timings"]]
    if not ok:
        return None
    walls = [r["wall_s"] for r in ok]

    def median(key):
        return round(statistics.median(r["timings"][0][key] for r in ok), 2)

    return {
        "runs": len(ok),
        "wall_s": {"median": round(statistics.median(walls), 3), "min": min(walls), "max": max(walls)},
        "total_ms": median("total_ms"),
        "gpu_ms": median("gpu_ms"),
        "analysis_ms": median("analysis_ms"),
        "host_ms": median("host_ms"),
        "module_load_ms": round(statistics.median(r["module_load_ms"] for r in ok), 1),
    }


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def table(record):
    """The summary: one row per figure, one column per build."""
    builds = record["builds"]
    rows = []

    def row(name, cell):
        rows.append([name] + [cell(b) for b in builds])

    def run_wall(key):
        def cell(b):
            run = b.get(key)
            if not run:
                return "-"
            if run["exit_code"] != 0:
                return f"exit {run['exit_code']}"
            return f"{run['wall_s']:.2f} s"

        return cell

    row("first run, empty JIT cache", run_wall("first"))
    row("  of it: module loads", lambda b: f"{b['first']['module_load_ms']:.0f} ms" if b.get("first") else "-")
    row("  JIT cache after it", lambda b: human_bytes(b["first"]["jit_cache_bytes_after"]) if b.get("first") else "-")

    def warm(key, fmt):
        def cell(b):
            s = b.get("warm_summary")
            return fmt(s[key]) if s else "-"

        return cell

    n = record["settings"]["runs"]
    row(f"warm runs, median of {n}", warm("wall_s", lambda w: f"{w['median']:.2f} s"))
    row("  range", warm("wall_s", lambda w: f"{w['min']:.2f}-{w['max']:.2f} s"))
    row("  memtopo total (--timings)", warm("total_ms", lambda v: f"{v:.0f} ms"))
    row("  GPU", warm("gpu_ms", lambda v: f"{v:.0f} ms"))
    row("  change-point analysis", warm("analysis_ms", lambda v: f"{v:.0f} ms"))
    row("  host (total - GPU - analysis)", warm("host_ms", lambda v: f"{v:.0f} ms"))
    row("  module loads", warm("module_load_ms", lambda v: f"{v:.0f} ms"))

    def first_minus_warm(b):
        s = b.get("warm_summary")
        first = b.get("first")
        if not s or not first or first["exit_code"] != 0:
            return "-"
        return f"{first['wall_s'] - s['wall_s']['median']:+.2f} s"

    row("first run - warm median", first_minus_warm)
    if record["settings"]["deep"]:
        row("--deep", run_wall("deep"))
        row("  GPU", lambda b: f"{b['deep']['timings'][0]['gpu_ms']:.0f} ms" if b.get("deep") and b["deep"]["timings"] else "-")
    if record["settings"]["device_all"]:
        row("--device all", run_wall("device_all"))
        row("  GPUs measured", lambda b: str(len(b["device_all"]["timings"])) if b.get("device_all") else "-")
    header = ["", *(b["label"] for b in builds)]
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in [header] + rows]
    return "\n".join(line.rstrip() for line in lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="speed.py",
        description="memtopo's speed benchmark: first, warm, --deep and --device all runs of one or more builds",
    )
    parser.add_argument("out", help="folder for speed.json and every run's files (created)")
    parser.add_argument("builds", nargs="+", metavar="[LABEL=]MEMTOPO", help="memtopo binaries")
    parser.add_argument("--runs", type=int, default=5, help="warm default runs per build (default 5)")
    parser.add_argument("--no-deep", dest="deep", action="store_false", help="leave out the --deep run")
    parser.add_argument(
        "--device-all",
        choices=("auto", "yes", "no"),
        default="auto",
        help="run --device all once (auto: when nvidia-smi lists several GPUs)",
    )
    parser.add_argument("--device", default="0", help="the GPU of the single-GPU runs (default 0)")
    parser.add_argument("--also-jit", action="store_true", help="also each build with MEMTOPO_JIT=1")
    parser.add_argument("--simulate", help="pass --simulate PROFILE to every run (no GPU needed)")
    parser.add_argument(
        "--extra", action="append", default=[], help="one more argument for every run (repeatable)"
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds one run may take (default 300)")
    options = parser.parse_args(argv)
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    return options


def main(argv):
    options = parse_args(argv)
    out = os.path.abspath(options.out)
    if os.path.exists(os.path.join(out, "speed.json")):
        print(f"speed: {out}/speed.json exists; give a new folder", file=sys.stderr)
        return 2
    builds = []
    for spec in options.builds:
        label, sep, path = spec.partition("=")
        if not sep:
            label, path = os.path.basename(spec) or spec, spec
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            print(f"speed: no executable memtopo at {path}", file=sys.stderr)
            return 2
        if not re.fullmatch(r"[\w.+-]+", label) or any(b.label == label for b in builds):
            print(f"speed: the label {label!r} is not a unique word (give LABEL=PATH)", file=sys.stderr)
            return 2
        builds.append(Build(label, os.path.abspath(path), out))
        if options.also_jit:
            builds.append(Build(label + "+jit", os.path.abspath(path), out, jit=True))
    for build in builds:
        if os.path.exists(build.cache):
            shutil.rmtree(build.cache)
        os.makedirs(build.cache)

    gpus = nvidia_smi()
    device_all = options.device_all == "yes" or (options.device_all == "auto" and len(gpus) > 1)
    single = ["--device", options.device]
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    for build in builds:
        build.record["first"] = run_memtopo(build, "first", single, options)
    warm = {b.label: [] for b in builds}
    for i in range(options.runs):
        for build in builds:
            warm[build.label].append(run_memtopo(build, f"warm-{i + 1}", single, options))
    for build in builds:
        build.record["warm"] = warm[build.label]
        build.record["warm_summary"] = summarise(warm[build.label])
    if options.deep:
        for build in builds:
            build.record["deep"] = run_memtopo(build, "deep", single + ["--deep"], options)
    if device_all:
        for build in builds:
            build.record["device_all"] = run_memtopo(build, "device-all", ["--device", "all"], options)

    device = {}
    for build in builds:
        run, dev = result_record(build.record["first"]["result"])
        build.record["tool_version"] = run.get("tool_version")
        build.record["git_commit"] = run.get("git_commit")
        build.record["git_describe"] = git_describe(run.get("git_commit"))
        if dev and not device:
            device = {
                "name": dev.get("name"),
                "uuid": run.get("gpu_uuid"),
                "driver_version": run.get("driver_version") or dev.get("driver_version"),
                "cuda_driver_version": run.get("cuda_driver_version"),
                "compute_capability": dev.get("compute_capability"),
                "simulated_profile": run.get("simulated_profile"),
            }
    smi = next((g for g in gpus if g["index"] == options.device), None)
    if smi:
        device.setdefault("uuid", smi["uuid"])
        device["nvidia_smi"] = smi
    device["count"] = len(gpus) if gpus else None
    record = {
        "schema": SCHEMA,
        "date_utc": started,
        "host": socket.gethostname(),
        "gpu": device,
        "settings": {
            "runs": options.runs,
            "deep": options.deep,
            "device_all": device_all,
            "device": options.device,
            "extra_args": options.extra,
            "simulate": options.simulate,
            "jit_cache": "CUDA_CACHE_PATH: one empty folder per build, kept across its runs",
        },
        "builds": [b.record for b in builds],
    }
    with open(os.path.join(out, "speed.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    name = device.get("name") or "GPU"
    print(f"speed: {name} ({device.get('uuid') or 'no UUID'}, driver {device.get('driver_version') or '?'}), {started}")
    print(table(record))
    print(f"speed: details in {out}/speed.json")
    failed = [
        r
        for b in record["builds"]
        for r in [b.get("first"), *b["warm"], b.get("deep"), b.get("device_all")]
        if r and r["exit_code"] != 0
    ]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
