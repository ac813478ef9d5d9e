"""``scale``: how lookup, subscribe, unsubscribe and snapshot costs grow with size.

One :class:`cstrie.Trie` (MQTT) per size is built from
:func:`~cstrie_lab.bench.workloads.scale_pairs` (``tenant/T/device/D/mM`` filters plus
per-tenant ``+`` and ``#`` filters, one subscriber each) and all of them are kept
alive together, so every operation is timed round-robin across the sizes in the
same rounds.  Topics have the same shape and byte length at every size and each
matches exactly 3 filters.

Operations (median ns per operation over ``repeat`` rounds):

* ``lookup``      - 50 random topics of existing filters per batch: the next 50 of
                    a pool of 20,000 drawn uniformly over the whole trie, so at
                    1M a topic is rarely looked up twice and its path is mostly
                    not in the CPU caches (random traffic, what a broker sees);
* ``lookup-engine`` - the same kind of lookups (its own pool) as bare engine calls
                    on pre-encoded bytes (a diagnostic: how much of ``lookup``
                    and of its growth is the engine, how much the Python wrapper
                    and its subscriber registry);
* ``lookup-hot``  - the same 50 topics in every round: their paths stay cached,
                    so this is the algorithmic cost without cache misses
                    (informational);
* ``lookup-bulk`` - ``lookup`` on a second trie holding the same pairs, made by
                    ``Trie.from_pairs`` (the bulk build, as a load from a file
                    makes it: nodes in 2 MiB huge-page blocks) instead of
                    ``subscribe`` calls (informational; the floor is judged on
                    ``lookup``);
* ``subscribe``   - 50 new pairs of the same shape (new devices under existing
                    tenants, new subscribers; the next 50 of 1,000) per batch ...
* ``unsubscribe`` - ... removed again in the next batch (the trie returns to its size);
* ``snapshot``    - 25 ``Trie.snapshot()`` calls per batch (kept alive) ...
* ``drop``        - ... and dropped again (``cst_free`` of an unchanged snapshot);
* ``snap+write``  - ``s = t.snapshot(); t.subscribe(...); del s``: the lazy path
                    copy a write pays right after a snapshot (informational).

Floors: lookup(largest) <= 2 x lookup(smallest); snapshot(largest) <= 3 x
snapshot(smallest); at the standard sizes 1k, 100k, 1M.
"""

from __future__ import annotations

import gc
from pathlib import Path

from cstrie.trie import Snapshot, Trie
from cstrie_lab.bench.base import BenchError, Context, Floor, Result, Scenario, Table
from cstrie_lab.bench.format import fmt_ns, fmt_ratio, fmt_size
from cstrie_lab.bench.plots import save
from cstrie_lab.bench.timing import chunks, summarize, time_batch
from cstrie_lab.bench.workloads import scale_extra_pairs, scale_pairs, scale_topics

NAME = "scale"
DEFAULT = [1_000, 100_000, 1_000_000]
QUICK = [1_000, 10_000, 50_000]
LOOKUP_TOPICS = 20_000
LOOKUP_BATCH = 50
WRITES = 1_000
WRITE_BATCH = 50
SNAPSHOTS = 25
OPS = (
    "lookup",
    "lookup-engine",
    "lookup-hot",
    "lookup-bulk",
    "subscribe",
    "unsubscribe",
    "snapshot",
    "drop",
    "snap+write",
)
FLOORS = {"lookup": 2.0, "snapshot": 3.0}


