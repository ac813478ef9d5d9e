"""Lookups at 1M filters from Python, one build at a time: before/after pairs.

The ``million`` scenario's trie (1,000,000 random 5-level MQTT filters,
subscriber ``i`` for filter ``i``, the bench's seed) and its 20,000 uniform
topics; prints ns per topic of ``Trie.lookup`` and of ``Trie.lookup_many``
in chunks of 256 (best of ``--passes``), then, with ``--cache``, the cost of
the result cache on traffic that never repeats a topic: ``--rounds`` pairs
of passes over fresh uniform topics, cache on (an O(1) copy with
``set_cache``) and off in turn, and the median of on / off.  Run it with
each build in turn (swap the built modules between runs), e.g.::

    python stress/lab/bench_million_lookups.py --cache
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

import cstrie
from cstrie_lab.bench import DEFAULT_SEED
from cstrie_lab.bench.workloads import random5_mqtt_filters, random5_uniform_topics

MANY = 256


def _best(fn: Callable[[], None], passes: int, count: int) -> float:
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best / count * 1e9


def _pass(trie: cstrie.Trie, topics: list[str]) -> float:
    """One pass of ``trie.lookup`` over ``topics``: ns per topic."""
    lookup = trie.lookup
    t0 = time.perf_counter()
    for t in topics:
        lookup(t)
    return (time.perf_counter() - t0) / len(topics) * 1e9


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--filters", type=int, default=1_000_000)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--cache", action="store_true", help="also the cache's cost on uniform traffic")
    ap.add_argument("--rounds", type=int, default=12)
    a = ap.parse_args(argv)

    def rng(name: str) -> random.Random:  # as the bench's Context.rng
        return random.Random(f"{DEFAULT_SEED}:{name}")

    trie = cstrie.Trie("mqtt")
    for i, f in enumerate(random5_mqtt_filters(rng("million:filters"), a.filters)):
        trie.subscribe(f, i)
    topics = random5_uniform_topics(rng("million:topics"), 20_000)
    lookup = trie.lookup

    def singles() -> None:
        for t in topics:
            lookup(t)

    def batches() -> None:
        for i in range(0, len(topics), MANY):
            trie.lookup_many(topics[i : i + MANY])

    one = _best(singles, a.passes, len(topics))
    many = _best(batches, a.passes, len(topics))
    print(f"lookup {one:.0f} ns, lookup_many {many:.0f} ns per topic ({one / many:.2f}x)")
    if a.cache:
        cached = trie.copy()
        cached.set_cache(64 << 20)
        fresh = random.Random(5)
        ratios = []
        for r in range(a.rounds):
            x = random5_uniform_topics(fresh, 5_000)
            y = random5_uniform_topics(fresh, 5_000)
            first, second = (cached, trie) if r % 2 else (trie, cached)
            t1, t2 = _pass(first, x), _pass(second, y)
            on, off = (t1, t2) if first is cached else (t2, t1)
            ratios.append(on / off)
        print(
            f"cache on / off, fresh uniform topics: median {statistics.median(ratios):.3f} "
            f"({min(ratios):.3f}-{max(ratios):.3f}, {a.rounds} pairs)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
