"""``suite-threads``: workload (c) of the classic-matchers suite -- read/write
mixes on 1, 2 and 4 threads.

Each matcher holds the 1,000 digit subscriptions of workload (b)
(:func:`~cstrie_lab.bench.workloads.digits_workload`).  Every thread runs its own
stream of operations (:func:`~cstrie_lab.bench.workloads.mix_chunks`) for a fixed
time: lookups of (b)'s messages, and writes that are subscribe/unsubscribe pairs
of a digit pattern (any shape) with a subscriber of the thread's own, so the
matcher's size stays put.  Mixes: 50/50 and 90/10 reads/writes, in chunks of 20
operations (exactly 10 or 2 writes each); a thread stops at the first chunk
boundary after the time is up.  Throughput = all threads' operations / the time
from the first thread's start to the last one's end; threads start together on
a barrier.

Sharing: cstrie's :class:`~cstrie.Trie` is shared by the threads as it is (it is
thread safe and takes no lock); ``locked-trie`` has its own lock inside; every
other matcher is not thread safe, so its calls go through one shared
:class:`threading.Lock` (labelled ``+lock``).  After every run each matcher's size
must be what it was, and after all runs every matcher must still answer like
cstrie (checked on all 1,000 topics; 300 with ``--quick``).  The cyclic
garbage collector is paused during a run (the objects that live through all
runs are frozen out of its way once, :func:`gc.freeze`).

Order: ``rounds`` rounds; in each, every (mix, threads) cell runs every matcher,
in an order that rotates; the figure is the median ops/s over the rounds.

Floor: with 2 threads on the 90/10 mix, cstrie's throughput >= 1.5x the locked
trie's.  It means something on a free-threaded interpreter with the GIL off
(``python3.13t``, ``PYTHON_GIL=0``); on a GIL build the value is reported but the
floor is marked indicative.
"""

from __future__ import annotations

import gc
import platform
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cstrie_lab.bench import suite
from cstrie_lab.bench.base import BenchError, Context, Floor, Result, Scenario, Table
from cstrie_lab.bench.format import fmt_ratio
from cstrie_lab.bench.timing import gc_paused, summarize
from cstrie_lab.bench.workloads import digits_workload, mix_chunks

NAME = "suite-threads"
DEFAULT_MS = [500]
QUICK_MS = [60]
THREADS = (1, 2, 4)
MIXES = (("50/50", 0.5), ("90/10", 0.1))
CHUNKS = 400  # per thread: 8,000 operations, cycled
FLOOR = 1.5
FLOOR_MIX, FLOOR_THREADS = "90/10", 2

Op = tuple[Callable[..., Any], tuple[Any, ...]]


def _gil() -> bool:
    f = getattr(sys, "_is_gil_enabled", None)
    return bool(f()) if f is not None else True


def _locked(fn: Callable[..., Any], lock: threading.Lock) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        with lock:
            return fn(*args)

    return call


class _Runner:
    """One matcher: its (possibly lock-wrapped) operations and per-thread streams."""

    def __init__(self, e: suite.Entry, streams: dict[str, list[list[list[Any]]]]) -> None:
        self.entry = e
        sub, unsub, lookup = e.matcher.ops()
        if not e.thread_safe:
            lock = threading.Lock()
            sub, unsub, lookup = (_locked(f, lock) for f in (sub, unsub, lookup))
            self.label = f"{e.label}+lock"
        else:
            self.label = e.label
        tr = e.translate
        fns = {"sub": sub, "unsub": unsub}
        self.streams: dict[str, list[list[list[Op]]]] = {}
        for mix, per_thread in streams.items():
            self.streams[mix] = [
                [
                    [
                        (lookup, (tr(a),)) if kind == "lookup" else (fns[kind], (tr(a), b))
                        for kind, a, b in chunk
                    ]
                    for chunk in chunks
                ]
                for chunks in per_thread
            ]

    def run(self, mix: str, threads: int, seconds: float) -> float:
        """ops/s of ``threads`` threads on ``mix`` for about ``seconds``."""
        streams = self.streams[mix][:threads]
        barrier = threading.Barrier(threads + 1)
        starts = [0.0] * threads
        ends = [0.0] * threads
        counts = [0] * threads
        errors: list[BaseException] = []

        def work(i: int) -> None:
            chunks = streams[i]
            n_chunks = len(chunks)
            clock = time.perf_counter
            try:
                barrier.wait()
                start = clock()
                deadline = start + seconds
                done = 0
                k = 0
                while True:
                    for fn, args in chunks[k]:
                        fn(*args)
                    done += 1
                    k = k + 1 if k + 1 < n_chunks else 0
                    if clock() >= deadline:
                        break
                ends[i] = clock()
                starts[i] = start
                counts[i] = done * len(chunks[0])
            except BaseException as exc:  # reported below, never lost in a thread
                errors.append(exc)

        pool = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(threads)]
        for t in pool:
            t.start()
        gc.collect()
        with gc_paused():
            barrier.wait()
            for t in pool:
                t.join()
        if errors:
            raise BenchError(f"{self.label}: a thread failed: {errors[0]!r}") from errors[0]
        return sum(counts) / (max(ends) - min(starts))


