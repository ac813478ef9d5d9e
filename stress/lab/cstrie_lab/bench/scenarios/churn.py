"""``churn``: no memory growth under 1,000,000 subscribe/unsubscribe cycles.

Runs in a fresh interpreter (:mod:`cstrie_lab.bench.child`).  The trie starts with a
broker population (:func:`~cstrie_lab.bench.workloads.broker_pairs`, 25,000 clients x 4
filters = 100,000 subscriptions).  Then the main thread runs ``cycles`` cycles;
cycle ``i`` subscribes a new client ``m-i`` to one filter and unsubscribes the
pair subscribed ``window`` cycles earlier, so the trie stays at base + window
pairs while paths are created and pruned, big subscriber sets change and
subscriber ids are made and freed.  Filters of churning clients: 50% a new
device's command topic (new path, pruned later), 30% a line's ``+/status``
(a shared set of 250+), 20% a site's ``broadcast/#`` (a shared set of 5,000+).

Meanwhile other threads run: ``lookup_threads`` threads look up broker topics
(their own topic strings) without pause; ``snapshot_threads`` threads take a
snapshot, ask it ``has_subscribers`` for 20 topics and its ``len``, hold it ~1 ms
and drop it, in a loop.  A reader that makes no progress for 30 s is reported.

RSS (``/proc/self/statm``) and the engine's live bytes are sampled every
``cycles/50`` cycles.  Floor: RSS at the end <= 1.10 x RSS after the warm-up
phase (the first 10% of cycles, at least 2 windows).  After the readers stop,
the window is drained and the engine's live bytes are compared with what they
were right after the base population was built (what a leak would leave).
"""

from __future__ import annotations

import gc
import random
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from cstrie_lab.bench.base import BenchError, Context, Floor, Result, Scenario, Table
from cstrie_lab.bench.child import run_child
from cstrie_lab.bench.format import fmt_bytes, fmt_size
from cstrie_lab.bench.machine import rss_bytes
from cstrie_lab.bench.plots import save
from cstrie_lab.bench.progress import Progress
from cstrie_lab.bench.workloads import broker_pairs, broker_topics

NAME = "churn"
DEFAULT = [1_000_000]
QUICK = [50_000]
FLOOR = 0.10
SAMPLES = 50
STALL_SECONDS = 30.0