class _Sized:
    """One trie of one size and the batches that time it."""

    def __init__(self, ctx: Context, n: int) -> None:
        rng = ctx.rng(f"{NAME}:{n}")
        self.n = n
        self.trie = Trie("mqtt")
        sub = self.trie.subscribe
        pairs = scale_pairs(n)
        with ctx.progress.task(f"{NAME}: build {fmt_size(n)} subscriptions", n) as task:
            for i, (f, s) in enumerate(pairs):
                sub(f, s)
                if i % 10_000 == 9_999:
                    task.advance(10_000)
        self.bulk = Trie.from_pairs(pairs, "mqtt")
        del pairs
        if len(self.trie) != n or len(self.bulk) != n:
            raise BenchError(f"scale trie has {len(self.trie)} pairs, expected {n}")
        topics = scale_topics(rng, n, LOOKUP_TOPICS)
        for t in topics[:50]:
            if len(self.trie.lookup(t)) != 3:
                raise BenchError(f"topic {t!r} should match 3 filters at size {n}")
        self.topic_batches = chunks(topics, LOOKUP_BATCH)
        # the engine diagnostic draws its own topics: reusing the batch just looked
        # up would find it in the CPU caches
        other = scale_topics(rng, n, LOOKUP_TOPICS)
        self.encoded_batches = chunks([t.encode() for t in other], LOOKUP_BATCH)
        from cstrie import _binding as nb

        self._engine_ids = nb.ffi.new("uint64_t[]", 4096)
        self.hot = topics[:LOOKUP_BATCH]
        self.bulk_batches = chunks(scale_topics(rng, n, LOOKUP_TOPICS), LOOKUP_BATCH)
        self.write_batches = chunks(scale_extra_pairs(rng, n, WRITES, first_id=n), WRITE_BATCH)
        self.snaps: list[Snapshot] = []
        self.round = 0

    def lookup(self) -> None:
        lk = self.trie.lookup
        for t in self.topic_batches[self.round % len(self.topic_batches)]:
            lk(t)

    def lookup_bulk(self) -> None:
        lk = self.bulk.lookup
        for t in self.bulk_batches[self.round % len(self.bulk_batches)]:
            lk(t)

    def lookup_hot(self) -> None:
        lk = self.trie.lookup
        for t in self.hot:
            lk(t)

    def lookup_engine(self) -> None:
        from cstrie import _binding as nb

        cap = 4096
        fn, h, ids = nb.lib.cst_lookup, self.trie._h, self._engine_ids
        for d in self.encoded_batches[self.round % len(self.encoded_batches)]:
            fn(h, d, len(d), ids, cap)

    def _writes(self) -> list[tuple[str, int]]:
        batch: list[tuple[str, int]] = self.write_batches[self.round % len(self.write_batches)]
        return batch

    def subscribe(self) -> None:
        sub = self.trie.subscribe
        for f, s in self._writes():
            sub(f, s)

    def unsubscribe(self) -> None:
        unsub = self.trie.unsubscribe
        for f, s in self._writes():
            unsub(f, s)

    def snapshot(self) -> None:
        take = self.trie.snapshot
        add = self.snaps.append
        for _ in range(SNAPSHOTS):
            add(take())

    def drop(self) -> None:
        self.snaps.clear()

    def snap_write(self) -> None:
        take = self.trie.snapshot
        sub = self.trie.subscribe
        for f, s in self._writes()[:SNAPSHOTS]:
            snap = take()
            sub(f, s)
            del snap

    def undo_snap_write(self) -> None:
        unsub = self.trie.unsubscribe
        for f, s in self._writes()[:SNAPSHOTS]:
            unsub(f, s)


def _round(sized: _Sized) -> dict[str, float]:
    """One round of every operation on one size: ns/op each."""
    out = {"lookup": time_batch(sized.lookup, LOOKUP_BATCH)}
    out["lookup-engine"] = time_batch(sized.lookup_engine, LOOKUP_BATCH)
    out["lookup-hot"] = time_batch(sized.lookup_hot, LOOKUP_BATCH)
    out["lookup-bulk"] = time_batch(sized.lookup_bulk, LOOKUP_BATCH)
    out["subscribe"] = time_batch(sized.subscribe, WRITE_BATCH)
    out["unsubscribe"] = time_batch(sized.unsubscribe, WRITE_BATCH)
    out["snapshot"] = time_batch(sized.snapshot, SNAPSHOTS)
    out["drop"] = time_batch(sized.drop, SNAPSHOTS)
    out["snap+write"] = time_batch(sized.snap_write, SNAPSHOTS)
    sized.undo_snap_write()
    sized.round += 1
    gc.collect(0)
    return out