def run(ctx: Context) -> Result:
    sizes, standard_size = ctx.pick_sizes(DEFAULT_MS, QUICK_MS)
    seconds = sizes[-1] / 1000
    rounds = ctx.pick_repeat(3, 1)
    gil = _gil()
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    rng = ctx.rng(NAME)
    w = digits_workload(rng, 20_000)
    every = sorted(
        {p for p, _ in w.pairs}
        | {f"{a}.{b}.{c}" for a in "0123456789" for b in "0123456789" for c in "0123456789"}
    )
    streams: dict[str, list[list[list[Any]]]] = {}
    for mix, share in MIXES:
        per_thread = []
        for thread in range(max(THREADS)):
            pairs = [(rng.choice(every), 10_000_000 * (thread + 1) + i) for i in range(64)]
            per_thread.append(mix_chunks(rng, share, pairs, w.messages, CHUNKS))
        streams[mix] = per_thread
    res = Result(
        NAME,
        params={
            "subscriptions": len(w.pairs),
            "seconds_per_run": seconds,
            "rounds": rounds,
            "threads": list(THREADS),
            "mixes": {
                m: f"{round(100 * (1 - s))}% lookups, {round(100 * s)}% writes" for m, s in MIXES
            },
            "chunk": 20,
            "python": sys.version.split()[0],
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
            "free_threaded_build": free_threaded,
            "gil_enabled": gil,
        },
    )
    runners: list[_Runner] = []
    base_sizes: dict[str, int] = {}
    entries, skipped = suite.build_all(ctx, NAME, w.topic_space, w.pairs)
    sample = 300 if ctx.quick else None
    suite.check_agree(entries, w.topic_space, rng, sample=sample)
    for e in entries:
        runners.append(_Runner(e, streams))
        base_sizes[e.label] = e.size()
    cells = [(mix, n) for mix, _ in MIXES for n in THREADS]
    samples: dict[str, dict[str, list[float]]] = {
        r.label: {f"{m} {n}t": [] for m, n in cells} for r in runners
    }
    # the matchers and streams live through every run: keep the collector off them
    gc.collect()
    gc.freeze()
    total = rounds * len(cells) * len(runners)
    with ctx.progress.task(
        f"{NAME}: {len(runners)} matchers x {len(cells)} cells x {rounds} rounds x {seconds:g}s",
        total,
    ) as t:
        for r in range(rounds):
            for c, (mix, n) in enumerate(cells):
                k = (r + c) % len(runners)
                for runner in runners[k:] + runners[:k]:
                    ops = runner.run(mix, n, seconds)
                    size = runner.entry.size()
                    if size != base_sizes[runner.entry.label]:
                        raise BenchError(
                            f"{runner.label}: size {size} after {n} threads of {mix}, "
                            f"expected {base_sizes[runner.entry.label]} (lost or extra pairs)"
                        )
                    samples[runner.label][f"{mix} {n}t"].append(ops)
                    t.advance()
    gc.unfreeze()
    suite.check_agree(entries, w.topic_space, rng, sample=sample, what=" (after the threaded runs)")

    stats = {lab: {cell: summarize(v) for cell, v in by.items()} for lab, by in samples.items()}
    cols = [f"{m} {n}t" for m, n in cells]
    table = Table(
        f"(c) throughput, kops/s (median of {rounds}; {seconds:g} s per run), 1k digit "
        f"subscriptions; Python {res.params['python']}"
        f"{' free-threaded' if free_threaded else ''}, GIL {'on' if gil else 'off'}",
        ["matcher", *cols],
    )
    for lab, by in stats.items():
        table.add(lab, *[f"{by[c].median / 1e3:,.1f}" for c in cols])
    for lab, why in skipped.items():
        table.add(lab, f"skipped: {why}", *[""] * (len(cols) - 1))
    ratio = Table(
        "(c) cstrie / other throughput (above 1.00x cstrie does more operations per second)",
        ["matcher", *cols],
    )
    cs = stats["cstrie"]
    for lab, by in stats.items():
        if lab != "cstrie":
            ratio.add(lab, *[fmt_ratio(cs[c].median / by[c].median) for c in cols])
    scaling = Table(
        "(c) scaling: throughput at n threads / at 1 thread",
        ["matcher", *[f"{m} {n}t / 1t" for m, n in cells if n != 1]],
    )
    for lab, by in stats.items():
        scaling.add(
            lab,
            *[fmt_ratio(by[f"{m} {n}t"].median / by[f"{m} 1t"].median) for m, n in cells if n != 1],
        )
    res.tables += [table, ratio, scaling]
    cell = f"{FLOOR_MIX} {FLOOR_THREADS}t"
    measured = float("nan")
    if "locked-trie" in stats:
        measured = cs[cell].median / stats["locked-trie"][cell].median
    standard = standard_size and free_threaded and not gil
    res.floors.append(
        Floor(
            name="suite-threads-90-10-2t",
            description=f"(c) {FLOOR_MIX} mix, {FLOOR_THREADS} threads: cstrie / locked-trie "
            f"throughput (Python {res.params['python']}"
            f"{' free-threaded' if free_threaded else ''}, GIL {'on' if gil else 'off'})",
            measured=measured,
            limit=FLOOR,
            kind="min",
            standard=standard,
            indicative="non-standard sizes" if not standard_size else "the GIL is on",
        )
    )
    if gil:
        res.notes.append(
            "This interpreter runs with the GIL, so threads take turns on it and the "
            "threaded figures say little about a lock-free structure: the floor is "
            "indicative here. Run it on free-threaded CPython: PYTHON_GIL=0 "
            ".venv-ft/bin/python -m cstrie bench --scenario suite-threads"
        )
    res.notes.append(
        "'+lock': the matcher is not thread safe, so every call goes through one shared "
        "threading.Lock; locked-trie (cstrie_lab.pytrie.PyTrie) has its lock inside; cstrie "
        "is shared as it is."
    )
    res.data = {
        "ops_per_s": {lab: {c: st.to_dict() for c, st in by.items()} for lab, by in stats.items()},
        "skipped": skipped,
        "floor_cell": cell,
    }
    return res


def plot(res: Result, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    from cstrie_lab.bench.plots import lines, save

    data = res.data["ops_per_s"]
    threads = res.params["threads"]
    fig, axes = plt.subplots(1, len(MIXES), figsize=(9, 4))
    gil = "on" if res.params["gil_enabled"] else "off"
    for ax, (mix, _) in zip(axes, MIXES, strict=True):
        lines(
            ax,
            threads,
            {lab: [d[f"{mix} {n}t"]["median"] for n in threads] for lab, d in data.items()},
            xlabel="threads",
            ylabel="operations per second (log)",
            title=f"(c) {mix} reads/writes, Python {res.params['python']}, GIL {gil}",
        )
        ax.set_yscale("log")
        ax.set_xticks(threads)
    tag = "nogil" if not res.params["gil_enabled"] else "gil"
    path = out / f"suite-threads-{tag}.png"
    save(fig, path)
    return [path]


SCENARIO = Scenario(
    NAME, "suite (c): 50/50 and 90/10 read/write mixes on 1, 2, 4 threads", run, plot
)