def _churn_filter(rng: random.Random, clients: int) -> str:
    site, line = rng.randrange(max(clients // 5000, 1)), rng.randrange(20)
    r = rng.random()
    if r < 0.5:
        dev = 250 + rng.randrange(250)  # devices not in the base: new paths
        return f"site/s{site:03d}/line/l{line:02d}/dev/d{dev:03d}/cmd"
    if r < 0.8:
        return f"site/s{site:03d}/line/l{line:02d}/+/status"
    return f"site/s{site:03d}/broadcast/#"


def churn(
    cycles: int,
    base_clients: int,
    window: int,
    seed: int,
    lookup_threads: int = 1,
    snapshot_threads: int = 1,
) -> dict[str, Any]:
    """Child side: the churn run itself; returns samples and counters."""
    import sys

    from cstrie import _binding as nb
    from cstrie.trie import Trie

    progress = Progress(prefix="  [child] ")
    rng = random.Random(f"{seed}:{NAME}")
    gc.collect()
    rss_empty = rss_bytes()
    trie = Trie("mqtt")
    for p, s in broker_pairs(base_clients):
        trie.subscribe(p, s)
    base_len = len(trie)
    gc.collect()
    nb.reclaim()
    eng_base = nb.live_bytes()
    rss_base = rss_bytes()

    stop = threading.Event()
    counts = {"lookups": 0, "snapshots": 0, "snapshot_reads": 0}
    beats = [time.monotonic()] * (lookup_threads + snapshot_threads)
    errors: list[str] = []
    lock = threading.Lock()

    def looker(k: int) -> None:
        topics = broker_topics(random.Random(f"{seed}:look:{k}"), base_clients, 2000)
        lk = trie.lookup
        done = 0
        try:
            while not stop.is_set():
                for t in topics:
                    lk(t)
                done += len(topics)
                beats[k] = time.monotonic()
        except Exception as exc:  # reported, not swallowed
            errors.append(f"lookup thread: {exc!r}")
        with lock:
            counts["lookups"] += done

    def snapper(k: int) -> None:
        # Reads the snapshot through the engine only (has_subscribers, len): a
        # Snapshot.lookup could spin forever on an id freed before the snapshot was
        # pinned (tests/trie/test_threads.py replays it), which would stall this thread.
        topics = broker_topics(random.Random(f"{seed}:snap:{k}"), base_clients, 20)
        taken = looked = 0
        try:
            while not stop.is_set():
                snap = trie.snapshot()
                for t in topics:
                    snap.has_subscribers(t)
                looked += len(topics) + 1
                if len(snap) < base_len:
                    errors.append(f"snapshot {taken} holds {len(snap)} < {base_len} pairs")
                    break
                time.sleep(0.001)
                del snap
                taken += 1
                beats[lookup_threads + k] = time.monotonic()
        except Exception as exc:
            errors.append(f"snapshot thread: {exc!r}")
        with lock:
            counts["snapshots"] += taken
            counts["snapshot_reads"] += looked

    threads = [
        threading.Thread(target=looker, args=(k,), daemon=True) for k in range(lookup_threads)
    ]
    threads += [
        threading.Thread(target=snapper, args=(k,), daemon=True) for k in range(snapshot_threads)
    ]
    for th in threads:
        th.start()

    warmup = min(max(cycles // 10, 2 * window), cycles // 2)
    every = max(cycles // SAMPLES, 1)
    samples: list[dict[str, Any]] = []
    stalled = [False] * len(beats)

    def sample(i: int) -> None:
        now = time.monotonic()
        for j, beat in enumerate(beats):
            if now - beat > STALL_SECONDS and not stalled[j]:
                stalled[j] = True
                errors.append(f"reader thread {j} made no progress for {now - beat:.0f}s")
        samples.append(
            {
                "cycle": i,
                "seconds": time.perf_counter() - t0,
                "rss": rss_bytes(),
                "engine_bytes": nb.live_bytes(),
                "engine_allocations": nb.live_allocations(),
                "pairs": len(trie),
                "registry": len(trie._reg),
            }
        )

    live: deque[tuple[str, str]] = deque()
    sub, unsub = trie.subscribe, trie.unsubscribe
    rss_warm: int | None = None
    t0 = time.perf_counter()
    sample(0)
    try:
        with progress.task(f"churn: {fmt_size(cycles)} cycles", cycles) as task:
            for i in range(1, cycles + 1):
                pair = (_churn_filter(rng, base_clients), f"m-{i}")
                if not sub(*pair):
                    raise BenchError(f"churn subscribe of {pair} added nothing")
                live.append(pair)
                if len(live) > window:
                    old = live.popleft()
                    if not unsub(*old):
                        raise BenchError(f"churn unsubscribe of {old} removed nothing")
                if i % every == 0 or i == warmup:
                    sample(i)
                    if i == warmup:
                        rss_warm = samples[-1]["rss"]
                    task.advance(every)
    finally:
        stop.set()
        for th in threads:
            th.join(STALL_SECONDS)
            if th.is_alive():
                errors.append(f"{th.name} did not stop within {STALL_SECONDS}s")
    seconds = time.perf_counter() - t0
    rss_end = samples[-1]["rss"]
    assert rss_warm is not None
    while live:
        unsub(*live.popleft())
    gc.collect()
    pending = nb.reclaim()
    try:
        trie.check_invariants(strict=True)
    except AssertionError as exc:
        errors.append(f"after draining, all threads stopped: {exc}")
    if len(trie) != base_len:
        errors.append(f"after draining the trie holds {len(trie)} pairs, not {base_len}")
    final_stats = trie.stats()
    gil = getattr(sys, "_is_gil_enabled", None)
    return {
        "cycles": cycles,
        "base_subscriptions": base_len,
        "window": window,
        "warmup_cycles": warmup,
        "lookup_threads": lookup_threads,
        "snapshot_threads": snapshot_threads,
        "gil_enabled": bool(gil()) if gil is not None else True,
        "seconds": seconds,
        "cycles_per_second": cycles / seconds,
        "rss_empty": rss_empty,
        "rss_base": rss_base,
        "rss_warm": rss_warm,
        "rss_end": rss_end,
        "growth": (rss_end - rss_warm) / rss_warm,
        "trie_growth": (rss_end - rss_warm) / max(rss_warm - rss_empty, 1),
        "engine_bytes_base": eng_base,
        "engine_bytes_after_drain": nb.live_bytes(),
        "engine_bytes_leaked": nb.live_bytes() - eng_base,
        "reclaim_pending_after_drain": pending,
        "registry_after_drain": len(trie._reg),
        "stats_after_drain": final_stats,
        "counts": counts,
        "errors": errors,
        "samples": samples,
    }


def run(ctx: Context) -> Result:
    sizes, standard = ctx.pick_sizes(DEFAULT, QUICK)
    cycles = sizes[-1]
    base_clients = 25_000 if not ctx.quick else 5_000
    window = 10_000 if not ctx.quick else 2_000
    window = min(window, max(cycles // 10, 1))
    params = {
        "cycles": cycles,
        "base_clients": base_clients,
        "window": window,
        "seed": ctx.seed,
        "lookup_threads": 1,
        "snapshot_threads": 1,
    }
    ctx.progress.note(f"{NAME}: {fmt_size(cycles)} cycles in a child process")
    r = run_child("cstrie_lab.bench.scenarios.churn:churn", params, timeout=600 + 0.003 * cycles)
    res = Result(NAME, params=params)
    if r["errors"]:
        res.error = "; ".join(r["errors"])
    table = Table(
        f"Memory under churn: {fmt_size(cycles)} subscribe/unsubscribe cycles with "
        f"{r['lookup_threads']} lookup + {r['snapshot_threads']} snapshot thread(s)",
        ["measure", "value"],
    )
    table.add("base subscriptions / churn window", f"{r['base_subscriptions']:,} / {window:,}")
    table.add("cycles/s (writer, readers running)", f"{r['cycles_per_second']:,.0f}")
    table.add(
        "lookups / snapshots taken by readers",
        f"{r['counts']['lookups']:,} / {r['counts']['snapshots']:,}",
    )
    table.add(
        "RSS empty interpreter / with base",
        f"{fmt_bytes(r['rss_empty'])} / {fmt_bytes(r['rss_base'])}",
    )
    table.add(
        f"RSS after warm-up ({fmt_size(r['warmup_cycles'])} cycles)", fmt_bytes(r["rss_warm"])
    )
    table.add("RSS at the end", fmt_bytes(r["rss_end"]))
    table.add("RSS growth, whole process", f"{100 * r['growth']:+.2f}%")
    table.add("RSS growth, relative to what the trie added", f"{100 * r['trie_growth']:+.2f}%")
    table.add(
        "engine bytes: after base / after drain",
        f"{r['engine_bytes_base']:,} / {r['engine_bytes_after_drain']:,} "
        f"({r['engine_bytes_leaked']:+,})",
    )
    res.tables.append(table)
    res.floors.append(
        Floor(
            name="churn-rss",
            description=f"RSS growth from after warm-up to the end of {fmt_size(cycles)} cycles",
            measured=100 * r["growth"],
            limit=100 * FLOOR,
            unit="%",
            standard=standard,
        )
    )
    res.data = r
    return res


def plot(res: Result, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    s = res.data["samples"]
    xs = [p["cycle"] for p in s]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(xs, [p["rss"] / 2**20 for p in s], label="RSS (MiB)")
    ax.plot(xs, [p["engine_bytes"] / 2**20 for p in s], label="engine live bytes (MiB)")
    ax.axvline(res.data["warmup_cycles"], color="grey", linestyle=":", label="end of warm-up")
    ax.axhline(
        res.data["rss_warm"] * 1.1 / 2**20,
        color="red",
        linestyle="--",
        label="floor: warm-up RSS + 10%",
    )
    ax.set_xlabel("cycles")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.set_title("cstrie memory under subscribe/unsubscribe churn")
    ax.legend(fontsize=8)
    path = out / "churn.png"
    save(fig, path)
    return [path]


SCENARIO = Scenario(
    NAME, "RSS growth under 1M subscribe/unsubscribe cycles + readers", run, plot, True
)
