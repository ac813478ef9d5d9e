"""``cstrie demo``: the README's main job on an embedded default workload.

It builds a realistic MQTT broker workload (devices, sites, wildcard dashboards),
subscribes it into :class:`cstrie.Trie` and into the pure-Python
:class:`cstrie.pytrie.PyTrie`, checks that both give the same answers, and prints
matches per second for each, measured in the same run.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from typing import Any

from cstrie.pytrie import PyTrie
from cstrie.trie import Trie

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


def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    print(f"cstrie demo: seed={args.seed} filters={args.filters} topics={args.topics}")
    pairs, topics = workload(rng, args.filters, args.topics)
    fast, slow = Trie("mqtt"), PyTrie("mqtt")
    t0 = time.perf_counter()
    for f, s in pairs:
        fast.subscribe(f, s)
    t1 = time.perf_counter()
    for f, s in pairs:
        slow.subscribe(f, s)
    t2 = time.perf_counter()
    print(
        f"subscribed {len(fast)} pairs: cstrie {len(pairs) / (t1 - t0):,.0f}/s, "
        f"pure-Python trie {len(pairs) / (t2 - t1):,.0f}/s"
    )
    for t in topics[:2000]:
        if sorted(map(str, fast.lookup(t))) != sorted(map(str, slow.lookup(t))):
            print(f"MISMATCH on {t!r}", file=sys.stderr)
            return 1
    sample = topics[: min(len(topics), 2000)]
    fast_rate, slow_rate = _rates([fast.lookup, slow.lookup], sample, 2 * args.seconds)
    per_topic = sum(len(fast.lookup(t)) for t in sample) / len(sample)
    print(
        f"lookup: cstrie {fast_rate:,.0f} topics/s, pure-Python trie {slow_rate:,.0f} "
        f"topics/s ({per_topic:.1f} matching subscribers per topic)"
    )
    print(
        f"cstrie is {fast_rate / slow_rate:.1f}x the pure-Python trie on this run "
        "(median of 10 alternating rounds; one thread - see docs/free-threading.md for "
        "many)"
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
