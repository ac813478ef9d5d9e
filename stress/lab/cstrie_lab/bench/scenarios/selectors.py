"""``selectors``: the selector index against testing every selector per message.

Workload (the skipfilter article's, Mercure-style): ``N`` subscribers (5,000)
with 3 URI-template selectors each: their own books
(``https://example.com/users/{u}/books/{id}``), a shared one
(``https://example.com/books/{id}``, a tenth of them) or a chat room
(``https://example.com/rooms/{r}/{msg}``, 50 rooms), and an exact topic of
their own (``https://example.com/users/{u}``).  Each message is published to 2
topics (``https://example.com/books/{n}`` and ``https://example.com/users/{u}/books/{n}``).

- hot: messages drawn from 200 topic pairs, again and again;
- cold: every message's topics new (the cache fills and evicts every time).

Baseline: every selector of every subscriber tested against both topics (the
same compiled selectors), each matching subscriber once.  Both must agree
(checked on a sample first).  Floors: hot baseline / index >= 100, cold
baseline / index >= 1.  Then ``TOPICS`` (1M) distinct topics go through an
index with a small cache budget, and the cache's byte counter is read every
1,000 lookups: floor, its maximum <= the budget.  Memory: tracemalloc's count
of what building the index allocated.
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

from cstrie.selectors import SelectorIndex, compile_selector
from cstrie_lab.bench.base import BenchError, Context, Floor, Result, Scenario, Table
from cstrie_lab.bench.format import fmt_bytes, fmt_ns, fmt_ratio, fmt_size
from cstrie_lab.bench.timing import interleave

NAME = "selectors"
SUBSCRIBERS = 5_000
TOPICS = 1_000_000
BUDGET = 4 << 20
HOT_PAIRS = 200
BATCH = 20


def _selectors(u: int) -> list[tuple[str, str]]:
    third = (
        ("template", "https://example.com/books/{id}")
        if u % 10 == 0
        else ("template", f"https://example.com/rooms/{u % 50}/{{msg}}")
    )
    return [
        ("template", f"https://example.com/users/{u}/books/{{id}}"),
        third,
        ("exact", f"https://example.com/users/{u}"),
    ]


def _message(n: int, u: int) -> list[str]:
    return [f"https://example.com/books/{n}", f"https://example.com/users/{u}/books/{n}"]


class Naive:
    """Every selector of every subscriber tested per message."""

    def __init__(self) -> None:
        self.subs: list[tuple[Any, list[Any]]] = []

    def add(self, sub: Any, sels: list[tuple[str, str]]) -> None:
        self.subs.append((sub, [compile_selector(k, t) for k, t in sels]))

    def lookup_any(self, topics: list[str]) -> list[Any]:
        enc = [(t, t.encode()) for t in topics]
        return [s for s, sels in self.subs if any(c.match(t, d) for c in sels for t, d in enc)]


def run(ctx: Context) -> Result:
    sizes, standard = ctx.pick_sizes([SUBSCRIBERS, TOPICS], [1_000, 100_000])
    n_subs, n_topics = sizes[0], sizes[-1]
    repeat = ctx.pick_repeat(15, 5)
    rng = ctx.rng(NAME)
    res = Result(
        NAME,
        params={
            "subscribers": n_subs,
            "distinct_topics": n_topics,
            "budget": BUDGET,
            "batch": BATCH,
            "repeat": repeat,
        },
    )
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    idx = SelectorIndex(cache_bytes=64 << 20)
    for u in range(n_subs):
        for kind, text in _selectors(u):
            idx.add(u, text, kind)
    index_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    naive = Naive()
    for u in range(n_subs):
        naive.add(u, _selectors(u))
    hot = [_message(rng.randrange(10**6), rng.randrange(n_subs)) for _ in range(HOT_PAIRS)]
    for msg in hot[:20]:
        if idx.lookup_any(msg) != naive.lookup_any(msg):
            raise BenchError(f"index and baseline disagree on {msg}")
    for msg in hot:  # the hot topics are in the cache before the timing
        idx.lookup_any(msg)
    counter = iter(range(10**9))

    def hot_batch(f: Any) -> Any:
        def go() -> None:
            for _ in range(BATCH):
                f(hot[rng.randrange(HOT_PAIRS)])

        return go

    def cold_batch(f: Any) -> Any:
        def go() -> None:
            for _ in range(BATCH):
                f(_message(10**7 + next(counter), rng.randrange(n_subs)))

        return go

    with ctx.progress.task(f"{NAME}: hot and cold, {fmt_size(n_subs)} subscribers", repeat):
        stats = interleave(
            {
                "index hot": hot_batch(idx.lookup_any),
                "naive hot": hot_batch(naive.lookup_any),
                "index cold": cold_batch(idx.lookup_any),
                "naive cold": cold_batch(naive.lookup_any),
            },
            BATCH,
            repeat=repeat,
        )
    hot_ratio = stats["naive hot"].median / stats["index hot"].median
    cold_ratio = stats["naive cold"].median / stats["index cold"].median
    t = Table(
        f"Per message (2 topics), {fmt_size(n_subs)} subscribers x 3 selectors (median ns)",
        ["traffic", "index", "every selector tested", "ratio"],
    )
    t.add(
        "hot (200 topic pairs)",
        fmt_ns(stats["index hot"].median),
        fmt_ns(stats["naive hot"].median),
        fmt_ratio(hot_ratio),
    )
    t.add(
        "cold (every topic new)",
        fmt_ns(stats["index cold"].median),
        fmt_ns(stats["naive cold"].median),
        fmt_ratio(cold_ratio),
    )
    res.tables.append(t)
    res.floors.append(
        Floor(
            "selectors-hot",
            "every selector tested / index, hot topics",
            hot_ratio,
            100.0,
            kind="min",
            standard=standard,
        )
    )
    res.floors.append(
        Floor(
            "selectors-cold",
            "every selector tested / index, new topics",
            cold_ratio,
            1.0,
            kind="min",
            standard=standard,
        )
    )

    small = SelectorIndex(cache_bytes=BUDGET)
    for u in range(n_subs):
        for kind, text in _selectors(u):
            small.add(u, text, kind)
    peak = 0
    t0 = time.perf_counter()
    label = f"{NAME}: {fmt_size(n_topics)} distinct topics"
    with ctx.progress.task(label, n_topics // 1000) as task:
        for n in range(n_topics):
            small.lookup(f"https://example.com/users/{n % n_subs}/books/{n}")
            if n % 1000 == 999:
                peak = max(peak, small.cache_stats()["bytes"])
                task.advance()
    seconds = time.perf_counter() - t0
    cs = small.cache_stats()
    m = Table("Memory", ["what", "bytes"])
    m.add("index of the subscriptions (tracemalloc)", fmt_bytes(index_bytes))
    m.add(f"cache after {fmt_size(n_topics)} distinct topics (its counter)", fmt_bytes(cs["bytes"]))
    m.add("cache's highest count, read every 1,000 lookups", fmt_bytes(peak))
    m.add("cache budget", fmt_bytes(BUDGET))
    m.add("entries kept / evicted", f"{cs['entries']:,} / {cs['evicted']:,}")
    res.tables.append(m)
    res.floors.append(
        Floor(
            "selectors-cache-budget",
            f"cache bytes at {fmt_size(n_topics)} topics / budget",
            peak / BUDGET,
            1.0,
            kind="max",
            standard=standard,
        )
    )
    res.data = {
        "ns": {k: v.to_dict() for k, v in stats.items()},
        "hot_ratio": hot_ratio,
        "cold_ratio": cold_ratio,
        "index_bytes": index_bytes,
        "cache": cs,
        "cache_peak": peak,
        "distinct_seconds": seconds,
    }
    return res


SCENARIO = Scenario(NAME, "selector index (skipfilter) vs testing every selector", run)