def run(ctx: Context) -> Result:
    sizes, standard = ctx.pick_sizes(DEFAULT, QUICK)
    sizes = sorted(set(sizes))
    if len(sizes) < 2:
        raise ValueError("scale needs at least two sizes (the smallest is the baseline)")
    repeat = ctx.pick_repeat(400, 60)
    res = Result(
        NAME,
        params={
            "sizes": sizes,
            "repeat": repeat,
            "lookup_topics": LOOKUP_TOPICS,
            "lookup_batch": LOOKUP_BATCH,
            "writes": WRITES,
            "write_batch": WRITE_BATCH,
            "snapshots_per_batch": SNAPSHOTS,
            "shape": "tenant/tNNNNNN/device/dNNN/mN (+ per-tenant device/+/mN and #)",
        },
    )
    tries = [_Sized(ctx, n) for n in sizes]
    for s in tries:  # warm-up rounds, untimed: every batch once
        for _ in range(2 * len(s.write_batches)):
            _round(s)
    gc.collect()
    samples: dict[int, dict[str, list[float]]] = {n: {op: [] for op in OPS} for n in sizes}
    with ctx.progress.task(f"{NAME}: time {len(OPS)} operations x {len(sizes)} sizes", repeat) as t:
        for r in range(repeat):
            k = r % len(tries)
            for s in tries[k:] + tries[:k]:
                for op, v in _round(s).items():
                    samples[s.n][op].append(v)
            t.advance()
    stats = {n: {op: summarize(v) for op, v in by.items()} for n, by in samples.items()}
    small, large = sizes[0], sizes[-1]
    table = Table(
        "cstrie cost per operation by trie size (median ns, IQR in brackets), MQTT",
        [
            "operation",
            *[f"{fmt_size(n)} subs" for n in sizes],
            f"{fmt_size(large)} / {fmt_size(small)}",
        ],
    )
    ratios: dict[str, float] = {}
    for op in OPS:
        ratios[op] = stats[large][op].median / stats[small][op].median
        table.add(
            op,
            *[f"{fmt_ns(stats[n][op].median)} [{fmt_ns(stats[n][op].iqr)}]" for n in sizes],
            fmt_ratio(ratios[op]),
        )
    res.tables.append(table)
    for op, limit in FLOORS.items():
        res.floors.append(
            Floor(
                name=f"scale-{op}",
                description=f"{op} at {fmt_size(large)} / at {fmt_size(small)} subscriptions",
                measured=ratios[op],
                limit=limit,
                standard=standard,
            )
        )
    res.data["ns_per_op"] = {
        str(n): {op: s.to_dict() for op, s in by.items()} for n, by in stats.items()
    }
    res.data["ratio_largest_over_smallest"] = ratios
    res.data["engine_stats"] = {str(s.n): s.trie.stats() for s in tries}
    return res


def plot(res: Result, out: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    data = res.data["ns_per_op"]
    sizes = [int(n) for n in data]
    fig, ax = plt.subplots(figsize=(7, 4))
    for op in OPS:
        ax.plot(sizes, [data[str(n)][op]["median"] for n in sizes], marker="o", label=op)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("subscriptions in the trie")
    ax.set_ylabel("ns per operation (median)")
    ax.set_title("cstrie: cost per operation vs trie size")
    ax.legend(fontsize=8)
    path = out / "scale.png"
    save(fig, path)
    return [path]


SCENARIO = Scenario(NAME, "lookup/subscribe/unsubscribe/snapshot cost at 1k..1M", run, plot)
