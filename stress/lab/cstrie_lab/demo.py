"""``cstrie demo``: the README's main job on an embedded default workload.

It builds a realistic MQTT broker workload (devices, sites, wildcard dashboards),
subscribes it into :class:`cstrie.Trie` and into two pure-Python baselines, the
locked :class:`cstrie_lab.pytrie.PyTrie` and the dict-per-level trie a user writes by
hand (:class:`cstrie_lab.classic.DictTrie`, no lock), checks that all three give the
same answers, and prints subscribes, unsubscribes and lookups per second for each,
with the ratios, all measured in the same run in alternating rounds.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from cstrie.trie import Trie
from cstrie_lab.classic.dict_trie import DictTrie
from cstrie_lab.pytrie import PyTrie

#: the contenders, in the order they are printed: label -> new empty MQTT trie
TRIES: dict[str, Callable[[], Any]] = {
    "cstrie": lambda: Trie("mqtt"),
    "PyTrie (pure Python, one lock)": lambda: PyTrie("mqtt"),
    "dict trie (hand-written, no lock)": lambda: DictTrie("mqtt"),
}

METRICS = ("temp", "humidity", "power", "status", "rssi", "door")


def workload(
    rng: random.Random, filters: int, topics: int
) -> tuple[list[tuple[str, str]], list[str]]:
    """(filter, subscriber) pairs and topics of an IoT fleet on MQTT."""
    sites = [f"site{i}" for i in range(max(4, filters // 400))]
    pairs: list[tuple[str, str]] = []
    for n in range(filters):
        site = rng.choice(sites)
        dev = f"dev{rng.randrange(filters // 2 or 1)}"
        metric = rng.choice(METRICS)
        shape = rng.random()
        if shape < 0.80:
            f = f"{site}/{dev}/{metric}"
        elif shape < 0.90:
            f = f"{site}/+/{metric}"
        elif shape < 0.998:
            f = f"{site}/{dev}/#"
        else:
            f = f"+/+/{metric}"  # a few fleet-wide dashboards
        pairs.append((f, f"client{n % (filters // 3 or 1)}"))
    tops = [
        f"{rng.choice(sites)}/dev{rng.randrange(filters // 2 or 1)}/{rng.choice(METRICS)}"
        for _ in range(topics)
    ]
    return pairs, tops


def _rates(
    fns: list[Callable[[str], Any]], topics: list[str], seconds: float, rounds: int = 10
) -> list[float]:
    """Lookups per second of each function, measured in alternating short rounds
    (so a load change on a shared machine hits every contender alike); the
    median round rate of each."""
    per_round = seconds / rounds
    rates: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            done = 0
            start = time.perf_counter()
            while True:
                for t in topics:
                    fn(t)
                done += len(topics)
                elapsed = time.perf_counter() - start
                if elapsed >= per_round:
                    break
            rates[k].append(done / elapsed)
    return [sorted(r)[len(r) // 2] for r in rates]


def _write_rates(
    makers: list[Callable[[], Any]], pairs: list[tuple[str, str]], rounds: int = 5
) -> list[tuple[float, float]]:
    """(subscribes/s, unsubscribes/s) of each trie kind.  Each round, every kind in
    turn (the order rotates) subscribes every pair into a fresh trie, then
    unsubscribes them in the same order; the median round rate of each phase."""
    subs: list[list[float]] = [[] for _ in makers]
    unsubs: list[list[float]] = [[] for _ in makers]
    clock = time.perf_counter
    for r in range(rounds):
        order = list(range(len(makers)))
        order = order[r % len(order) :] + order[: r % len(order)]
        for k in order:
            trie = makers[k]()
            sub, unsub = trie.subscribe, trie.unsubscribe
            t0 = clock()
            for f, s in pairs:
                sub(f, s)
            t1 = clock()
            for f, s in pairs:
                unsub(f, s)
            t2 = clock()
            if len(trie):
                raise AssertionError(f"{type(trie).__name__} not empty after unsubscribing")
            subs[k].append(len(pairs) / (t1 - t0))
            unsubs[k].append(len(pairs) / (t2 - t1))
    med = statistics.median
    return [(med(a), med(b)) for a, b in zip(subs, unsubs, strict=True)]


def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    print(f"cstrie demo: seed={args.seed} filters={args.filters} topics={args.topics}")
    pairs, topics = workload(rng, args.filters, args.topics)
    distinct = list(dict.fromkeys(pairs))
    labels = list(TRIES)
    width = max(map(len, labels))
    writes = _write_rates(list(TRIES.values()), distinct)
    print(
        f"subscribe, then unsubscribe, {len(distinct):,} pairs in a fresh trie "
        "(median of 5 alternating rounds):"
    )
    cost = [1 / a + 1 / b for a, b in writes]  # seconds per pair, both phases
    for k, (label, (sub_rate, unsub_rate)) in enumerate(zip(labels, writes, strict=True)):
        ratio = f"  (time / cstrie: {cost[k] / cost[0]:.2f}x)" if k else ""
        print(
            f"  {label:{width}}  {sub_rate:>11,.0f} subscribes/s  "
            f"{unsub_rate:>11,.0f} unsubscribes/s{ratio}"
        )
    tries = [make() for make in TRIES.values()]
    for trie in tries:
        for f, s in pairs:
            trie.subscribe(f, s)
    fast = tries[0]
    sample = topics[: min(len(topics), 2000)]
    for topic in sample:
        want = sorted(map(str, fast.lookup(topic)))
        for label, other in zip(labels[1:], tries[1:], strict=True):
            if sorted(map(str, other.lookup(topic))) != want:
                print(f"MISMATCH on {topic!r}: cstrie and {label}", file=sys.stderr)
                return 1
    rates = _rates([trie.lookup for trie in tries], sample, 2 * args.seconds)
    per_topic = sum(len(fast.lookup(t)) for t in sample) / len(sample)
    print(
        f"lookup ({per_topic:.1f} matching subscribers per topic; median of 10 alternating rounds):"
    )
    for label, rate in zip(labels, rates, strict=True):
        print(f"  {label:{width}}  {rate:>11,.0f} topics/s")
    print(
        f"cstrie looks up {rates[0] / rates[1]:.1f}x as fast as PyTrie and "
        f"{rates[0] / rates[2]:.1f}x as fast as the dict trie on this run (one thread - "
        "see docs/free-threading.md for many)"
    )
    snap = fast.snapshot()
    print(
        f"snapshot: {len(snap)} pairs, {len(snap.subscriptions())} patterns; "
        f"example: {topics[0]!r} -> {sorted(map(str, snap.lookup(topics[0])))[:5]}"
    )
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="subscribe and match an embedded workload, with a baseline",
        description=__doc__,
    )
    p.add_argument("--filters", type=int, default=20000, help="subscriptions (default 20000)")
    p.add_argument("--topics", type=int, default=50000, help="distinct topics (default 50000)")
    p.add_argument("--seconds", type=float, default=1.5, help="time per lookup measurement")
    p.add_argument("--seed", type=int, default=2026, help="workload seed (default 2026)")
    p.set_defaults(func=run)
