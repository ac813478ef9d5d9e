"""Writes into a trie that snapshots are taken of: subscribe / unsubscribe ns per op.

The ``scale`` scenario's shape (``scale_pairs``: tenants, devices, metrics),
then ``--rounds`` rounds of: ``--lookups`` lookups of existing topics, 50
subscribes then 50 unsubscribes of new devices (timed), and, unless
``--no-snapshots``, 25 snapshots taken and dropped.  So each round's first
write on a path renews it (the copies of shared C-nodes retain their
children, trie.c R6): what a C-node's width costs a write.  Before/after
pairs: run it with each build in turn, e.g.::

    python stress/lab/bench_write_after_snapshot.py --size 1000000 --rounds 400
"""

from __future__ import annotations

import argparse
import random
import time

import cstrie
from cstrie_lab.bench.workloads import scale_extra_pairs, scale_pairs, scale_topics

BATCH = 50
SNAPSHOTS = 25


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--lookups", type=int, default=200)
    ap.add_argument("--no-snapshots", action="store_true")
    a = ap.parse_args(argv)
    trie = cstrie.Trie()
    for f, s in scale_pairs(a.size):
        trie.subscribe(f, s)
    rng = random.Random(1)
    extra = scale_extra_pairs(rng, a.size, 20 * BATCH, first_id=a.size)
    topics = scale_topics(rng, a.size, 100 * a.lookups)
    sub_s = unsub_s = 0.0
    for r in range(a.rounds):
        batch = extra[(r % 20) * BATCH : (r % 20 + 1) * BATCH]
        for t in topics[(r % 100) * a.lookups : (r % 100 + 1) * a.lookups]:
            trie.lookup(t)
        t0 = time.perf_counter()
        for f, s in batch:
            trie.subscribe(f, s)
        t1 = time.perf_counter()
        for f, s in batch:
            trie.unsubscribe(f, s)
        t2 = time.perf_counter()
        sub_s += t1 - t0
        unsub_s += t2 - t1
        if not a.no_snapshots:
            snaps = [trie.snapshot() for _ in range(SNAPSHOTS)]
            del snaps
    per = a.rounds * BATCH
    print(f"subscribe {sub_s / per * 1e9:.0f} ns, unsubscribe {unsub_s / per * 1e9:.0f} ns per op")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
