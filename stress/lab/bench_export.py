"""Benchmark: export and load of N pairs per format vs subscribe calls from Python.

The floor (issue "snapshot export"): exporting and loading 1,000,000 pairs must
each run at least 3x faster than building the same pairs with ``subscribe``
calls from Python, measured in the same process.  The machine is shared and
noisy, so only ratios from one run mean anything; each round measures the
baseline and then every format, interleaved, and medians are reported.  Times
are CPU seconds of this process (``time.process_time``, all threads, so
pyarrow's helper threads count too); wall seconds are shown beside them.  The
floor is judged on CPU time, which other processes on the machine disturb far
less than wall time.

Also reported: ``from_buffers``, the engine's bulk build that every loader ends
in (so the ceiling for load), and with ``--memory`` the peak Python memory
(tracemalloc) of each export, which is O(subscribers + one chunk), not O(pairs).

Usage::

    python stress/lab/bench_export.py                       # 1,000,000 pairs, 3 rounds
    python stress/lab/bench_export.py --pairs 200000 --repeat 1 --check-floors
    python stress/lab/bench_export.py --memory --json out.json

Exit status: 0 done (and floors met with --check-floors), 1 a floor missed or
a round trip lost pairs, 2 bad usage (e.g. pyarrow missing for parquet).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from array import array
from collections.abc import Callable
from itertools import accumulate
from typing import Any

from cstrie import Trie
from cstrie._binding import lib
from cstrie.export import export, load
from cstrie_lab.demo import workload

try:
    _malloc_trim: Callable[[int], int] | None = ctypes.CDLL("libc.so.6").malloc_trim
except (OSError, AttributeError):  # not glibc
    _malloc_trim = None

SUFFIX = {"binary": ".cstrie", "jsonl": ".jsonl", "parquet": ".parquet"}
FLOOR = 3.0
Timing = tuple[float, float]  # (cpu seconds, wall seconds)


def make_pairs(kind: str, n: int, seed: int) -> tuple[list[tuple[str, Any]], str]:
    """``iot``: the demo's MQTT fleet (cstrie_lab.demo.workload); ``amqp``: three-word
    keys with 10% ``*`` and 10% ``#``."""
    rng = random.Random(seed)
    if kind == "iot":
        pairs, _ = workload(rng, n, 1)
        return pairs, "mqtt"
    out = []
    for i in range(n):
        words = [f"w{rng.randrange(200)}", f"x{rng.randrange(2000)}", f"y{rng.randrange(20)}"]
        if i % 10 == 0:
            words[1] = "*"
        elif i % 10 == 1:
            words[2] = "#"
        out.append((".".join(words), f"sub{rng.randrange(max(n // 4, 1))}"))
    return out, "amqp"


def settle() -> None:
    """Collect Python garbage, then let the engine free what earlier rounds
    retired (dropped tries are freed through epoch reclamation, lazily, by
    whichever later operation advances the epoch; without this, the next
    measurement would pay for freeing the previous ones' nodes), and have
    glibc consolidate the freed chunks now rather than in the next malloc."""
    gc.collect()
    lib.cst_reclaim()
    if _malloc_trim is not None:
        _malloc_trim(0)


def timed(fn: Callable[[], Any]) -> tuple[Timing, Any]:
    settle()
    c0, w0 = time.process_time(), time.perf_counter()
    result = fn()
    return (time.process_time() - c0, time.perf_counter() - w0), result


def subscribe_all(pairs: list[tuple[str, Any]], dialect: str) -> Trie:
    t = Trie(dialect)
    sub = t.subscribe
    for p, s in pairs:
        sub(p, s)
    return t


def bulk_build(pairs: list[tuple[str, Any]], dialect: str) -> Timing:
    """Time of Trie.from_buffers alone for these pairs (buffers made beforehand)."""
    pats = [p.encode() for p, _ in pairs]
    index: dict[Any, int] = {}
    refs = array("Q", [index.setdefault(s, len(index) + 1) for _, s in pairs])
    offsets = array("q", accumulate(map(len, pats), initial=0))
    data = b"".join(pats)
    del pats
    t, _ = timed(lambda: Trie.from_buffers(data, offsets, refs, list(index), dialect))
    return t


