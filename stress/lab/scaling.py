"""Scaling with threads: how much more work cstrie does per thread added.

``python -m stress.lab.scaling [--threads 1,2,4,...] [--seconds 0.5] [--repeat 1]
[--json FILE] [--plot FILE.png] [ROW ...]``

Each row is one workload on ``cstrie.Trie`` from Python; for every thread
count n (default 1, 2, 4, ... up to the CPUs this process may use, and that
count) n threads start together on a barrier and each runs its own loop of
the row's calls for ``--seconds``.  Per (row, n) it prints:

* ops/s over all threads (wall clock) and ``x1``, the ratio to 1 thread;
* ops per CPU-second and ``eff``, its ratio to 1 thread: 1.0 means a thread
  does as much per CPU-second beside the others as alone.  Shared cache lines
  (a lock word, a shared reference count, a counter every writer bumps) make
  it fall; unlike ops/s it does not depend on how many cores were free;
* cpu/wall: how many cores the threads really used (close to n = parallel);
* waits/1k: voluntary context switches per 1,000 ops (a thread that slept on
  a lock).

One op is one call: a lookup, a subscribe, an unsubscribe, a snapshot()
(taken and dropped), a route.  The measurement is
``stress.harness.probes.run_probe`` (512 ops per step).  Rows named
``locked-*`` are the baseline a user gets with one ``threading.Lock`` around
the same calls.  The engine-level rows are a C program,
``stress/scale_engine.c`` (``make -C stress scale``); its JSON lines plot with
``--from-json``.  docs/benchmarks.md, "Scaling with threads", says how to read
both.

On a free-threaded build the run refuses to start (exit status 2) when the
GIL is enabled: run it with ``PYTHON_GIL=0``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ROWS", "main", "plot", "read_records", "summary"]

N_BASE = 1024  # base patterns (as stress/scale_engine.c)
N_UPDATES = 256  # update patterns per thread: one step subscribes and unsubscribes each
N_TOPICS = 512  # topics per thread: one lookup step looks each up once
BASE_ID = 1_000_000
MAX_THREADS = 1024
STEP = 512  # ops per step (what run_probe counts)


def _cpus() -> int:
    count = getattr(os, "process_cpu_count", None)
    if count is not None:
        return count() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def default_threads(cpus: int | None = None) -> list[int]:
    """1, 2, 4, ... up to ``cpus`` (this process's CPUs), and ``cpus`` itself."""
    top = cpus or _cpus()
    out, n = [], 1
    while n <= top:
        out.append(n)
        n *= 2
    return sorted({*out, top})


# ---------------------------------------------------------------------------
# The data: the same words as stress/scale_engine.c.


def base_patterns() -> list[str]:
    """1,024 AMQP patterns: r<a>.w<b>.*, r<a>.#, r<a>.w<b>.x<c>."""
    out = []
    for j in range(N_BASE):
        a, b, c = j % 128, j % 8, j % 13
        out.append((f"r{a}.w{b}.*", f"r{a}.#", f"r{a}.w{b}.x{c}")[j % 3])
    return out


def thread_topics(k: int) -> list[str]:
    """Thread k's 512 topics (~5 subscribers each), new str objects built by
    the caller: topics arriving on different connections are different
    objects."""
    out = []
    for i in range(N_TOPICS):
        j = (i * 7919 + k * 104729) % N_BASE
        out.append(f"r{j % 128}.w{j % 8}.x{i % 13}".encode().decode())
    return out


def update_patterns(prefix: str) -> list[str]:
    """256 patterns <prefix>r<j % 128>.w<j // 128>.*, new str objects."""
    return [f"{prefix}r{j % 128}.w{j // 128}.*".encode().decode() for j in range(N_UPDATES)]


def own_subscriber(k: int) -> str:
    """Thread k's subscriber: an interned str (immortal on 3.13t, like a
    client id read from a config), written by thread k only."""
    return sys.intern(f"client-t{k}")


@dataclass
class Shared:
    """What a row's threads share: a trie (None: each thread makes its own),
    and the locked rows' one lock."""

    trie: Any
    lock: threading.Lock = field(default_factory=threading.Lock)


def _trie(subscriber: Callable[[int], Any], groups: bool = False) -> Any:
    """A Trie holding the base patterns (and with groups, 128 share groups of
    4 members on r<a>.#).  A thread that updates under t<k>. subscribes
    t<k>.keep first, so its first word stays."""
    from cstrie import Trie

    t = Trie()
    for j, p in enumerate(base_patterns()):
        t.subscribe(p, subscriber(j))
    if groups:
        for a in range(128):
            for m in range(4):
                t.subscribe(f"r{a}.#", sys.intern(f"member-{a}-{m}"), group=f"g{a % 4}")
    return t


def _int_subs(j: int) -> int:
    return BASE_ID + j  # mortal ints, the same objects returned to every thread


def _str_subs(j: int) -> str:
    return sys.intern(f"client-{j}")  # immortal on 3.13t


def shared_int() -> Shared:
    return Shared(_trie(_int_subs))


def shared_str() -> Shared:
    return Shared(_trie(_str_subs))


def shared_groups() -> Shared:
    return Shared(_trie(_str_subs, groups=True))


def shared_groups_random() -> Shared:
    s = shared_groups()
    for g in range(4):
        s.trie.set_group_policy(f"g{g}", "random")
    return s


def own_tries() -> Shared:
    return Shared(None)


# ---------------------------------------------------------------------------
# The rows: setup(shared, k) runs in thread k and returns its step (512 ops).

Step = Callable[[], None]


def _lookups(lookup: Callable[[str], Any], k: int) -> Step:
    topics = thread_topics(k)

    def step() -> None:
        for x in topics:
            lookup(x)

    return step


def row_lookup(sh: Shared, k: int) -> Step:
    return _lookups(sh.trie.lookup, k)  # bound once, in this thread


def row_lookup_inline(sh: Shared, k: int) -> Step:
    trie = sh.trie
    topics = thread_topics(k)

    def step() -> None:
        for x in topics:
            trie.lookup(x)  # the shared trie object read on every call

    return step


def row_locked_lookup(sh: Shared, k: int) -> Step:
    lookup, lock = sh.trie.lookup, sh.lock
    topics = thread_topics(k)

    def step() -> None:
        for x in topics:
            with lock:
                lookup(x)

    return step


def _updates(trie: Any, k: int, prefix: str, lock: threading.Lock | None = None) -> Step:
    subscribe, unsubscribe = trie.subscribe, trie.unsubscribe
    pats = update_patterns(prefix)
    who = own_subscriber(k)
    subscribe(f"t{k}.keep", who)  # a pair it keeps: its id is never freed
    if lock is None:

        def step() -> None:
            for p in pats:
                subscribe(p, who)
                unsubscribe(p, who)

    else:

        def step() -> None:
            for p in pats:
                with lock:
                    subscribe(p, who)
                with lock:
                    unsubscribe(p, who)

    return step


def row_update_own_trie(sh: Shared, k: int) -> Step:
    return _updates(_trie(_str_subs), k, "")


def row_update_own_patterns(sh: Shared, k: int) -> Step:
    return _updates(sh.trie, k, f"t{k}.")


def row_update_same_patterns(sh: Shared, k: int) -> Step:
    return _updates(sh.trie, k, "")


def row_locked_update_own_patterns(sh: Shared, k: int) -> Step:
    return _updates(sh.trie, k, f"t{k}.", sh.lock)


def row_snapshot(sh: Shared, k: int) -> Step:
    snapshot = sh.trie.snapshot

    def step() -> None:
        for _ in range(STEP):
            snapshot()

    return step


def row_route(sh: Shared, k: int) -> Step:
    return _lookups(sh.trie.route, k)


def _mix(sh: Shared, k: int, update_pct: int, locked: bool) -> Step:
    """One shared trie: lookups of own topics, and update_pct% of the ops
    subscribe / unsubscribe (in turn) the thread's own patterns t<k>.*.

    Ten precomputed steps of 512 ops each: exactly update_pct% of every
    5,120 ops are updates, spread evenly."""
    trie, lock = sh.trie, sh.lock
    lookup, subscribe, unsubscribe = trie.lookup, trie.subscribe, trie.unsubscribe
    topics = thread_topics(k)
    pats = update_patterns(f"t{k}.")
    who = own_subscriber(k)
    subscribe(f"t{k}.keep", who)
    LOOKUP, SUB, UNSUB = 0, 1, 2
    seq: list[tuple[int, str]] = []
    acc = ti = ui = 0
    sub_next = True
    for _ in range(10 * STEP):
        acc += update_pct
        if acc >= 100:
            acc -= 100
            seq.append((SUB if sub_next else UNSUB, pats[ui]))
            if not sub_next:
                ui = (ui + 1) % len(pats)
            sub_next = not sub_next
        else:
            seq.append((LOOKUP, topics[ti]))
            ti = (ti + 1) % len(topics)
    steps = [seq[i : i + STEP] for i in range(0, len(seq), STEP)]
    at = [0]

    if not locked:

        def step() -> None:
            i = at[0]
            at[0] = (i + 1) % 10
            for op, x in steps[i]:
                if op == LOOKUP:
                    lookup(x)
                elif op == SUB:
                    subscribe(x, who)
                else:
                    unsubscribe(x, who)

    else:

        def step() -> None:
            i = at[0]
            at[0] = (i + 1) % 10
            for op, x in steps[i]:
                with lock:
                    if op == LOOKUP:
                        lookup(x)
                    elif op == SUB:
                        subscribe(x, who)
                    else:
                        unsubscribe(x, who)

    return step


def row_mix_90_10(sh: Shared, k: int) -> Step:
    return _mix(sh, k, 10, locked=False)


def row_mix_50_50(sh: Shared, k: int) -> Step:
    return _mix(sh, k, 50, locked=False)


def row_locked_mix_90_10(sh: Shared, k: int) -> Step:
    return _mix(sh, k, 10, locked=True)


def row_locked_mix_50_50(sh: Shared, k: int) -> Step:
    return _mix(sh, k, 50, locked=True)


@dataclass(frozen=True)
class Row:
    what: str
    setup: Callable[[Shared, int], Step]
    make_shared: Callable[[], Shared]
    locked: bool = False  # the baseline: every call inside one threading.Lock


ROWS: dict[str, Row] = {
    "update-own-trie": Row(
        "Trie.subscribe + unsubscribe, each thread its own Trie (base loaded), bound methods",
        row_update_own_trie,
        own_tries,
    ),
    "update-own-patterns": Row(
        "the same on one shared Trie, each thread its own patterns under t<k>.",
        row_update_own_patterns,
        shared_str,
    ),
    "update-same-patterns": Row(
        "the same on one shared Trie, every thread the same 256 patterns, own subscriber",
        row_update_same_patterns,
        shared_str,
    ),
    "snapshot": Row(
        "trie.snapshot() taken and dropped, bound per thread", row_snapshot, shared_str
    ),
    "lookup-int": Row(
        "the shared Trie's lookup bound per thread, int subscribers (mortal, shared)",
        row_lookup,
        shared_int,
    ),
    "lookup-str": Row(
        "the same, interned str subscribers (immortal on 3.13t)", row_lookup, shared_str
    ),
    "lookup-inline": Row(
        "trie.lookup(t) written in the loop (the shared trie read per call), str subscribers",
        row_lookup_inline,
        shared_str,
    ),
    "route": Row(
        "the shared Trie's route bound per thread, 128 groups of 4 (round-robin: one "
        "counter per group)",
        row_route,
        shared_groups,
    ),
    "route-random": Row(
        "the same, groups with the random policy (a per-thread generator)",
        row_route,
        shared_groups_random,
    ),
    "mix-90-10": Row(
        "one shared Trie, own bound methods: 90% lookup, 10% subscribe/unsubscribe of own "
        "patterns t<k>.",
        row_mix_90_10,
        shared_str,
    ),
    "mix-50-50": Row("the same, 50% lookups, 50% updates", row_mix_50_50, shared_str),
    "locked-lookup-str": Row(
        "lookup-str, every call inside one threading.Lock", row_locked_lookup, shared_str, True
    ),
    "locked-update-own-patterns": Row(
        "update-own-patterns, every call inside one threading.Lock",
        row_locked_update_own_patterns,
        shared_str,
        True,
    ),
    "locked-mix-90-10": Row(
        "mix-90-10, every call inside one threading.Lock", row_locked_mix_90_10, shared_str, True
    ),
    "locked-mix-50-50": Row(
        "mix-50-50, every call inside one threading.Lock", row_locked_mix_50_50, shared_str, True
    ),
}


# ---------------------------------------------------------------------------
# Measuring and reporting


def measure(
    names: Sequence[str], threads: Sequence[int], seconds: float, repeat: int
) -> Iterable[dict[str, Any]]:
    """One record per (row, thread count), row by row: the best ops/s of
    ``repeat`` runs (thread counts interleaved), with its ratios to 1 thread."""
    from stress.harness.probes import run_probe

    for name in names:
        row = ROWS[name]
        best: dict[int, dict[str, float]] = {}
        for _ in range(repeat):
            for n in threads:
                r = run_probe(row.setup, n, seconds, row.make_shared)
                if n not in best or r["ops_per_s"] > best[n]["ops_per_s"]:
                    best[n] = r
        one = best[threads[0]]
        for n in threads:
            r = best[n]
            yield {
                "bench": "python",
                "row": name,
                "what": row.what,
                "locked": row.locked,
                "threads": n,
                "ops": int(r["ops"]),
                "wall_s": r["ops"] / r["ops_per_s"],
                "cpu_s": r["ops"] / r["ops_per_cpu_s"] if r["ops_per_cpu_s"] else 0.0,
                "ops_per_s": r["ops_per_s"],
                "ops_per_cpu_s": r["ops_per_cpu_s"],
                "cpu_per_wall": r["cpu_per_wall"],
                "waits_per_1k": r["waits_per_1k"],
                "speedup": r["ops_per_s"] / one["ops_per_s"],
                "efficiency": (
                    r["ops_per_cpu_s"] / one["ops_per_cpu_s"] if one["ops_per_cpu_s"] else 0.0
                ),
            }


HEADER = (
    f"{'row':<28}{'threads':>8}{'ops/s':>14}{'x1':>8}{'ops/cpu-s':>14}{'eff':>7}"
    f"{'cpu/wall':>10}{'waits/1k':>10}"
)


def format_record(r: dict[str, Any]) -> str:
    return (
        f"{r['row']:<28}{r['threads']:>8}{r['ops_per_s']:>14,.0f}{r['speedup']:>7.2f}x"
        f"{r['ops_per_cpu_s']:>14,.0f}{r['efficiency']:>7.2f}{r['cpu_per_wall']:>10.2f}"
        f"{r['waits_per_1k']:>10.2f}"
    )


def read_records(path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(meta, records) of a JSON-lines file written by this module or by
    stress/scale_engine.c."""
    meta: dict[str, Any] = {}
    records: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            obj = json.loads(line)
            if "meta" in obj:
                meta = obj["meta"]
            elif "row" in obj and "threads" in obj:
                records.append(obj)
    return meta, records


def plot(records: Sequence[dict[str, Any]], path: str, title: str) -> str | None:
    """One small panel per row (per bench and row when the records hold
    both): speedup (ops/s at n threads / at 1) against threads on log2 axes,
    with the ideal (n x one thread, dotted) and the row's locked baseline
    (``locked-<row>``, dashed) where there is one; the panel's title gives
    the efficiency (ops per CPU-second at n / at 1) at the largest n.  Returns
    a note instead of raising when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"no plot: matplotlib is not installed ({exc}); plot later with --from-json"
    series: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        series.setdefault((str(r.get("bench", "?")), r["row"]), []).append(r)
    several = len({b for b, _ in series}) > 1
    panels = [key for key in series if not key[1].startswith("locked-")]
    if not panels:
        return "no plot: no records"
    cols = min(5, len(panels))
    nrows = -(-len(panels) // cols)
    fig, axes = plt.subplots(
        nrows, cols, figsize=(3.1 * cols, 2.7 * nrows + 0.6), dpi=80, squeeze=False
    )
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax, (bench, row) in zip(axes.flat, panels, strict=False):
        rs = sorted(series[(bench, row)], key=lambda r: r["threads"])
        xs = [r["threads"] for r in rs]
        ax.plot(xs, xs, ":", color="black", linewidth=1, label="ideal")
        ax.plot(xs, [r["speedup"] for r in rs], "-o", markersize=3, label="cstrie")
        locked = sorted(series.get((bench, f"locked-{row}"), []), key=lambda r: r["threads"])
        if locked:
            ax.plot(
                [r["threads"] for r in locked],
                [r["speedup"] for r in locked],
                "--s",
                markersize=3,
                color="tab:red",
                label="one lock",
            )
        top = rs[-1]
        name = f"{bench} {row}" if several else row
        ax.set_title(
            f"{name}\n{top['speedup']:.2f}x at {top['threads']}, eff {top['efficiency']:.2f}",
            fontsize=8,
        )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs], fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(True, alpha=0.3)
    axes.flat[0].legend(fontsize=7, loc="upper left")
    fig.suptitle(
        f"{title}\nspeedup = ops/s at n threads / at 1 thread; "
        "eff = ops per CPU-second at n / at 1",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None


# The scaling floors that these records show: (bench, row, threads, speedup).
FLOORS: list[tuple[str, str, int, float]] = [
    ("engine", "update-own-trie", 2, 1.8),
    ("engine", "update-disjoint", 2, 1.7),
    ("python", "snapshot", 2, 1.7),
    ("python", "mix-90-10", 2, 1.7),
    ("python", "mix-50-50", 2, 1.7),
    ("engine", "lookup", 16, 15.0),
    ("engine", "update-own-trie", 16, 12.0),
    ("engine", "update-disjoint", 16, 10.0),
    ("python", "update-own-patterns", 16, 8.0),
    ("python", "snapshot", 16, 8.0),
    ("python", "lookup-str", 16, 12.0),
]


def summary(records: Sequence[dict[str, Any]]) -> list[str]:
    """Lines: each row's speedup and efficiency at the largest thread count,
    then the issue-24 floors these records can answer (2-core floors also
    ask for efficiency >= 0.85)."""
    out = []
    by: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for r in records:
        by.setdefault((r.get("bench", "?"), r["row"]), {})[r["threads"]] = r
    for (bench, row), rs in by.items():
        top = rs[max(rs)]
        out.append(
            f"{bench:<7}{row:<28} {top['threads']:>3} threads: {top['speedup']:6.2f}x ops/s, "
            f"eff {top['efficiency']:.2f}, cpu/wall {top['cpu_per_wall']:.1f}"
        )
    for bench, row, n, floor in FLOORS:
        r = by.get((bench, row), {}).get(n)
        if r is None:
            continue
        ok = r["speedup"] >= floor and (n != 2 or r["efficiency"] >= 0.85)
        eff = f", eff {r['efficiency']:.2f} (>= 0.85)" if n == 2 else ""
        out.append(
            f"floor {'met   ' if ok else 'MISSED'} {bench} {row} at {n}: "
            f"{r['speedup']:.2f}x (>= {floor}x){eff}"
        )
    return out


def _si(v: float) -> str:
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.0f}K"


def markdown(records: Sequence[dict[str, Any]]) -> list[str]:
    """The records as Markdown tables (one per bench), as docs/benchmarks.md
    records them: per row the ops/s at 1 and at the largest thread count N,
    the speedup at every count, and at N the efficiency, cpu/wall and waits."""
    out: list[str] = []
    benches: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    for r in records:
        benches.setdefault(str(r.get("bench", "?")), {}).setdefault(r["row"], {})[r["threads"]] = r
    for bench, rows in benches.items():
        counts = sorted({n for d in rows.values() for n in d})
        top = counts[-1]
        more = [n for n in counts if n > 1]
        out += [
            "",
            f"**{bench}**",
            "",
            f"| row | 1 thread ops/s | {top} threads ops/s | "
            + " | ".join(f"{n}/1" for n in more)
            + f" | ops per CPU-s {top}/1 | cpu/wall at {top} | waits/1k at {top} |",
            "|---|---:|---:|" + "---:|" * len(more) + "---:|---:|---:|",
        ]
        for row, d in rows.items():
            if 1 not in d or top not in d:
                continue
            t = d[top]
            ratios = " | ".join(f"{d[n]['speedup']:.2f}x" if n in d else "" for n in more)
            out.append(
                f"| `{row}` | {_si(d[1]['ops_per_s'])} | {_si(t['ops_per_s'])} | {ratios} | "
                f"{t['efficiency']:.2f} | {t['cpu_per_wall']:.2f} | {t['waits_per_1k']:.2f} |"
            )
    return out


# The scaling floors on the stress harness's mixed scenario: mix -> {threads: ratio}.
HARNESS_FLOORS: dict[str, dict[int, float]] = {"90/10": {2: 1.8, 16: 10.0}, "50/50": {16: 6.0}}


def harness_summary(path: str) -> list[str]:
    """Lines for one ``python -m stress.harness --json`` report: each
    implementation's n/1 ratios (ops/s and ops per CPU-second), whether the
    run passed, and the issue-24 floors on cstrie's ratios."""
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    cfg = d.get("config", {})
    mix = str(cfg.get("mix"))
    out = [
        f"harness {mix} ({path}): {'passed' if d.get('passed') else 'FAILED'}, "
        f"threads {cfg.get('thread_counts')}"
    ]
    effs = d.get("cpu_efficiency_ratios", {})
    for impl, ratios in d.get("ratios", {}).items():
        parts = [
            f"{k} {v:.2f}x (eff {effs.get(impl, {}).get(k, float('nan')):.2f})"
            for k, v in ratios.items()
        ]
        out.append(f"  {impl:<8}" + ", ".join(parts))
    for n, floor in HARNESS_FLOORS.get(mix, {}).items():
        got = d.get("ratios", {}).get("cstrie", {}).get(f"{n}/1")
        if got is None:
            continue
        eff = effs.get("cstrie", {}).get(f"{n}/1", 0.0)
        ok = got >= floor and (n != 2 or eff >= 0.85)
        out.append(
            f"floor {'met   ' if ok else 'MISSED'} harness mixed {mix} at {n}: {got:.2f}x "
            f"(>= {floor}x)" + (f", eff {eff:.2f} (>= 0.85)" if n == 2 else "")
        )
    return out


def _thread_list(text: str) -> list[int]:
    try:
        counts = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected e.g. 1,2,4, not {text!r}") from None
    if not counts or counts[0] < 1 or counts[-1] > MAX_THREADS:
        raise argparse.ArgumentTypeError(f"thread counts must be 1..{MAX_THREADS}")
    return sorted({1, *counts})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m stress.lab.scaling",
        description=(__doc__ or "").split("\n\n")[0],
        epilog="rows: "
        + "; ".join(f"{k}: {v.what}" for k, v in ROWS.items())
        + ". Exit status: 0 done, 2 usage error or the GIL is on in a free-threaded build.",
    )
    p.add_argument("rows", nargs="*", metavar="ROW", help="rows to run (default: all)")
    p.add_argument(
        "--threads",
        type=_thread_list,
        default=None,
        metavar="LIST",
        help="thread counts, e.g. 1,2,4 (1 is always added; default: powers of two up to "
        "the CPUs, and that count)",
    )
    p.add_argument("--seconds", type=float, default=0.5, help="seconds per run (default 0.5)")
    p.add_argument(
        "--repeat", type=int, default=1, help="runs per (row, threads); the best is kept"
    )
    p.add_argument("--json", metavar="FILE", help="write JSON lines (a meta line, then records)")
    p.add_argument("--plot", metavar="FILE.png", help="speedup/efficiency plot (matplotlib)")
    p.add_argument(
        "--from-json",
        metavar="FILE",
        nargs="+",
        help="measure nothing: read records written by --json or scale_engine --json, print "
        "them and the summary, and plot them with --plot",
    )
    p.add_argument(
        "--harness-json",
        metavar="FILE",
        nargs="+",
        default=[],
        help="with --from-json: also summarise these `python -m stress.harness --json` reports",
    )
    p.add_argument(
        "--summary-only",
        action="store_true",
        help="with --from-json: print only the summary (each row at its largest thread "
        "count, and the issue-24 floors the records answer)",
    )
    p.add_argument(
        "--markdown",
        action="store_true",
        help="with --from-json: print the records as the Markdown tables of docs/benchmarks.md",
    )
    p.add_argument("--no-gc", action="store_true", help="disable the cyclic GC while measuring")
    p.add_argument("--list", action="store_true", help="list the rows and exit")
    args = p.parse_args(argv)

    if args.list:
        for name, row in ROWS.items():
            print(f"{name:<28}{row.what}")
        return 0
    if args.from_json:
        records: list[dict[str, Any]] = []
        metas = []
        for path in args.from_json:
            meta, recs = read_records(path)
            metas.append(meta)
            records.extend(recs)
        if args.markdown:
            print("\n".join(markdown(records)))
            return 0
        if not args.summary_only:
            print(HEADER)
            for r in records:
                print(format_record(r))
        print("\n".join(summary(records)))
        for path in args.harness_json:
            print("\n".join(harness_summary(path)))
        if args.plot:
            benches = sorted({str(r.get("bench")) for r in records})
            note = plot(
                records,
                args.plot,
                f"cstrie scaling ({', '.join(benches)}): "
                f"{', '.join(sorted({str(m.get('cpus', '?')) for m in metas}))} CPUs",
            )
            print(note or f"plot written to {args.plot}")
        return 0

    unknown = [r for r in args.rows if r not in ROWS]
    if unknown:
        p.error(f"unknown row(s): {', '.join(unknown)} (see --list)")
    if args.seconds <= 0 or args.repeat < 1:
        p.error("--seconds must be > 0 and --repeat >= 1")
    names = args.rows or list(ROWS)
    threads = args.threads or default_threads()

    import cstrie.trie  # noqa: F401  (load the engine before reading the GIL state)
    from stress.harness.report import environment, gil_enabled, gil_wrongly_on

    env = environment()
    if gil_wrongly_on(env):
        return 2
    if args.no_gc:
        gc.disable()
    cmd = "python -m stress.lab.scaling " + " ".join(argv if argv is not None else sys.argv[1:])
    meta = {
        "bench": "python",
        "command": cmd.strip(),
        "cpus": _cpus(),
        "seconds": args.seconds,
        "repeat": args.repeat,
        "threads": threads,
        "gc": not args.no_gc,
        **{k: env[k] for k in ("python", "free_threaded_build", "gil_enabled", "PYTHON_GIL")},
        "platform": env["platform"],
        "loadavg_at_start": env["loadavg_at_start"],
    }
    print(
        f"stress.lab.scaling: python {env['python']}, free-threaded build "
        f"{env['free_threaded_build']}, GIL enabled {env['gil_enabled']}, {meta['cpus']} CPUs, "
        f"threads {','.join(map(str, threads))}, {args.seconds} s per run, best of "
        f"{args.repeat}, load average {env['loadavg_at_start']}; one op = one call"
    )
    print(HEADER, flush=True)
    out = open(args.json, "w", encoding="utf-8") if args.json else None
    records = []
    t0 = time.perf_counter()
    try:
        if out:
            out.write(json.dumps({"meta": meta}) + "\n")
        for rec in measure(names, threads, args.seconds, args.repeat):
            records.append(rec)
            print(format_record(rec), flush=True)
            if out:
                out.write(json.dumps(rec) + "\n")
                out.flush()
    finally:
        if out:
            out.close()
    if env["free_threaded_build"] and gil_enabled():
        print("error: the GIL got enabled during the run", file=sys.stderr)
        return 2
    print(f"done in {time.perf_counter() - t0:.1f} s")
    if args.json:
        print(f"json written to {args.json}")
    if args.plot:
        title = (
            f"cstrie from Python {env['python']}"
            f"{' free-threaded, GIL off' if env['free_threaded_build'] else ' (GIL)'}, "
            f"{meta['cpus']} CPUs"
        )
        note = plot(records, args.plot, title)
        print(note or f"plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
