"""``memory``: resident memory per subscription at 1,000,000 MQTT subscriptions.

Each measurement runs in a fresh interpreter (:mod:`cstrie_lab.bench.child`) so that
nothing else the suite allocated is counted.  In the child:

1. import cstrie (engine loaded), build the workload's input strings (filters and
   subscriber ids: they are the broker's data, not the trie's), build and drop a
   one-pair trie (one-time per-process state: per-thread call objects, the engine's
   thread record), ``gc.collect()``;
2. read RSS from ``/proc/self/statm`` and the engine's live bytes: the *baseline*;
3. subscribe every pair, ``gc.collect()``, let the engine reclaim retired nodes;
4. read RSS and live bytes again.

``bytes/subscription = (RSS after - RSS baseline) / subscriptions``: what the trie
costs, both its C nodes and its Python side (the registry that maps subscriber
objects to engine ids), including allocator overhead.  The engine's own byte count
(``cst_live_bytes``) is reported next to it.

Shapes (see :mod:`cstrie_lab.bench.workloads`):

* ``broker`` (the floor): 250,000 clients x 4 filters (:func:`broker_pairs`);
* ``harsh``: 1,000,000 clients x 1 filter with random words at two levels, so no
  path and no subscriber is shared (:func:`harsh_pairs`).

PyTrie is measured the same way for comparison.  Floor: broker shape, cstrie,
<= 200 bytes per subscription.
"""

from __future__ import annotations

import gc
import random
import resource
import time
from pathlib import Path
from typing import Any

from cstrie_lab.bench.base import Context, Floor, Result, Scenario, Table
from cstrie_lab.bench.child import run_child
from cstrie_lab.bench.format import fmt_bytes, fmt_size
from cstrie_lab.bench.machine import rss_bytes
from cstrie_lab.bench.plots import save
from cstrie_lab.bench.progress import Progress
from cstrie_lab.bench.workloads import BROKER_FILTERS_PER_CLIENT, broker_pairs, harsh_pairs

NAME = "memory"
DEFAULT = [1_000_000]
QUICK = [50_000]
FLOOR = 200.0
SHAPES = ("broker", "harsh")
IMPLS = ("cstrie", "pytrie")
DESCRIBE = {
    "broker": "250k-style IoT broker: N/4 clients x 4 filters "
    "(site/S/line/L/dev/D/cmd, .../dev/D/config/#, site/S/line/L/+/status, "
    "site/S/broadcast/#); 4-8 levels; ~2 distinct filters per client",
    "harsh": "N clients x 1 filter fleet/gGG/<rand8>/<rand8>/metricM: no shared "
    "path below level 2, no shared subscriber; 5 levels",
}