def peak_export_memory(snap: Any, fmt: str, path: str) -> int:
    settle()
    tracemalloc.start()
    try:
        export(snap, path, format=fmt)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def med(ts: list[Timing], k: int) -> float:
    return statistics.median(t[k] for t in ts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pairs", type=int, default=1_000_000, help="pairs (default 1,000,000)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--workload", choices=("iot", "amqp"), default="iot")
    ap.add_argument("--formats", default="binary,jsonl,parquet")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--memory", action="store_true", help="also measure peak export memory")
    ap.add_argument("--json", metavar="PATH", help="write the results here")
    ap.add_argument("--check-floors", action="store_true", help=f"exit 1 below {FLOOR}x")
    args = ap.parse_args(argv)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if any(f not in SUFFIX for f in formats):
        print(f"bench_export: formats are {sorted(SUFFIX)}", file=sys.stderr)
        return 2
    if "parquet" in formats:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            print("bench_export: the parquet format needs pyarrow", file=sys.stderr)
            return 2
    pairs, dialect = make_pairs(args.workload, args.pairs, args.seed)
    print(
        f"bench_export: {len(pairs):,} pairs ({args.workload}, {dialect}), {args.repeat} rounds, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    base: list[Timing] = []
    bulk: list[Timing] = []
    exp: dict[str, list[Timing]] = {f: [] for f in formats}
    lod: dict[str, list[Timing]] = {f: [] for f in formats}
    size: dict[str, int] = {}
    memory: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            t, trie = timed(lambda: subscribe_all(pairs, dialect))
            base.append(t)
            snap = trie.snapshot()
            bulk.append(bulk_build(pairs, dialect))
            line = [f"subscribe {t[0]:.2f}"]
            for fmt in formats:
                path = os.path.join(tmp, "snap" + SUFFIX[fmt])
                t, _ = timed(lambda s=snap, p=path, f=fmt: export(s, p, format=f))
                exp[fmt].append(t)
                size[fmt] = os.path.getsize(path)
                t2, loaded = timed(lambda p=path: load(p))
                lod[fmt].append(t2)
                if r == 0 and sorted(map(repr, loaded)) != sorted(map(repr, snap)):
                    print(f"bench_export: the {fmt} round trip changed the pairs", file=sys.stderr)
                    return 1
                del loaded
                if args.memory and r == 0:
                    memory[fmt] = peak_export_memory(snap, fmt, path)
                line.append(f"{fmt} {t[0]:.2f}/{t2[0]:.2f}")
            print(f"  round {r + 1} (CPU s): " + ", ".join(line), flush=True)
            del trie, snap
    b_cpu, b_wall = med(base, 0), med(base, 1)
    rows = []
    ok = True
    print(
        f"\nsubscribe calls (baseline): {b_cpu:.2f} CPU s ({b_wall:.2f} wall s); "
        f"from_buffers alone: {med(bulk, 0):.2f} CPU s = {b_cpu / med(bulk, 0):.1f}x faster"
    )
    head = (
        f"{'format':8} {'MB':>6} {'export':>7} {'x':>5} {'load':>7} {'x':>5}   (wall x: exp/load)"
    )
    print(head + ("   export peak MB" if memory else ""))
    for fmt in formats:
        e, lo = med(exp[fmt], 0), med(lod[fmt], 0)
        ew, lw = med(exp[fmt], 1), med(lod[fmt], 1)
        row = {
            "format": fmt,
            "bytes": size[fmt],
            "export_cpu_s": e,
            "load_cpu_s": lo,
            "export_wall_s": ew,
            "load_wall_s": lw,
            "export_x": b_cpu / e,
            "load_x": b_cpu / lo,
            "export_peak_bytes": memory.get(fmt),
        }
        rows.append(row)
        ok &= b_cpu / e >= FLOOR and b_cpu / lo >= FLOOR
        print(
            f"{fmt:8} {size[fmt] / 1e6:6.1f} {e:7.2f} {b_cpu / e:5.1f} {lo:7.2f} {b_cpu / lo:5.1f}"
            f"   ({b_wall / ew:.1f} / {b_wall / lw:.1f})"
            + (f"   {memory[fmt] / 1e6:15.1f}" if memory else "")
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "pairs": len(pairs),
                    "workload": args.workload,
                    "subscribe_cpu_s": b_cpu,
                    "subscribe_wall_s": b_wall,
                    "from_buffers_cpu_s": med(bulk, 0),
                    "formats": rows,
                },
                f,
                indent=2,
            )
    if args.check_floors and not ok:
        print(f"bench_export: a ratio is below the {FLOOR}x floor", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
