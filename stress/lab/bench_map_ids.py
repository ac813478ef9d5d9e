"""One lookup and lookup_many at a million filters, for before/after pairs.

A lookup's time at 1M random MQTT filters is mostly memory misses: the walk
(warmed, native/match.c), then the mapping of ~31 ids per topic to their
subscribers (native/hotpath/reader.c, ``map_ids``).  This builds one trie of
``--filters`` random 5-level filters (``Trie.from_pairs``, subscriber ``i``
for filter ``i``), then times ``--passes`` passes of 20,000 uniform random
topics through ``Trie.lookup`` and through ``Trie.lookup_many`` (256 topics
per call), alternating, and prints the best pass of each in ns per topic.
Run it once per build, alternating builds (a build is its compiled
``cstrie/_hotpath`` and ``cstrie/_native``):

    python stress/lab/bench_map_ids.py [--filters 1000000] [--passes 4]
"""

from __future__ import annotations

import argparse
import random
import time

from cstrie import Trie
from cstrie_lab.bench.workloads import random5_mqtt_filters, random5_uniform_topics


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--filters", type=int, default=1_000_000)
    ap.add_argument("--topics", type=int, default=20_000)
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    rng = random.Random(a.seed)
    filters = random5_mqtt_filters(rng, a.filters)
    trie = Trie.from_pairs(((f, i) for i, f in enumerate(filters)), "mqtt")
    topics = random5_uniform_topics(rng, a.topics)
    lookup, many = trie.lookup, trie.lookup_many
    best = {"lookup": float("inf"), "lookup_many": float("inf")}
    for _ in range(a.passes):
        t0 = time.perf_counter()
        for t in topics:
            lookup(t)
        best["lookup"] = min(best["lookup"], time.perf_counter() - t0)
        t0 = time.perf_counter()
        for i in range(0, len(topics), 256):
            many(topics[i : i + 256])
        best["lookup_many"] = min(best["lookup_many"], time.perf_counter() - t0)
    print(" ".join(f"{k} {v / len(topics) * 1e9:,.0f} ns" for k, v in best.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