def measure(shape: str, subscriptions: int, impl: str, seed: int) -> dict[str, Any]:
    """Child side: build one trie and report what it added to RSS."""
    from cstrie import _binding as nb
    from cstrie.trie import Trie
    from cstrie_lab.pytrie import PyTrie

    progress = Progress(prefix="  [child] ")
    rng = random.Random(f"{seed}:{NAME}:{shape}")
    if shape == "broker":
        pairs = broker_pairs(subscriptions // BROKER_FILTERS_PER_CLIENT)
    elif shape == "harsh":
        pairs = harsh_pairs(rng, subscriptions)
    else:
        raise ValueError(f"unknown memory shape {shape!r}")
    n = len(pairs)
    patterns = len({p for p, _ in pairs})
    subscribers = len({s for _, s in pairs})
    levels = sorted({p.count("/") + 1 for p, _ in pairs})

    def new() -> Any:
        return Trie("mqtt") if impl == "cstrie" else PyTrie("mqtt")

    warm = new()
    warm.subscribe("warm/up", "w")
    warm.lookup("warm/up")
    del warm
    gc.collect()
    nb.reclaim()
    rss0, eng0 = rss_bytes(), nb.live_bytes()
    t0 = time.perf_counter()
    trie = new()
    sub = trie.subscribe
    with progress.task(f"{impl} {shape}: subscribe {fmt_size(n)}", n) as task:
        for i, (p, s) in enumerate(pairs):
            sub(p, s)
            if i % 50_000 == 49_999:
                task.advance(50_000)
    build = time.perf_counter() - t0
    gc.collect()
    pending = nb.reclaim()
    rss1, eng1 = rss_bytes(), nb.live_bytes()
    if len(trie) != n:
        raise RuntimeError(f"{impl} holds {len(trie)} pairs, expected {n}")
    out: dict[str, Any] = {
        "shape": shape,
        "impl": impl,
        "subscriptions": n,
        "distinct_filters": patterns,
        "distinct_subscribers": subscribers,
        "levels": levels,
        "rss_baseline": rss0,
        "rss_after": rss1,
        "rss_delta": rss1 - rss0,
        "bytes_per_subscription": (rss1 - rss0) / n,
        "engine_bytes": eng1 - eng0,
        "engine_bytes_per_subscription": (eng1 - eng0) / n,
        "reclaim_pending": pending,
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "build_seconds": build,
    }
    if impl == "cstrie":
        out["stats"] = trie.stats()
    return out


def run(ctx: Context) -> Result:
    sizes, standard = ctx.pick_sizes(DEFAULT, QUICK)
    n = sizes[-1]
    res = Result(NAME, params={"subscriptions": n, "shapes": DESCRIBE})
    table = Table(
        f"Resident memory added by the trie, {fmt_size(n)} MQTT subscriptions (fresh process each)",
        [
            "shape",
            "impl",
            "clients",
            "distinct filters",
            "levels",
            "RSS added",
            "bytes/sub (RSS)",
            "engine bytes/sub",
        ],
    )
    runs: list[dict[str, Any]] = []
    for shape in SHAPES:
        for impl in IMPLS:
            ctx.progress.note(f"{NAME}: {impl}, {shape} shape, {fmt_size(n)} subscriptions")
            r = run_child(
                "cstrie_lab.bench.scenarios.memory:measure",
                {"shape": shape, "subscriptions": n, "impl": impl, "seed": ctx.seed},
                timeout=1800,
            )
            runs.append(r)
            levels = r["levels"]
            table.add(
                shape,
                impl,
                f"{r['distinct_subscribers']:,}",
                f"{r['distinct_filters']:,}",
                f"{levels[0]}-{levels[-1]}",
                fmt_bytes(r["rss_delta"]),
                f"{r['bytes_per_subscription']:.0f}",
                f"{r['engine_bytes_per_subscription']:.0f}" if impl == "cstrie" else "-",
            )
            if shape == "broker" and impl == "cstrie":
                res.floors.append(
                    Floor(
                        name="memory-broker",
                        description=f"RSS bytes per subscription, cstrie, broker shape, "
                        f"{fmt_size(n)} subscriptions",
                        measured=r["bytes_per_subscription"],
                        limit=FLOOR,
                        unit="B/sub",
                        standard=standard,
                    )
                )
    res.tables.append(table)
    res.data["runs"] = runs
    res.notes.append(
        "Baseline = RSS of a fresh interpreter with cstrie imported and the workload's "
        "input strings (filters, subscriber ids) already built; the difference is what "
        "the trie costs: engine nodes + the Python registry + allocator overhead."
    )
    return res


def plot(res: Result, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    runs = res.data["runs"]
    labels = [f"{r['impl']}\n{r['shape']}" for r in runs]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(labels, [r["bytes_per_subscription"] for r in runs], label="RSS added / sub")
    ax.bar(
        labels,
        [r["engine_bytes_per_subscription"] if r["impl"] == "cstrie" else 0 for r in runs],
        width=0.4,
        label="of which engine (C) bytes / sub",
    )
    ax.axhline(FLOOR, color="red", linestyle="--", label=f"floor {FLOOR:.0f} B/sub")
    ax.set_ylabel("bytes per subscription")
    ax.set_title(f"Memory per subscription at {res.params['subscriptions']:,} subscriptions")
    ax.legend(fontsize=8)
    path = out / "memory.png"
    save(fig, path)
    return [path]


SCENARIO = Scenario(NAME, "RSS bytes per subscription at 1M (fresh subprocess)", run, plot, True)
